"""The initial snapshot: every captured table read inside the snapshot that the replication
slot exported when it was created, so the rows read and the changes streamed afterwards meet
exactly at the slot's consistent point - no gap, no overlap.

Rows are read with COPY (the server's fastest output path) and turned into ``op=r`` records a
batch at a time, so memory stays flat whatever the table size.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import psycopg
from psycopg import sql

from airflow_cdc.engine.envelope import source_info
from airflow_cdc.engine.records import PositionMarker, SourceRecord
from airflow_cdc.engine.sources.postgres.catalog import TableColumns
from airflow_cdc.engine.sources.postgres.changes import CONNECTOR, ChangeBuilder, TableSchema


class SnapshotReader:
    def __init__(self, conninfo: str, snapshot_name: str, consistent_lsn: int, builder: ChangeBuilder) -> None:
        self.consistent_lsn = consistent_lsn
        self._builder = builder
        self._conn = psycopg.connect(conninfo, autocommit=False)
        self._conn.execute("begin isolation level repeatable read read only")
        self._conn.execute(sql.SQL("set transaction snapshot {}").format(sql.Literal(snapshot_name)))
        self._started_ns = time.time_ns()
        self.rows = 0

    def batches(self, tables: list[tuple[TableColumns, TableSchema]], batch_size: int) -> Iterator[list[SourceRecord]]:
        """Batches of ``op=r`` records, table after table; the last batch ends with the marker
        that says the snapshot is complete."""
        held: SourceRecord | None = None  # one record held back, to label the very last "last"
        batch: list[SourceRecord] = []
        for table, schema in tables:
            for record in self._table_records(table, schema):
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

    def _table_records(self, table: TableColumns, schema: TableSchema) -> Iterator[SourceRecord]:
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
        query = sql.SQL("copy (select {} from {}) to stdout").format(columns, sql.Identifier(table.schema, table.name))
        with self._conn.cursor() as cursor, cursor.copy(query) as copy:
            for row in copy.rows():
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
