"""The initial snapshot: every captured table read inside the snapshot that the replication
slot exported when it was created, so the rows read and the changes streamed afterwards meet
exactly at the slot's consistent point - no gap, no overlap.

Rows are read through a server-side cursor, 2000 at a time, as text (the same text the stream
delivers, so one set of converters serves both), and turned into ``op=r`` records a batch at a
time, so memory stays flat whatever the table size. Measured here on a 20-column table:
425k rows/s read this way against 245-280k with psycopg's row-by-row ``copy.rows()`` (each COPY
row is its own protocol message, and psycopg pays a Python generator round per message).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

from airflow_cdc.engine.envelope import source_info
from airflow_cdc.engine.records import Partition, PositionMarker, SourceRecord
from airflow_cdc.engine.sources.postgres.catalog import TableColumns
from airflow_cdc.engine.sources.postgres.changes import CONNECTOR, ChangeBuilder, TableSchema


class SnapshotReader:
    def __init__(self, conninfo: str, snapshot_name: str | None, consistent_lsn: int, builder: ChangeBuilder) -> None:
        """``snapshot_name``: the slot's exported snapshot (rows exactly at ``consistent_lsn``),
        or None for a fresh transaction newer than ``consistent_lsn`` (see the connector)."""
        self.consistent_lsn = consistent_lsn
        self._builder = builder
        self._conn = psycopg.connect(conninfo, autocommit=False)
        self._conn.execute("begin isolation level repeatable read read only")
        if snapshot_name is not None:
            self._conn.execute(sql.SQL("set transaction snapshot {}").format(sql.Literal(snapshot_name)))
        self._started_ns = time.time_ns()
        self.rows = 0

    def batches(
        self, tables: list[tuple[TableColumns, TableSchema]], batch_size: int, fetch_size: int = 2000
    ) -> Iterator[list[SourceRecord]]:
        """Batches of ``op=r`` records, table after table; the last batch ends with the marker
        that says the snapshot is complete."""
        held: SourceRecord | None = None  # one record held back, to label the very last "last"
        batch: list[SourceRecord] = []
        for table, schema in tables:
            for record in self._table_records(table, schema, fetch_size):
                if held is not None:
                    batch.append(held)
                    if len(batch) >= batch_size:
                        yield batch
                        batch = []
                held = record
        if held is not None:
            value = dict(held.value)
            value["source"] = {**value["source"], "snapshot": "last"}
            batch.append(held.replace(value=value, offset={**held.offset, "last_snapshot_record": True}))
        self._conn.rollback()
        marker = self._builder.marker(self.consistent_lsn)
        batch.append(PositionMarker.at(marker.partition, {**marker.offset, "snapshot_completed": True}))
        yield batch

    def _table_records(self, table: TableColumns, schema: TableSchema, fetch_size: int) -> Iterator[SourceRecord]:
        # Everything but the row is the same for every row of a table: built once, shared.
        source = source_info(
            connector=CONNECTOR,
            name=self._builder.server,
            ts_ns=self._started_ns,
            db=self._builder.database,
            snapshot="true",
            sequence=None,
            schema=schema.schema,
            table=schema.name,
            txId=None,
            lsn=self.consistent_lsn,
            xmin=None,
        )
        first_source = {**source, "snapshot": "first"}
        offset = {
            "lsn": self.consistent_lsn,
            "lsn_proc": self.consistent_lsn,
            "event": 0,
            "lsn_commit": self.consistent_lsn,
            "txId": None,
            "ts_usec": self._started_ns // 1000,
            "snapshot": True,
            "last_snapshot_record": False,
        }
        topic, partition, ts_ms, key_of, row_of = (
            schema.topic,
            self._builder.partition,
            self._started_ns // 1_000_000,
            schema.key_of,
            schema.row,
        )
        columns = sql.SQL(", ").join(sql.Identifier(name) for name, _, _ in table.columns)
        query = sql.SQL("select {} from {}").format(columns, sql.Identifier(table.schema, table.name))
        cursor = self._conn.cursor(name=f"airflow_cdc_snapshot_{table.oid}")
        for type_oid in {type_oid for _, type_oid, _ in table.columns}:
            cursor.adapters.register_loader(type_oid, TextLoader)  # text, as the stream sends it
        try:
            cursor.execute(query)
            while rows := cursor.fetchmany(fetch_size):
                yield from self._records(rows, row_of, key_of, topic, partition, offset, source, first_source, ts_ms)
        finally:
            cursor.close()

    def _records(
        self,
        rows: list[tuple[Any, ...]],
        row_of: Callable[[tuple[str | None, ...]], dict[str, Any]],
        key_of: Callable[[dict[str, Any] | None], dict[str, Any] | None],
        topic: str,
        partition: Partition,
        offset: dict[str, Any],
        source: dict[str, Any],
        first_source: dict[str, Any],
        ts_ms: int,
    ) -> Iterator[SourceRecord]:
        for row in rows:
            after = row_of(row)
            now = time.time_ns()
            value = {
                "before": None,
                "after": after,
                "source": first_source if self.rows == 0 else source,
                "transaction": None,
                "op": "r",
                "ts_ms": now // 1_000_000,
                "ts_us": now // 1_000,
                "ts_ns": now,
            }
            self.rows += 1
            yield SourceRecord(topic, key_of(after), value, partition, offset, ts_ms)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing after an error must not mask it
            self._conn.close()
