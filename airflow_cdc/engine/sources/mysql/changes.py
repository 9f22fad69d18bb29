"""Binlog items and snapshot rows -> Debezium's MySQL/MariaDB change records.

The ``source`` block has Debezium's MySQL fields in its order: the common head, then ``table``,
``server_id``, ``gtid``, ``file``, ``pos``, ``row``, ``thread``, ``query``. The key is the
primary key's columns (null for a table without one, whose deletes have no tombstone). A
primary-key change is a delete (and its tombstone) of the old key, then a create, as Debezium
emits it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.engine.connect_schema import ConnectSchemas
from airflow_cdc.engine.envelope import change_value, source_builder
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.failures import FailureHandling
from airflow_cdc.engine.records import Partition, SourceRecord
from airflow_cdc.engine.sources.mysql.binlog import EventSource, RowChange
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.types import Converter, ValueModes, binlog_converter, snapshot_converter

log = logging.getLogger(__name__)

#: Debezium's MySQL ``source`` fields after the common head (MySqlSourceInfoStructMaker).
SOURCE_FIELDS = ("table", "server_id", "gtid", "file", "pos", "row", "thread", "query")


class ValueConversionError(CdcError):
    """A column's value has no Debezium value (the converter refused it); names the column."""

    def __init__(self, column: str, value: Any, reason: BaseException) -> None:
        self.column = column
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        super().__init__(f"column {column}: cannot convert {shown} ({type(reason).__name__}: {reason})")


@dataclass(frozen=True)
class RowPlan:
    """How one table's rows become Debezium values (columns Debezium leaves out are out)."""

    table: Table
    topic: str
    columns: tuple[tuple[int, str, Converter], ...]
    key: tuple[str, ...]
    #: The configured modes: a zero date's stand-in (a column default, converted) depends on them.
    modes: ValueModes = field(default_factory=ValueModes)
    #: The records' Connect schemas, when a converter writes schemas (built once per definition).
    schemas: ConnectSchemas | None = None

    def row(self, values: Sequence[Any]) -> dict[str, Any]:
        """Debezium's values of one row image; ValueConversionError naming the first column
        whose value has none (the caller's failure handling decides what happens to the event)."""
        try:
            return {n: None if (v := values[i]) is None else c(v) for i, n, c in self.columns}
        except (ValueError, TypeError, ArithmeticError):
            for index, name, convert in self.columns:
                value = values[index]
                try:
                    if value is not None:
                        convert(value)
                except (ValueError, TypeError, ArithmeticError) as exc:
                    raise ValueConversionError(name, value, exc) from exc
            raise

    def key_of(self, row: dict[str, Any] | None) -> dict[str, Any] | None:
        if not self.key or row is None:
            return None
        return {name: row.get(name) for name in self.key}


#: Builds a table definition's schemas for its topic (``connect_schema.TableSchemas``).
SchemasOf = Callable[[Table, str], ConnectSchemas]


def plan(table: Table, topic: str, modes: ValueModes, *, snapshot: bool, schemas: SchemasOf | None = None) -> RowPlan:
    choose = snapshot_converter if snapshot else binlog_converter
    columns = []
    for index, column in enumerate(table.columns):
        convert = choose(column, modes)
        if convert is not None:
            columns.append((index, column.name, convert))
    built = None if schemas is None else schemas(table, topic)
    return RowPlan(table, topic, tuple(columns), table.key, modes, built)


