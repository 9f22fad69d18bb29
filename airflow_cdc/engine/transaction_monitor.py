"""Debezium's transaction metadata (``provide.transaction.metadata``), shared by both sources.

Debezium (``TransactionMonitor``/``TransactionContext``, debezium-connector-common) sends a
BEGIN and an END event per source transaction to ``<topic.prefix>.<topic.transaction>`` and puts
a ``transaction`` block ``{"id", "total_order", "data_collection_order"}`` in each change
event of the transaction. This module holds that state (the values' shape is envelope.py's); the
sources say when a transaction begins and ends and which events count (the ones they emit).

* The values' field order is that of Debezium's schemas (``SchemaFactory``) as its JSON
  converter writes them with ``schemas.enable=false``: nulls written, not left out.
* ``data_collections`` is in the iteration order of the Java ``HashMap`` Debezium counts in
  (:class:`_JavaHashMapOrder`): not sorted, not insertion order, and a consumer must not rely
  on it - but it is what Debezium writes, so the oracle can compare byte for byte.
* Debezium keeps the transaction's state in every offset written inside it
  (``transaction_id``, ``transaction_data_collection_order_<collection>``): a restart inside a
  transaction continues its numbering and sends no second BEGIN. :meth:`load`/:meth:`stored`
  read and write the same keys.

The sources use it only when the option is on, so their hot paths with it off do not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.config import Field
from airflow_cdc.engine.connect_schema import TRANSACTION_SCHEMAS
from airflow_cdc.engine.envelope import transaction_block, transaction_value
from airflow_cdc.engine.records import Offset, Partition, SourceRecord

#: Debezium's offset keys (TransactionContext.OFFSET_TRANSACTION_ID, OFFSET_TABLE_COUNT_PREFIX).
OFFSET_TRANSACTION_ID = "transaction_id"
OFFSET_COUNT_PREFIX = "transaction_data_collection_order_"
#: Debezium's two settings, with its defaults; both sources declare them.
TRANSACTION_FIELDS = (
    Field(
        "provide.transaction.metadata",
        type="bool",
        default=False,
        doc="Send BEGIN/END events of each transaction to <topic.prefix>.<topic.transaction> and a "
        "transaction block (id, total_order, data_collection_order) in each change event.",
    ),
    Field("topic.transaction", default="transaction", doc="The transaction topic's name after topic.prefix."),
)


def _java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, as a signed 32-bit int would overflow."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


class _JavaHashMapOrder:
    """Counts per data collection, iterated as Debezium's ``HashMap<String, Long>`` iterates.

    A HashMap walks its buckets in index order (``hash ^ hash >>> 16`` masked by the table's
    capacity), each bucket in insertion order (a resize splits a bucket keeping that order).
    The capacity starts at 16 and doubles when the size exceeds 3/4 of it; ``clear()`` - what
    Debezium does at each transaction's end - keeps it, so it is state of the stream, not of one
    transaction. (A bucket of 8+ keys in a table of 64+ becomes a tree with another order: not
    modelled, it needs dozens of tables colliding in one transaction.)"""

    __slots__ = ("capacity", "counts")

    def __init__(self) -> None:
        self.capacity = 16
        self.counts: dict[str, int] = {}

    def increment(self, key: str) -> int:
        counts = self.counts
        count = counts.get(key, 0) + 1
        counts[key] = count
        if count == 1 and len(counts) > self.capacity * 3 // 4:
            self.capacity *= 2
        return count

    def put(self, key: str, count: int) -> None:
        self.counts[key] = count
        if len(self.counts) > self.capacity * 3 // 4:
            self.capacity *= 2

    def clear(self) -> None:
        self.counts.clear()

    def items(self) -> list[tuple[str, int]]:
        mask = self.capacity - 1

        def bucket(entry: tuple[int, tuple[str, int]]) -> tuple[int, int]:
            h = _java_string_hash(entry[1][0])
            return ((h ^ (h >> 16)) & mask, entry[0])

        return [item for _, item in sorted(enumerate(self.counts.items()), key=bucket)]


class TransactionMonitor:
    """One stream's transaction state (Debezium's TransactionContext) and its events.

    ``id`` is the transaction as the offsets name it (PostgreSQL's xid, MySQL's GTID or
    file:position); the id written into events is passed in, as PostgreSQL writes
    ``<xid>:<lsn of the event>`` (Debezium's PostgresTransactionMonitor)."""

    def __init__(self, topic: str, partition: Partition) -> None:
        self.topic, self.partition = topic, partition
        self.id: str | None = None
        self.total = 0
        self._counts = _JavaHashMapOrder()

    # -- state -----------------------------------------------------------------------------
    def load(self, offset: Offset | None) -> None:
        """The state an offset stored (TransactionContext.load): a new map, as Debezium makes."""
        self._counts = _JavaHashMapOrder()
        self.id, self.total = None, 0
        if not offset:
            return
        stored = offset.get(OFFSET_TRANSACTION_ID)
        self.id = None if stored is None else str(stored)
        for key, value in offset.items():
            if key.startswith(OFFSET_COUNT_PREFIX) and isinstance(value, int):
                self._counts.put(key[len(OFFSET_COUNT_PREFIX) :], value)
        self.total = sum(self._counts.counts.values())

    def stored(self, offset: Mapping[str, Any]) -> dict[str, Any]:
        """``offset`` with the transaction's state added (TransactionContext.store)."""
        out = dict(offset)
        if self.id is not None:
            out[OFFSET_TRANSACTION_ID] = self.id
        for collection, count in self._counts.counts.items():
            out[OFFSET_COUNT_PREFIX + collection] = count
        return out

    @property
    def in_progress(self) -> bool:
        return self.id is not None

    # -- events ----------------------------------------------------------------------------
    def begin(self, tx_id: str) -> bool:
        """A transaction starts; False when it is the one restored from the offsets (its start
        is replayed after a restart: Debezium keeps the counters and sends no second BEGIN)."""
        if self.id == tx_id:
            return False
        self.id, self.total = tx_id, 0
        self._counts.clear()
        return True

    def end(self) -> None:
        self.id, self.total = None, 0
        self._counts.clear()

    def event(self, collection: str, shown_id: str) -> dict[str, Any]:
        """Count one change event of ``collection``; its ``transaction`` block."""
        self.total += 1
        order = self._counts.increment(collection)
        return transaction_block(shown_id, self.total, order)

    def begin_record(self, shown_id: str, ts_ms: int, offset: Offset) -> SourceRecord:
        value = transaction_value("BEGIN", shown_id, ts_ms)
        return SourceRecord(self.topic, {"id": shown_id}, value, self.partition, offset, schemas=TRANSACTION_SCHEMAS)

    def end_record(self, shown_id: str, ts_ms: int, offset: Offset) -> SourceRecord:
        value = transaction_value("END", shown_id, ts_ms, self._counts.items())
        return SourceRecord(self.topic, {"id": shown_id}, value, self.partition, offset, schemas=TRANSACTION_SCHEMAS)
