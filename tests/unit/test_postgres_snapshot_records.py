"""The snapshot's record loop and row builders, which write out by hand what the general helpers
do (for speed): they must build exactly what those build."""

from __future__ import annotations

from typing import Any

from airflow_cdc.engine.envelope import change_value
from airflow_cdc.engine.sources.postgres.changes import ColumnPlan, TableSchema
from airflow_cdc.engine.sources.postgres.snapshot import key_function, read_records
from airflow_cdc.engine.sources.postgres.snapshot_columns import SnapshotColumns


def _column(name: str, index: int, convert: Any = str) -> ColumnPlan:
    return ColumnPlan(name=name, index=index, convert=convert, placeholder=None, type_name="t")


SCHEMA = TableSchema("public", "t", "s.public.t", [_column("id", 0, int), _column("at", 1), _column("n", 2)], ["id"])


def test_read_records_builds_change_values_envelope_key_for_key() -> None:
    source, partition, offset = {"snapshot": "true"}, {"server": "s"}, {"lsn": 7}
    rows = [(1, "a"), (2, None)]
    records = read_records(
        rows, lambda row: {"id": row[0], "v": row[1]}, key_function(["id"]), "s.t", source, partition, offset, 5
    )
    assert [r.key for r in records] == [{"id": 1}, {"id": 2}]
    for record, row in zip(records, rows, strict=True):
        expected = change_value("r", None, {"id": row[0], "v": row[1]}, source, None, record.value["ts_ns"])
        assert list(record.value.items()) == list(expected.items())  # the same keys in the same order
        assert (record.topic, record.partition, record.offset, record.timestamp_ms) == ("s.t", partition, offset, 5)
        assert record.value["source"] is source  # shared, not copied


def _rare_columns(converted: list[tuple[ColumnPlan, int]]) -> SnapshotColumns:
    """``at`` is rare: its loaded value at 1, the row's flag at 3, its text at 4."""
    columns = SnapshotColumns(["id", "at", "n"], [], converted=converted, flag_index=3)
    columns.rare.append((_column("at", 1, lambda text: f"converted {text}"), 4))
    return columns


def test_rare_only_builder_converts_flagged_rows_as_the_general_one() -> None:
    rows = [
        (1, "2024-01-01T00:00:00Z", "x", False, None),
        (2, None, "y", True, "infinity"),
        (3, None, None, True, None),
    ]
    rare_only = _rare_columns([]).row_builder(SCHEMA)
    expected = [
        {"id": 1, "at": "2024-01-01T00:00:00Z", "n": "x"},
        {"id": 2, "at": "converted infinity", "n": "y"},
        {"id": 3, "at": None, "n": None},
    ]
    assert [rare_only(row) for row in rows] == expected
    # The general builder (a converted column too) agrees on the columns they share.
    general = _rare_columns([(_column("n", 2, str.upper), 2)]).row_builder(SCHEMA)
    assert [general(row) for row in rows] == [{**e, "n": e["n"] and e["n"].upper()} for e in expected]