class ChangeBuilder:
    def __init__(
        self,
        *,
        connector: str,
        server: str,
        partition: Partition,
        tombstones: bool,
        skipped: frozenset[str],
        extra_offset: Callable[[], dict[str, Any]],
        failures: FailureHandling | None = None,
        schemas: SchemasOf | None = None,
    ) -> None:
        self.connector, self.server, self.partition = connector, server, partition
        self._source_block = source_builder(connector, SOURCE_FIELDS)
        self._tombstones, self._skipped, self._extra = tombstones, skipped, extra_offset
        #: What happens to a row with a value that has no Debezium value.
        self.failures = failures or FailureHandling()
        #: The tables' Connect schemas (``*.converter.schemas.enable``); None: none are built.
        self.schemas = schemas

    def plan(self, table: Table, topic: str, modes: ValueModes, *, snapshot: bool) -> RowPlan:
        """How the table's rows become records (with their schemas when schemas are built)."""
        return plan(table, topic, modes, snapshot=snapshot, schemas=self.schemas)

    def source(self, db: str, table: str, where: EventSource | None, *, snapshot: str, row: int = 0) -> dict[str, Any]:
        block = self._source_block
        if where is None:  # not read from the binlog (a snapshot): now, at no binlog position
            return block(self.server, time.time_ns(), snapshot, db, None, table, 0, None, "", 0, row, None, None)
        return block(
            self.server,
            where.ts_sec * 1_000_000_000,
            snapshot,
            db,
            None,  # sequence
            table,
            where.server_id,
            where.gtid,
            where.file,
            where.pos,
            row,
            where.thread,
            None,  # query
        )

    def changes(self, rows: RowPlan, change: RowChange) -> list[SourceRecord]:
        if change.op in self._skipped:
            return []
        try:
            before = rows.row(change.before) if change.before is not None else None
            after = rows.row(change.after) if change.after is not None else None
        except ValueConversionError as exc:
            where = change.source
            gtid = f", GTID {where.gtid}" if where.gtid else ""
            self.failures.handle(
                f"{change.database}.{change.table}: {exc} (binlog {where.file} at {where.pos}{gtid}, row {change.row})"
            )
            return []
        source = self.source(change.database, change.table, change.source, snapshot="false", row=change.row)
        offset = {**change.offset, **self._extra()}
        ts_ms = change.source.ts_sec * 1000
        if change.op == "u" and rows.key and rows.key_of(before) != rows.key_of(after):
            return self._delete(rows, before, source, offset, ts_ms) + self._emit(
                rows, "c", None, after, source, offset, ts_ms
            )
        if change.op == "d":
            return self._delete(rows, before, source, offset, ts_ms)
        return self._emit(rows, change.op, before, after, source, offset, ts_ms)

    def truncate(self, rows: RowPlan, where: EventSource, offset: dict[str, Any]) -> list[SourceRecord]:
        """A ``TRUNCATE TABLE``'s record (op ``t``, no key, no before or after), as Debezium's
        binlog source emits it when ``skipped.operations`` leaves ``t`` out."""
        source = self.source(rows.table.database, rows.table.name, where, snapshot="false")
        return self._emit(rows, "t", None, None, source, {**offset, **self._extra()}, where.ts_sec * 1000)

    def _delete(self, rows: RowPlan, before: Any, source: Any, offset: Any, ts_ms: int) -> list[SourceRecord]:
        records = self._emit(rows, "d", before, None, source, offset, ts_ms)
        # No tombstone without a key (a table without primary key): Debezium emits one with a
        # null key and a null value, which a Kafka client refuses (kafka-python: "Need at least
        # one: key or value") and which deletes nothing; a deliberate deviation (oracle.py).
        if records and self._tombstones and records[0].key is not None:
            records.append(records[0].replace(value=None))
        return records

    def _emit(
        self, rows: RowPlan, op: str, before: Any, after: Any, source: dict[str, Any], offset: Any, ts_ms: int
    ) -> list[SourceRecord]:
        if op in self._skipped:
            return []
        value = change_value(op, before, after, source, None, time.time_ns())
        key = rows.key_of(after if after is not None else before)
        return [SourceRecord(rows.topic, key, value, self.partition, offset, ts_ms, schemas=rows.schemas)]

    def snapshot_record(
        self,
        rows: RowPlan,
        values: Sequence[Any],
        offset: dict[str, Any],
        marker: str,
        at: dict[str, Any] | None = None,
    ) -> SourceRecord | None:
        """``at``: the binlog point the rows were read at, when it is not the offset's (a
        blocking snapshot's rows are newer than the stream's position, their offset). None: a
        value had no Debezium value and the failure handling left the row out (or
        ``skipped.operations`` names ``r``)."""
        try:
            after = rows.row(values)
        except ValueConversionError as exc:
            self.failures.handle(f"{rows.table.database}.{rows.table.name}: {exc} (a snapshot row, {marker})")
            return None
        if "r" in self._skipped:
            return None
        # Debezium's snapshot records name the binlog point the snapshot stands at. One record
        # per row of every snapshot: built here in one pass (what source() then _emit() do).
        point = offset if at is None else at
        table = rows.table
        ts_ns = time.time_ns()
        source = self._source_block(
            self.server, ts_ns, marker, table.database, None, table.name, 0, None,
            str(point.get("file") or ""), int(point.get("pos") or 0), 0, None, None,
        )  # fmt: skip
        value = change_value("r", None, after, source, None, time.time_ns())
        key = {name: after.get(name) for name in rows.key} if rows.key else None
        return SourceRecord(rows.topic, key, value, self.partition, offset, ts_ns // 1_000_000, schemas=rows.schemas)
