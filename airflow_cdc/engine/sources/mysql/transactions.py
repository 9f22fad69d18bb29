"""MySQL/MariaDB transaction metadata (``provide.transaction.metadata``), as Debezium's binlog
source (BinlogStreamingChangeEventSource, BinlogOffsetContext) writes it.

* A transaction begins at ``BEGIN`` and, on MariaDB, at every GTID event; it ends at its XID
  event (or a non-transactional engine's ``COMMIT``). Its id is the GTID (MariaDB
  ``domain-server-sequence``, MySQL ``uuid:number``), else ``file=<file>,pos=<pos of BEGIN>``;
  the same in every event of the transaction. ``ts_ms`` is, as Debezium has it, the time of
  the binlog event before the one that begins or ends the transaction (``Begin.ts_sec``).
* A transaction whose rows were all filtered out gets a BEGIN and an END with ``event_count``
  0, as in Debezium. A MariaDB DDL statement has a GTID event but no XID: Debezium sends its
  BEGIN and never an END (the next transaction's BEGIN follows); so do we.
* The offsets of the records inside a transaction hold its id and counts; a restart inside it
  continues the numbering and sends no second BEGIN (Debezium 3.6+; the 3.5 MariaDB connector
  sends BEGIN again and counts from 1 - the README lists this).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.records import Offset, Partition, SourceRecord
from airflow_cdc.engine.sources.mysql.binlog_items import Begin, Position
from airflow_cdc.engine.transaction_monitor import TransactionMonitor


def binlog_transactions(
    settings: Mapping[str, Any], prefix: str, partition: Partition, resume: Offset | None
) -> BinlogTransactions | None:
    """The stream's transaction metadata when ``provide.transaction.metadata`` is on."""
    if not settings["provide.transaction.metadata"]:
        return None
    return BinlogTransactions(f"{prefix}.{settings['topic.transaction']}", partition, resume)


class BinlogTransactions:
    """BEGIN/END records and the ``transaction`` blocks of one binlog stream."""

    def __init__(self, topic: str, partition: Partition, resume: Offset | None) -> None:
        self.monitor = TransactionMonitor(topic, partition)
        self.monitor.load(resume)

    def begin(self, item: Begin, extra: Mapping[str, Any]) -> list[SourceRecord]:
        """At a transaction's start: its BEGIN; ``extra`` goes into the offset as into every
        record's (the schema history's version)."""
        monitor = self.monitor
        if not monitor.begin(item.id):
            return []  # the transaction the offsets stood in, read again from its start
        return [monitor.begin_record(item.id, item.ts_sec * 1000, monitor.stored({**item.offset, **extra}))]

    def end(self, item: Position, extra: Mapping[str, Any]) -> list[SourceRecord]:
        """At a commit: the END of the transaction in progress (none after a DDL's BEGIN was
        followed by another transaction)."""
        monitor, out = self.monitor, []
        if monitor.in_progress:
            assert monitor.id is not None
            ts_ms = (item.ts_sec if item.ts_sec is not None else int(item.offset.get("ts_sec") or 0)) * 1000
            # The offset after the commit: a restart resumes after the transaction, so it needs
            # none of its state.
            out.append(monitor.end_record(monitor.id, ts_ms, {**item.offset, **extra}))
        monitor.end()
        return out

    def changes(self, records: list[SourceRecord]) -> list[SourceRecord]:
        """Count ``records`` (a row event's change records, tombstones included) and write
        their blocks and the transaction's state into their offsets."""
        monitor = self.monitor
        tx_id = monitor.id
        if tx_id is None:
            return records
        out = []
        for record in records:
            value = record.value
            if isinstance(value, dict):
                source = value["source"]
                value["transaction"] = monitor.event(f"{source['db']}.{source['table']}", tx_id)
            # A tombstone keeps the state of the delete before it, as in Debezium.
            out.append(record.replace(offset=monitor.stored(record.offset)))
        return out
