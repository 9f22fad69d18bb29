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
from typing import Any

import psycopg
from psycopg import sql

from airflow_cdc.engine.envelope import Op, change_envelope, source_info
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
            columns = sql.SQL(", ").join(sql.Identifier(name) for name, _, _ in table.columns)
            query = sql.SQL("copy (select {} from {}) to stdout").format(
                columns, sql.Identifier(table.schema, table.name)
            )
            with self._conn.cursor() as cursor, cursor.copy(query) as copy:
                for row in copy.rows():
                    record = self._read_record(schema, row, first=self.rows == 0)
                    self.rows += 1
                    if held is not None:
                        batch.append(held)
                    held = record
                    if len(batch) >= batch_size:
                        yield batch
                        batch = []
        if held is not None:
            held.value["source"]["snapshot"] = "last"
            held = held.replace(offset={**held.offset, "last_snapshot_record": True})
            batch.append(held)
        self._conn.rollback()
        marker = self._builder.marker(self.consistent_lsn)
        batch.append(PositionMarker.at(marker.partition, {**marker.offset, "snapshot_completed": True}))
        yield batch

    def _read_record(self, schema: TableSchema, row: tuple[Any, ...], *, first: bool) -> SourceRecord:
        after = schema.row(row)
        source = source_info(
            connector=CONNECTOR,
            name=self._builder.server,
            ts_ns=self._started_ns,
            db=self._builder.database,
            snapshot="first" if first else "true",
            sequence=None,
            schema=schema.schema,
            table=schema.name,
            txId=None,
            lsn=self.consistent_lsn,
            xmin=None,
        )
        value = change_envelope(Op.READ, before=None, after=after, source=source)
        offset = {
            "lsn": self.consistent_lsn,
            "lsn_proc": self.consistent_lsn,
            "lsn_commit": self.consistent_lsn,
            "txId": None,
            "ts_usec": self._started_ns // 1000,
            "snapshot": True,
            "last_snapshot_record": False,
        }
        return SourceRecord(
            schema.topic, schema.key_of(after), value, self._builder.partition, offset, self._started_ns // 1_000_000
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing after an error must not mask it
            self._conn.close()
