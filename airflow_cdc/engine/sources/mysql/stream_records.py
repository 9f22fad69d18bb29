"""The binlog's items -> the connector's records, in binlog order: rows decoded with the
definition the schema history holds at that point, DDL taken into the history (and onto the
schema change topic), commits and heartbeats as position markers.

Why the rows are decoded here and not by the reader: a batch may hold a DDL and, after it, rows
of the new shape; the history has taken the DDL in only when it reaches the rows. A row the
engine cannot decode or convert goes to ``event.processing.failure.handling.mode``
(``failures.py``) with its table, column and binlog position.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pymysql

from airflow_cdc.engine.errors import DecodeError
from airflow_cdc.engine.failures import FailureHandling
from airflow_cdc.engine.records import Partition, PositionMarker, SourceRecord
from airflow_cdc.engine.sources.mysql.binlog import Begin, BinlogReader, EventSource, Position, RowEvent, SchemaChange
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder, RowPlan
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.ddl.statements import truncated_table
from airflow_cdc.engine.sources.mysql.row_decoder import RowDecoder, compile_table
from airflow_cdc.engine.sources.mysql.schema import SchemaHistory
from airflow_cdc.engine.sources.mysql.schema_events import SchemaChangeEvents
from airflow_cdc.engine.sources.mysql.transactions import BinlogTransactions
from airflow_cdc.engine.sources.mysql.types import ValueModes

log = logging.getLogger(__name__)

TableKey = tuple[str, str]


class BinlogRecords:
    """Turns what a :class:`BinlogReader` reads into records (``read``)."""

    def __init__(
        self,
        *,
        conn: Any,
        history: SchemaHistory,
        builder: ChangeBuilder,
        partition: Partition,
        modes: ValueModes,
        topic: Callable[[str, str], str],
        schema_events: Callable[[], SchemaChangeEvents | None],
        heartbeat_s: float,
        transactions: BinlogTransactions | None = None,
        captured: Callable[[str, str], bool] = lambda database, table: True,
    ) -> None:
        #: provide.transaction.metadata: None when off, so the rows' path does not change.
        self.transactions = transactions
        self._conn, self._history, self._builder, self._partition = conn, history, builder, partition
        self._modes, self._topic, self._schema_events = modes, topic, schema_events
        self.failures: FailureHandling = builder.failures
        self._heartbeat_s = heartbeat_s
        self._captured = captured
        #: Per table: its converters, and its decoder with the table map and definition it is for.
        self._plans: dict[TableKey, RowPlan] = {}
        self._decoders: dict[TableKey, tuple[Any, Table, RowDecoder]] = {}
        self._unconverted: list[Any] = []  # items read but not yet converted (a failed poll)
        self._ddl_applied: Any = None  # the last DDL item the schema history took in
        self._last_marker = time.monotonic()

    def schema_offset(self) -> dict[str, Any]:
        return {"schema_version": self._history.version} if self._history.version else {}

    def read(self, reader: BinlogReader, limit: int, timeout: float) -> list[SourceRecord]:
        """The records of the next items of the binlog. The reader's position is past every
        item it returned, so an item that fails to convert (a DDL whose table is read from a
        server that just went away, say) is kept with those after it for the next call: a
        retried poll converts them again instead of reading past them. Records converted
        before it are handed over now."""
        items, self._unconverted = self._unconverted, []
        if not items:
            items = reader.read(limit, timeout)
        records: list[SourceRecord] = []
        for index, item in enumerate(items):
            try:
                self._convert(item, records)
            except Exception as exc:
                self._unconverted = items[index:]
                if not records:
                    raise
                log.warning("%s; the %d binlog items from there are converted again next", exc, len(items) - index)
                break
        return records

    def _convert(self, item: Any, records: list[SourceRecord]) -> None:
        kind = type(item)
        if kind is RowEvent:
            self._rows(item, records)
        elif kind is Position:
            now = time.monotonic()
            if item.kind == "commit" and self.transactions is not None:
                records.extend(self.transactions.end(item, self.schema_offset()))
            if item.kind == "commit" or (self._heartbeat_s and now - self._last_marker >= self._heartbeat_s):
                self._last_marker = now
                records.append(PositionMarker.at(self._partition, {**item.offset, **self.schema_offset()}))
        elif kind is SchemaChange:
            self._schema_change(item, records)
        elif kind is Begin and self.transactions is not None:
            records.extend(self.transactions.begin(item, self.schema_offset()))

    def _rows(self, event: RowEvent, records: list[SourceRecord]) -> None:
        key = (event.database, event.table)
        table = self._history.tables.get(key)
        if table is None:  # Debezium's inconsistent.schema.handling.mode: its rows cannot be read
            self.failures.handle(
                f"{event.database}.{event.table}: a row event of a table the schema history does not know "
                f"({_where(event.source)}): take a new snapshot (reset the offsets, snapshot.mode=initial)"
            )
            return
        try:
            changes = event.changes(self._decoder(key, event, table))
        except DecodeError as exc:
            where = _where(event.source)
            self.failures.handle(f"{event.database}.{event.table}: cannot decode a row event: {exc} ({where})")
            return
        rows = self._plans.get(key)
        if rows is None or rows.table is not table:
            rows = self._plans[key] = self._builder.plan(table, self._topic(*key), self._modes, snapshot=False)
        converted: list[SourceRecord] = []  # the whole event, or nothing (a failure converts it again)
        for change in changes:
            converted.extend(self._builder.changes(rows, change))
        records.extend(converted if self.transactions is None else self.transactions.changes(converted))

    def _decoder(self, key: TableKey, event: RowEvent, table: Table) -> RowDecoder:
        """The table's decoder for this table map: compiled again only when the definition or
        the table map's column types change (the library makes new column objects for every
        table map, one per transaction)."""
        cached = self._decoders.get(key)
        columns = event.binlog_columns
        if cached is not None and cached[1] is table:
            if cached[0] is columns:
                return cached[2]
            if _signature(cached[0]) == _signature(columns):
                self._decoders[key] = (columns, table, cached[2])
                return cached[2]
        decoder = compile_table(columns, table)
        if len(self._decoders) > 4096:  # tables come and go over months of streaming
            self._decoders.clear()
        self._decoders[key] = (columns, table, decoder)
        return decoder

    def _schema_change(self, item: SchemaChange, records: list[SourceRecord]) -> None:
        if self._ddl_applied is not item:  # converted again after a failure: applied once
            # A DDL the history does not follow is read from the server, on a connection that
            # may predate a server restart the stream has recovered from.
            _reopen_if_lost(self._conn)
            self._history.apply(self._conn, item.ddl, item.database, item.offset)
            self._ddl_applied = item
        offset = {**item.offset, **self.schema_offset()}
        truncated = truncated_table(item.ddl, item.database)
        if truncated is not None:  # a row change of the whole table, not a schema change (as Debezium)
            self._truncate(truncated, item, offset, records)
        else:
            schema_events = self._schema_events()
            if schema_events is not None:
                records.extend(schema_events.streamed(self._conn, item, offset))
        records.append(PositionMarker.at(self._partition, offset))

    def _truncate(self, key: TableKey, item: SchemaChange, offset: dict[str, Any], records: list[SourceRecord]) -> None:
        table = self._history.tables.get(key)
        if table is None or not self._captured(*key):
            return
        rows = self._plans.get(key)
        if rows is None or rows.table is not table:
            rows = self._plans[key] = self._builder.plan(table, self._topic(*key), self._modes, snapshot=False)
        converted = self._builder.truncate(rows, item.source, offset)
        records.extend(converted if self.transactions is None else self.transactions.changes(converted))


def _signature(columns: Any) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(sorted(column.data.items())) for column in columns)


def _where(source: EventSource) -> str:
    gtid = f", GTID {source.gtid}" if source.gtid else ""
    return f"binlog {source.file} at {source.pos}{gtid}"


def _reopen_if_lost(conn: Any) -> None:
    """The same connection object open again if the server dropped it (others hold it)."""
    try:
        conn.ping(False)
    except pymysql.Error:
        conn.connect()
