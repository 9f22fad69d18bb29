"""An incremental-snapshot window's rows, held in libpq's results (no Python object per row)
until the stream reaches the window's close, then made Debezium's ``op=r`` records a batch at a
time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from airflow_cdc.engine.envelope import source_info
from airflow_cdc.engine.records import Offset, Partition, SourceRecord
from airflow_cdc.engine.sources.postgres import blocking
from airflow_cdc.engine.sources.postgres.changes import CONNECTOR, TableSchema
from airflow_cdc.engine.sources.postgres.snapshot import key_function, read_records
from airflow_cdc.engine.sources.postgres.snapshot_columns import SnapshotColumns

#: A chunk's rows (their trailing key texts left out) and the offset they go at -> records.
RecordMaker = Callable[[list[tuple[Any, ...]], Offset], list[SourceRecord]]


class ChunkRows:
    """A window's rows in libpq's results, made records ``batch`` at a time when released."""

    def __init__(self, parts: list[blocking.Rows], make: RecordMaker, batch: int) -> None:
        self._parts, self._make, self._batch = parts, make, batch
        self._count = sum(len(part) for part in parts)

    def __len__(self) -> int:
        return self._count

    def records(self, offset: Offset) -> Iterator[list[SourceRecord]]:
        parts, self._parts = self._parts, []  # released once
        for part in parts:
            size = len(part)
            for start in range(0, size, self._batch):
                yield self._make(part.load(start, min(start + self._batch, size)), offset)
            part.clear()


def record_maker(
    schema: TableSchema, columns: SnapshotColumns, *, server: str, database: str, partition: Partition
) -> RecordMaker:
    """Makes a chunk's ``op=r`` records (the rows' trailing key texts are left out); the source
    block is the one of the read."""
    now = time.time_ns()
    source = source_info(
        connector=CONNECTOR,
        name=server,
        ts_ns=now,
        db=database,
        snapshot="incremental",
        sequence=None,
        schema=schema.schema,
        table=schema.name,
        # Debezium leaves txId, lsn and xmin out of incremental snapshot events
        # (PostgresSourceInfoStructMaker): they would name the stream's position, not the read's.
        txId=None,
        lsn=None,
        xmin=None,
        origin=None,
        origin_lsn=None,
    )
    after_of, key_of, topic = columns.row_builder(schema), key_function(schema.key), schema.topic
    ts_ms = now // 1_000_000

    def make(rows: list[tuple[Any, ...]], offset: Offset) -> list[SourceRecord]:
        # Debezium emits a window's rows at its close's commit, with the stream's position
        # there as both halves of source.sequence; ours go at the close, from its position.
        lsn = offset.get("lsn")
        released = source if lsn is None else {**source, "sequence": f'["{lsn}","{lsn}"]'}
        return read_records(rows, after_of, key_of, topic, released, partition, offset, ts_ms, schema.connect)

    return make
