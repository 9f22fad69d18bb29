"""A snapshot's rows -> Debezium's ``op=r`` records, table after table, in batches, with
Debezium's ``source.snapshot`` labels; the last batch ends with a marker at the stream's start."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from airflow_cdc.engine.records import Partition, PositionMarker, SourceRecord
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.snapshot import ConsistentSnapshot, TableChangedError
from airflow_cdc.engine.sources.mysql.snapshot_columns import snapshot_plan
from airflow_cdc.engine.sources.mysql.types import ValueModes

TableKey = tuple[str, str]
#: A new snapshot (and its definitions) for one a table changed under; None: give up (re-raise).
Reopen = Callable[[TableChangedError], tuple[ConsistentSnapshot, dict[TableKey, Table]]]


class SnapshotRecords:
    """One snapshot's records (iterate :meth:`batches`); ``rows`` counts the rows read so far.

    ``reopen``: a table that changed under the snapshot (TableChangedError) is read, with the
    tables after it, from a new snapshot at a newer point, with that point's definitions: rows
    newer than the stream's start, over which the stream's changes converge (those before the
    new point are replayed, deletes included), as after an interrupted snapshot. Without it the
    error goes to the caller."""

    def __init__(
        self,
        snapshot: ConsistentSnapshot,
        builder: ChangeBuilder,
        *,
        topic: Callable[[str, str], str],
        modes: ValueModes,
        fetch: int,
        batch: int,
        reopen: Reopen | None = None,
    ) -> None:
        self._snapshot, self._builder, self._topic, self._modes = snapshot, builder, topic, modes
        self._fetch, self._batch, self._reopen = fetch, batch, reopen
        self.rows = 0

    def batches(
        self,
        tables: Sequence[TableKey],
        definitions: dict[TableKey, Table],
        offset: dict[str, Any],
        end: Partition | None,
        end_offset: dict[str, Any],
        *,
        at: dict[str, Any] | None = None,
        table_started: Callable[[str], None] = lambda _name: None,
        table_completed: Callable[[str, int], None] = lambda _name, _rows: None,
    ) -> Iterator[list[SourceRecord]]:
        batch: list[SourceRecord] = []
        for index, key in enumerate(tables):
            name = f"{key[0]}.{key[1]}"
            table_started(name)
            first_table, last_table = index == 0, index == len(tables) - 1
            count = 0
            held: Sequence[Any] | None = None  # a row is labelled once it is known whether another follows
            while key in definitions:
                table = definitions[key]
                # The server computes what it can of Debezium's values (snapshot_columns.py).
                rows = snapshot_plan(self._builder.plan(table, self._topic(*key), self._modes, snapshot=True))
                try:
                    for values in self._snapshot.rows(table, self._fetch, rows.select or ("NULL",)):
                        if held is not None:
                            marker = snapshot_marker(first_table, last_table, first_row=count == 1, last_row=False)
                            _append(batch, self._builder.snapshot_record(rows, held, offset, marker, at))
                            if len(batch) >= self._batch:
                                yield batch
                                batch = []
                        held, count = values, count + 1
                    break
                except TableChangedError as exc:
                    if self._reopen is None:
                        raise
                    self._snapshot, definitions = self._reopen(exc)  # a dropped table is no longer there
            if held is not None:
                marker = snapshot_marker(first_table, last_table, first_row=count == 1, last_row=True)
                _append(batch, self._builder.snapshot_record(rows, held, offset, marker, at))
            self.rows += count
            table_completed(name, count)
        # The snapshot's end: everything before the stream's start is delivered.
        if end is not None:
            batch.append(PositionMarker.at(end, end_offset))
        yield batch


def _append(batch: list[SourceRecord], record: SourceRecord | None) -> None:
    if record is not None:  # None: left out by event.processing.failure.handling.mode
        batch.append(record)


def snapshot_marker(first_table: bool, last_table: bool, *, first_row: bool, last_row: bool) -> str:
    """Debezium's ``source.snapshot`` of a snapshot record (RelationalSnapshotChangeEventSource's
    ``setSnapshotMarker``): ``last`` on the last row of the last table, ``first`` on the first of
    the first, ``last_in_data_collection`` / ``first_in_data_collection`` on every other table's
    last / first row (in this order of precedence), ``true`` elsewhere. The first and last tables
    are the first and last in snapshot order, rows or not (an empty last table: no ``last``)."""
    if last_row and last_table:
        return "last"
    if first_row and first_table:
        return "first"
    if last_row:
        return "last_in_data_collection"
    if first_row:
        return "first_in_data_collection"
    return "true"
