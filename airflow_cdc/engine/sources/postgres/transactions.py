"""PostgreSQL's transaction metadata (``provide.transaction.metadata``), as Debezium's
PostgresStreamingChangeEventSource and PostgresTransactionMonitor write it.

* BEGIN is sent at pgoutput's Begin, END at its Commit, whatever the transaction captured: a
  transaction whose changes were all filtered out (another table, a skipped operation) gets a
  BEGIN and an END with ``event_count`` 0, as in Debezium. A rolled-back transaction, or one
  that changed no published table, never reaches pgoutput (PostgreSQL 15+ sends no empty
  transaction) and sends nothing.
* The id in events is ``<xid>:<lsn>``, the LSN being that of the message the event comes from
  (the Begin's, the change's, the Commit's), so it differs between the events of one
  transaction; the offsets keep the bare xid.
* Every change event counts, TRUNCATE and transactional logical decoding messages included
  (each message a data collection of its own, as in Debezium); snapshot reads and
  non-transactional messages (the engine's heartbeats) carry no block.

A subclass, chosen only when the option is on, so the stream's hot path is the same with it off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_cdc.engine.connect_schema import SchemaSettings
from airflow_cdc.engine.records import Offset, Partition, SourceRecord
from airflow_cdc.engine.sources.postgres import pgoutput
from airflow_cdc.engine.sources.postgres.catalog import Catalog, TableFilter
from airflow_cdc.engine.sources.postgres.changes import ChangeBuilder, MessageFilter
from airflow_cdc.engine.sources.postgres.types import ValueModes
from airflow_cdc.engine.transaction_monitor import TransactionMonitor

#: Debezium counts each transactional logical decoding message under a data collection of its
#: own - a new LogicalDecodingMessageId, named by Object.toString(): its class and identity hash -
#: so its data_collection_order is always 1 and END lists each message apart. Ours are named by
#: the id's identifier and the message's LSN (one message per LSN); see tests/compat/oracle.py.
MESSAGE_COLLECTION = "LOGICAL_DECODING_MESSAGE@{lsn}"


def change_builder(transaction_topic: str | None, **kwargs: Any) -> ChangeBuilder:
    """The stream's builder: with transaction metadata when ``transaction_topic`` is given."""
    if transaction_topic is None:
        return ChangeBuilder(**kwargs)
    return TransactionalChangeBuilder(transaction_topic=transaction_topic, **kwargs)


class TransactionalChangeBuilder(ChangeBuilder):
    """A :class:`ChangeBuilder` that also sends BEGIN/END events to ``transaction_topic`` and
    writes each change event's ``transaction`` block."""

    def __init__(
        self,
        *,
        transaction_topic: str,
        server: str,
        database: str,
        partition: Partition,
        topic: Callable[[str, str], str],
        catalog: Catalog,
        modes: ValueModes,
        filters: TableFilter,
        tombstones: bool,
        skipped: frozenset[str],
        resume: Offset | None,
        messages: MessageFilter | None = None,
        schemas: SchemaSettings | None = None,
    ) -> None:
        self.monitor = TransactionMonitor(transaction_topic, partition)
        # Every parameter by name, no ``**kwargs``: compiled (mypyc, ADR 0033), a ``**`` forwarded
        # to the native parent's keyword-only parameters leaves them unset or mismatched.
        super().__init__(
            server=server,
            database=database,
            partition=partition,
            topic=topic,
            catalog=catalog,
            modes=modes,
            filters=filters,
            tombstones=tombstones,
            skipped=skipped,
            resume=resume,
            messages=messages,
            schemas=schemas,
        )

    def rewind(self, resume: Offset | None) -> None:
        super().rewind(resume)
        # Inside a transaction the offset holds its id and counts: they continue (Debezium's
        # TransactionContext.load); between transactions it holds neither.
        self.monitor.load(resume if resume and resume.get("txId") is not None else None)

    def handle(self, message: pgoutput.PgOutputMessage, lsn: int) -> list[SourceRecord]:
        kind = type(message)
        if kind is pgoutput.Begin:
            return self._begin_transaction(message, lsn)  # type: ignore[arg-type]
        if kind is pgoutput.Commit:
            return self._end_transaction(message, lsn)  # type: ignore[arg-type]
        records = super().handle(message, lsn)
        xid = self.xid
        if not records or xid is None:
            return records
        monitor, out = self.monitor, []
        for record in records:
            value = record.value
            if record.topic and isinstance(value, dict):
                source = value["source"]
                if value["op"] == "m":
                    collection = MESSAGE_COLLECTION.format(lsn=source["lsn"])
                else:
                    collection = f"{source['schema']}.{source['table']}"
                value["transaction"] = monitor.event(collection, f"{xid}:{source['lsn']}")
            # A tombstone or a watermark keeps the state of the event before it, as in Debezium.
            out.append(record.replace(offset=monitor.stored(record.offset)))
        return out

    def _begin_transaction(self, message: pgoutput.Begin, lsn: int) -> list[SourceRecord]:
        super().handle(message, lsn)
        if not self.monitor.begin(str(message.xid)):
            return []  # the transaction the offsets stood in, read again from its start
        # event -1: before the transaction's first change, which may share the Begin's LSN, so
        # a restart from this offset skips none of its changes.
        offset = self.monitor.stored({**self.offset(lsn), "event": -1})
        return [self.monitor.begin_record(f"{message.xid}:{lsn}", self.commit_time_us // 1000, offset)]

    def _end_transaction(self, message: pgoutput.Commit, lsn: int) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        if self.monitor.in_progress and not self._already_delivered(lsn):
            offset = self.monitor.stored(self.offset(lsn))
            out.append(self.monitor.end_record(f"{self.xid}:{lsn}", self.commit_time_us // 1000, offset))
        self.monitor.end()
        return out + super().handle(message, lsn)
