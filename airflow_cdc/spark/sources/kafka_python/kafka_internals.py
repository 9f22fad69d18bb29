"""Everything the source takes from kafka-python's private internals, and nothing else.

Why: decoding dominates a read. kafka-python's public way, ``poll()`` returning one
``ConsumerRecord`` per record (deserializers too are called per record), builds three objects
per record and parses each varint in a function call: about 5 µs a record, against about
1.5 µs for a record batch decoded straight into columns (:mod:`.columnar`). kafka-python has no
public API that hands over record batches, so the source hooks its fetcher:
:class:`_ColumnarRecords` subclasses the private ``Fetcher.PartitionRecords`` and overrides only
``_unpack_records``, the generator that turns one fetch's records into what ``poll()`` returns.
Everything else the fetcher relies on (``take``/``drain``, the next fetch offset and leader
epoch it moves the position to, aborted-transaction tracking, deferred exceptions, metrics)
stays kafka-python's own code. Composition would not remove the dependency: the fetcher builds
these objects itself, through its ``PartitionRecords`` attribute, and reads their state; a
wrapper or look-alike hooked in the same place would have to copy or reach into that state,
depending on more of kafka-python's internals, not fewer. Bypassing the fetcher (sending
FetchRequests ourselves) would mean rewriting fetch sessions, leader epochs, preferred read
replicas and the pipelining that lets the next fetch travel while a batch is decoded.

What this depends on, as in kafka-python 3.0 (checked against 3.0.12; pyproject allows
``>=3.0,<4``):

- ``KafkaConsumer._fetcher`` and the class its ``PartitionRecords`` attribute names;
- ``Fetcher.PartitionRecords._unpack_records(tp, records, key_deserializer,
  value_deserializer)`` and what the override uses: ``fetch_offset``, ``next_fetch_offset``,
  ``leader_epoch``, ``records_read``, ``bytes_read``, ``check_crcs``, ``isolation_level``,
  ``aborted_producer_ids``, ``drain()``, ``_consume_aborted_transactions_up_to``,
  ``_is_batch_aborted``, ``_contains_abort_marker``; and that the items it yields are dropped
  while their ``.offset`` is below the fetch offset (``_maybe_skip_record``);
- ``kafka.protocol.consumer.IsolationLevel``;
- ``DefaultRecordBatch._maybe_uncompress()``, ``._buffer`` and ``._pos``: the uncompressed
  records' bytes and where they start (:func:`decode_batch`);
- ``KafkaConsumer._manager.cluster.config`` (:func:`shorten_metadata_backoff`).

Where the fetcher's class is not the expected one, :func:`use_columnar_records` says so and the
records are read through ``poll()`` as usual (slower, the same rows); where the cluster config
is missing, the backoff is left alone. A changed signature or meaning is *not* detected here:
``test_a_read_decodes_as_kafka_python_does`` (tests/integration/spark/test_kafka_python_source.py)
compares the columnar read with kafka-python's own decoding, and is the test to run on an
upgrade of kafka-python.
"""

from __future__ import annotations

import bisect
from typing import Any

from kafka import KafkaConsumer
from kafka.errors import CorruptRecordError

from airflow_cdc.spark.sources.kafka_python.columnar import Columns, decode_records

METADATA_BACKOFF_MS = 20


def shorten_metadata_backoff(consumer: KafkaConsumer) -> None:
    """kafka-python 3.0 spaces metadata requests 100 ms apart whatever ``retry.backoff.ms`` says,
    so the first request for a topic's leader, right after bootstrapping, waits 100 ms: a tenth
    of a second per task. Allow 20 ms (where the internals are as expected)."""
    cluster = getattr(getattr(consumer, "_manager", None), "cluster", None)
    config = getattr(cluster, "config", None)
    if isinstance(config, dict) and "retry_backoff_ms" in config:
        config["retry_backoff_ms"] = min(config["retry_backoff_ms"], METADATA_BACKOFF_MS)


try:
    from kafka.consumer.fetcher import Fetcher
    from kafka.protocol.consumer import IsolationLevel

    _PartitionRecords: Any = Fetcher.PartitionRecords
    _READ_COMMITTED: Any = IsolationLevel.READ_COMMITTED
except (ImportError, AttributeError):  # another kafka-python: read records as usual
    _PartitionRecords, _READ_COMMITTED = object, None


