"""The latest frame's rows as the SQL target's executors read them from Arrow batches."""

from __future__ import annotations

import pyarrow as pa

from airflow_cdc.spark.targets.arrow_rows import FIELDS, latest_rows

_SCHEMA = pa.schema(
    [
        ("table", pa.string()),
        ("op", pa.string()),
        ("key", pa.string()),
        ("after", pa.map_(pa.string(), pa.string())),
        ("unavailable", pa.list_(pa.string())),
        ("position", pa.string()),
    ]
)

ROWS = [
    ("s.t", "u", '{"id":1}', {"id": "1", "name": "a", "note": None}, [], "01"),
    ("s.t", "d", '{"id":2}', None, [], "02"),
    ("s.t", "u", '{"id":3}', {"id": "3", "name": ""}, ["doc"], "03"),
    ("s.t", "t", None, None, [], "04"),
    ("s.u", "c", '{"k":"x"}', {}, None, "05"),
]


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True))
    arrays = []
    for field, values in zip(_SCHEMA, columns, strict=True):
        if field.name == "after":
            values = [None if v is None else list(v.items()) for v in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA)


def test_rows_come_out_as_tuples_in_the_frames_order() -> None:
    assert tuple(_SCHEMA.names) == FIELDS
    got = list(latest_rows([_batch(ROWS)]))
    want = [(*row[:4], row[4] or [], row[5]) for row in ROWS]  # a null array reads as empty
    assert got == want
    assert all(type(row) is tuple for row in got)


def test_sliced_and_empty_batches() -> None:
    # Arrow slices share their parent's children: the offsets stay absolute, which the reader
    # relies on; an empty batch yields nothing.
    batch = _batch(ROWS)
    got = list(latest_rows([batch.slice(0, 0), batch.slice(2, 2), batch.slice(4)]))
    assert [row[5] for row in got] == ["03", "04", "05"]
    assert got[0][3] == {"id": "3", "name": ""} and got[0][4] == ["doc"]
    assert got[1][3] is None and got[2][3] == {}
