"""An incremental-snapshot window's rows as MySQL/MariaDB returned them, kept until the stream
reaches the window's close, then made Debezium's ``op=r`` records a batch at a time - with the
table's definition the stream has there (the same shape, checked by ``Chunk.current``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder, RowPlan


class ChunkRows:
    """A window's rows as read (each followed by its key's texts), made records ``batch`` at a
    time when released."""

    def __init__(
        self,
        rows: list[tuple[Any, ...]],
        width: int,
        rows_plan: Callable[[], RowPlan],
        builder: ChangeBuilder,
        batch: int,
    ):
        self._rows, self._width, self._plan, self._builder, self._batch = rows, width, rows_plan, builder, batch

    def __len__(self) -> int:
        return len(self._rows)

    def records(self, offset: Offset) -> Iterator[list[SourceRecord]]:
        rows, self._rows = self._rows, []  # released once
        offset = dict(offset)
        make, plan_, width = self._builder.snapshot_record, self._plan(), self._width
        for start in range(0, len(rows), self._batch):
            made = (make(plan_, row[:width], offset, "incremental") for row in rows[start : start + self._batch])
            yield [record for record in made if record is not None]  # None: left out (failure handling)