def use_columnar_records(consumer: KafkaConsumer) -> bool:
    """Make ``consumer.poll()`` return one :class:`PendingBatch` per record batch instead of one
    ``ConsumerRecord`` per record, where this kafka-python has the fetcher internals it needs
    (about 1.5 µs a record instead of 5, see above). Without those internals (another
    kafka-python), the records are read as usual."""
    fetcher = getattr(consumer, "_fetcher", None)
    if _PartitionRecords is object or getattr(fetcher, "PartitionRecords", None) is not _PartitionRecords:
        return False
    fetcher.PartitionRecords = _ColumnarRecords  # type: ignore[union-attr]
    return True


def decode_batch(batch: Any, fetch_offset: int) -> Columns:
    """A magic-2 record batch as columns, records below ``fetch_offset`` left out.

    Record: length varint, attributes int8, timestamp delta, offset delta, key length, key,
    value length, value, header count, headers. Varints are zigzag-encoded."""
    batch._maybe_uncompress()
    buf = bytes(batch._buffer)
    columns = Columns()
    columns.nbytes = len(buf)
    try:
        end = decode_records(buf, batch._pos, batch.records_count, batch.base_offset, columns)
    except (IndexError, ValueError) as exc:
        raise CorruptRecordError(f"record batch at offset {batch.base_offset} is malformed: {exc!r}") from exc
    if end != len(buf):
        raise CorruptRecordError(f"record batch at offset {batch.base_offset}: {len(buf) - end} bytes left over")
    if columns.offsets and columns.offsets[0] < fetch_offset:
        columns = Columns(*(c[bisect.bisect_left(columns.offsets, fetch_offset) :] for c in _columns(columns)))
    columns.offset = columns.offsets[0] if columns.offsets else -1
    return columns


class PendingBatch:
    """A record batch as the fetcher hands it over, decoded only by :meth:`columns`: after
    ``poll()`` has returned, and so after it has sent the next fetch request, which then
    travels while this one is decoded."""

    __slots__ = ("batch", "fetch_offset", "offset")

    def __init__(self, batch: Any, fetch_offset: int) -> None:
        self.batch, self.fetch_offset = batch, fetch_offset
        #: What the fetcher compares with the fetch offset to drop records already read.
        self.offset = max(batch.base_offset, fetch_offset)

    def columns(self) -> Columns:
        return decode_batch(self.batch, self.fetch_offset)


def _columns(columns: Columns) -> tuple[list[int], list[Any], list[Any]]:
    return columns.offsets, columns.keys, columns.values


def _decode_legacy(batch: Any, fetch_offset: int) -> tuple[Columns, int]:
    """A message-format v0/v1 batch (brokers before 0.11) as columns, the slow way, and the
    offset after it."""
    records = list(batch)
    kept = [r for r in records if r.offset >= fetch_offset]
    columns = Columns([r.offset for r in kept], [r.key for r in kept], [r.value for r in kept])
    return columns, (records[-1].offset + 1 if records else fetch_offset)


class _ColumnarRecords(_PartitionRecords):  # type: ignore[misc]
    """The fetcher's per-fetch record iterator, yielding one :class:`PendingBatch` per record
    batch instead of one ``ConsumerRecord`` per record. It follows kafka-python 3.0's
    ``Fetcher.PartitionRecords._unpack_records``: CRC check, aborted transactions skipped under
    read_committed, control batches skipped, the next fetch offset taken from each batch."""

    def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any) -> Any:
        batch = records.next_batch()
        while batch is not None:
            if self.check_crcs and not batch.validate_crc():
                raise CorruptRecordError(f"record batch of {tp} at offset {batch.base_offset} failed its CRC check")
            if not self._skipped(batch):
                pending: PendingBatch | Columns
                if batch.magic == 2:
                    pending, after = PendingBatch(batch, self.fetch_offset), batch.next_offset
                    count = batch.records_count
                else:
                    pending, after = _decode_legacy(batch, self.fetch_offset)
                    count = len(pending.offsets)
                self.records_read += count
                self.bytes_read += batch.size_in_bytes
                self.next_fetch_offset = after
                yield pending
            batch = records.next_batch()
        self.drain()

    def _skipped(self, batch: Any) -> bool:
        """Whether ``batch`` holds no data records: a control batch or an aborted transaction."""
        if batch.magic != 2:
            return False
        self.leader_epoch = batch.leader_epoch
        skip = bool(batch.is_control_batch)
        if self.isolation_level == _READ_COMMITTED and batch.has_producer_id():
            self._consume_aborted_transactions_up_to(batch.last_offset)
            if self._contains_abort_marker(batch):
                self.aborted_producer_ids.discard(batch.producer_id)
            elif self._is_batch_aborted(batch):
                skip = True
        if skip:
            self.next_fetch_offset = batch.next_offset
        return skip
