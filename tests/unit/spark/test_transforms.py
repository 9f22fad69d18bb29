"""The apply job's pure transforms on small frames: flatten, order, last change per key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_cdc.spark.frames import LATEST_SCHEMA, RAW_SCHEMA, UNAVAILABLE_PLACEHOLDER

pytestmark = pytest.mark.slow

T = "inventory.customers"


def pg_event(
    op: str, key: int, after: dict[str, Any] | None, seq: tuple[int | None, int], snapshot: str = "false"
) -> str:
    source = {
        "connector": "postgresql",
        "db": "shop",
        "schema": "inventory",
        "table": "customers",
        "snapshot": snapshot,
        "lsn": seq[1],
        "sequence": json.dumps([None if seq[0] is None else str(seq[0]), str(seq[1])]),
    }
    before = {"id": key} if op == "d" else None
    return json.dumps({"before": before, "after": after, "source": source, "op": op, "ts_ms": 1})


def raw(spark: Any, records: list[tuple[int, str | None]], partition: int = 0) -> Any:
    rows = [(T, partition, offset, json.dumps({"id": key}), value) for offset, (key, value) in enumerate(records)]
    return spark.createDataFrame(rows, RAW_SCHEMA)


def latest(spark: Any, frame: Any) -> list[tuple[Any, ...]]:
    from airflow_cdc.spark.transforms import flatten, latest_changes

    out = latest_changes(flatten(frame))
    rows = [
        (r.table, r.op, r.key, dict(r.after) if r.after is not None else None, sorted(r.unavailable), r.position)
        for r in out.collect()
    ]
    return sorted(rows, key=lambda r: (r[0], r[2] or ""))


def expected(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, LATEST_SCHEMA)


def test_last_change_per_key_in_source_order_even_when_the_batch_is_out_of_order(spark: Any) -> None:
    from pyspark.testing import assertDataFrameEqual

    from airflow_cdc.spark.transforms import flatten, latest_changes

    frame = raw(
        spark,
        [
            (1, pg_event("u", 1, {"id": 1, "name": "third"}, (300, 310))),
            (1, pg_event("c", 1, {"id": 1, "name": "first"}, (100, 110))),
            (2, pg_event("c", 2, {"id": 2, "name": "two"}, (100, 120))),
            (1, pg_event("u", 1, {"id": 1, "name": "second"}, (200, 210))),
            (2, None),  # a tombstone is no change
            (1, pg_event("u", 1, {"id": 1, "name": "third"}, (300, 310))),  # a re-sent duplicate
        ],
    )
    got = latest_changes(flatten(frame))
    want = expected(
        spark,
        [
            (T, "u", '{"id": 1}', {"id": "1", "name": "third"}, [], f"{300:016x}{310:016x}"),
            (T, "c", '{"id": 2}', {"id": "2", "name": "two"}, [], f"{100:016x}{120:016x}"),
        ],
    )
    assertDataFrameEqual(got, want)


def test_deletes_stay_deletes_and_a_key_change_is_a_delete_and_an_insert(spark: Any) -> None:
    frame = raw(
        spark,
        [
            (1, pg_event("c", 1, {"id": 1, "v": "a"}, (10, 11))),
            (1, pg_event("d", 1, None, (20, 21))),
            (1, None),
            (5, pg_event("c", 5, {"id": 5, "v": "a"}, (20, 22))),
            (3, pg_event("d", 3, None, (30, 31))),
            (3, pg_event("c", 3, {"id": 3, "v": "back"}, (40, 41))),
        ],
    )
    got = latest(spark, frame)
    assert [(r[1], r[2], r[3]) for r in got] == [
        ("d", '{"id": 1}', None),
        ("c", '{"id": 3}', {"id": "3", "v": "back"}),
        ("c", '{"id": 5}', {"id": "5", "v": "a"}),
    ]


def test_initial_snapshot_rows_lose_to_any_stream_change_incremental_ones_order_by_their_window(spark: Any) -> None:
    frame = raw(
        spark,
        [
            # A transaction in flight at the slot's snapshot streams an LSN below the snapshot's.
            (1, pg_event("u", 1, {"id": 1, "v": "streamed"}, (None, 50))),
            (1, pg_event("r", 1, {"id": 1, "v": "snapshot"}, (None, 900), snapshot="true")),
            # An incremental snapshot's row, read after an update and before the next one.
            (2, pg_event("u", 2, {"id": 2, "v": "old"}, (100, 101))),
            (2, pg_event("r", 2, {"id": 2, "v": "read"}, (150, 150), snapshot="incremental")),
            (3, pg_event("r", 3, {"id": 3, "v": "read"}, (150, 150), snapshot="incremental")),
            (3, pg_event("u", 3, {"id": 3, "v": "newer"}, (160, 161))),
        ],
    )
    got = {r[2]: (r[3]["v"], r[5]) for r in latest(spark, frame)}
    assert got['{"id": 1}'][0] == "streamed"
    assert got['{"id": 2}'] == ("read", f"{150:016x}{150:016x}")
    assert got['{"id": 3}'][0] == "newer"
    snapshot_only = latest(spark, raw(spark, [(9, pg_event("r", 9, {"id": 9}, (None, 900), snapshot="last"))]))
    assert snapshot_only[0][5] == "0" * 32


def test_unchanged_toasted_values_come_from_the_batch_else_stay_for_the_target(spark: Any) -> None:
    frame = raw(
        spark,
        [
            (1, pg_event("c", 1, {"id": 1, "doc": "big", "n": 1}, (10, 11))),
            (1, pg_event("u", 1, {"id": 1, "doc": UNAVAILABLE_PLACEHOLDER, "n": 2}, (20, 21))),
            (2, pg_event("u", 2, {"id": 2, "doc": UNAVAILABLE_PLACEHOLDER, "n": 7}, (20, 22))),
            (3, pg_event("c", 3, {"id": 3, "doc": "gone", "n": 1}, (10, 12))),
            (3, pg_event("d", 3, None, (20, 23))),
            (3, pg_event("c", 3, {"id": 3, "doc": UNAVAILABLE_PLACEHOLDER, "n": 3}, (30, 31))),
        ],
    )
    got = {r[2]: (r[3], r[4]) for r in latest(spark, frame)}
    assert got['{"id": 1}'] == ({"id": "1", "doc": "big", "n": "2"}, [])
    assert got['{"id": 2}'] == ({"id": "2", "n": "7"}, ["doc"])
    # A delete in between: the earlier value is not the row's any more.
    assert got['{"id": 3}'] == ({"id": "3", "n": "3"}, ["doc"])


def test_truncate_empties_the_table_first_and_drops_the_changes_before_it(spark: Any) -> None:
    truncate = json.dumps(
        {
            "before": None,
            "after": None,
            "op": "t",
            "source": {
                "schema": "inventory",
                "table": "customers",
                "snapshot": "false",
                "lsn": 55,
                "sequence": '["50","55"]',
            },
        }
    )
    frame = raw(
        spark,
        [
            (1, pg_event("c", 1, {"id": 1}, (10, 11))),
            (2, pg_event("c", 2, {"id": 2}, (10, 12))),
            (0, truncate),
            (2, pg_event("c", 2, {"id": 2, "v": "after"}, (60, 61))),
        ],
    )
    got = latest(spark, frame)
    assert [(r[1], r[2]) for r in got] == [("t", None), ("c", '{"id": 2}')]
    assert got[0][5] == f"{50:016x}{55:016x}"


def test_debeziums_schemas_enabled_records_and_mysql_positions(spark: Any) -> None:
    value = {
        "schema": {"type": "struct"},
        "payload": {
            "before": None,
            "after": {"id": 4, "price": "12.50"},
            "op": "c",
            "source": {
                "db": "shop",
                "table": "items",
                "snapshot": "false",
                "file": "mysql-bin.000012",
                "pos": 4096,
                "row": 2,
            },
        },
    }
    key = {"schema": {"type": "struct"}, "payload": {"id": 4}}
    frame = spark.createDataFrame([("shop.items", 0, 0, json.dumps(key), json.dumps(value))], RAW_SCHEMA)
    [row] = latest(spark, frame)
    assert row[:4] == ("shop.items", "c", '{"id":4}', {"id": "4", "price": "12.50"})
    assert row[5] == f"{12:08x}{4096:016x}{2:08x}"


def test_a_binlog_file_without_a_numeric_suffix_orders_as_index_zero(spark: Any) -> None:
    # Spark's ANSI mode would fail the batch casting "" to a number.
    event = {
        "after": {"id": 1},
        "op": "r",
        "source": {"db": "shop", "table": "t", "snapshot": "incremental", "file": "", "pos": 0},
    }
    frame = spark.createDataFrame([("shop.t", 0, 0, '{"id":1}', json.dumps(event))], RAW_SCHEMA)
    [row] = latest(spark, frame)
    assert row[5] == "0" * 32


def test_lanes_spread_a_tables_keys_over_the_partitions_each_in_source_order(spark: Any) -> None:
    from airflow_cdc.spark.transforms import flatten, for_lanes, laned_latest, latest_changes

    frame = raw(spark, [(k, pg_event("c", k, {"id": k}, (10, 10 + k))) for k in range(1, 200)])
    for laned in (laned_latest(flatten(frame), 4), for_lanes(latest_changes(flatten(frame)), 4)):
        parts = [p for p in laned.rdd.glom().collect() if p]
        assert len(parts) == 4  # one table, four write tasks
        assert sorted(r.key for p in parts for r in p) == sorted(json.dumps({"id": k}) for k in range(1, 200))
        for part in parts:
            positions = [r.position for r in part]
            assert positions == sorted(positions)


def test_a_table_truncated_in_the_batch_stays_in_one_partition_truncate_first(spark: Any) -> None:
    """Its guarded delete, in a transaction of its own, would lock the rows other partitions'
    upserts lock (``for_lanes``): the table applies as one transaction, the truncate first."""
    from airflow_cdc.spark.transforms import flatten, for_lanes, laned_latest, latest_changes

    truncate = json.dumps(
        {
            "op": "t",
            "source": {"schema": "inventory", "table": "customers", "snapshot": "false", "sequence": '["5","6"]'},
        }
    )
    other = json.dumps(
        {
            "op": "c",
            "after": {"id": 1},
            "source": {"schema": "inventory", "table": "orders", "snapshot": "false", "sequence": '["5","7"]'},
        }
    )
    records = [(k, pg_event("c", k, {"id": k}, (10, 10 + k))) for k in range(1, 40)] + [(0, truncate)]
    frame = raw(spark, records).union(raw(spark, [(k, other.replace('"id": 1', f'"id": {k}')) for k in range(60)]))
    for laned in (laned_latest(flatten(frame), 4), for_lanes(latest_changes(flatten(frame)), 4)):
        parts = [p for p in laned.rdd.glom().collect() if p]
        truncated = [p for p in parts if any(r.table == T for r in p)]
        assert len(truncated) == 1
        mine = [r for r in truncated[0] if r.table == T]
        assert mine[0].op == "t" and len(mine) == 40
        positions = [r.position for r in mine[1:]]
        assert positions == sorted(positions)
        assert len([p for p in parts if any(r.table == "inventory.orders" for r in p)]) > 1  # not truncated


def _laned_rows(laned: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r.table, r.op, r.key or "", sorted((r.after or {}).items()), sorted(r.unavailable), r.position)
        for r in laned.collect()
    )


@pytest.mark.parametrize("kind", ["plain", "truncate", "toast"])
def test_the_batch_facts_plan_gives_the_general_plans_rows(spark: Any, kind: str) -> None:
    """``batch_facts`` finds a batch's TRUNCATE and TOAST placeholders, and the plan it lets the
    job build (only the last change per key when there are neither) writes the same rows."""
    from airflow_cdc.spark.transforms import batch_facts, flatten, laned_latest, parse, raw_facts

    records = [
        (k % 7, pg_event("u" if k >= 7 else "c", k % 7, {"id": k % 7, "n": str(k)}, (10, 10 + k))) for k in range(30)
    ]
    if kind == "truncate":
        truncate = {"op": "t", "source": {"schema": "inventory", "table": "customers", "sequence": '["5","25"]'}}
        records.insert(15, (0, json.dumps(truncate)))
    if kind == "toast":
        records.append((3, pg_event("u", 3, {"id": 3, "n": UNAVAILABLE_PLACEHOLDER}, (10, 99))))
    frame = raw(spark, records)
    facts = batch_facts(parse(frame))
    assert (facts.records, facts.truncates, facts.toasted) == (len(records), kind == "truncate", kind == "toast")
    assert raw_facts(frame) == facts  # the same facts from the raw text, without parsing it
    assert _laned_rows(laned_latest(flatten(frame), 3, facts=facts)) == _laned_rows(laned_latest(flatten(frame), 3))


def test_without_a_truncate_or_placeholder_the_plan_has_one_grouping(spark: Any) -> None:
    """The point of the facts: no broadcast joins for the truncate cut and the TOAST keys (each
    was a Spark job of its own; a small batch spent most of its time starting them)."""
    from airflow_cdc.spark.transforms import BatchFacts, flatten, laned_latest

    frame = raw(spark, [(k, pg_event("c", k, {"id": k}, (10, 10 + k))) for k in range(5)])
    lean = laned_latest(flatten(frame), 2, facts=BatchFacts(5, False, False))._jdf.queryExecution().toString()
    full = laned_latest(flatten(frame), 2)._jdf.queryExecution().toString()
    assert "Join" not in lean.split("== Optimized Logical Plan ==")[1]
    assert "Join" in full.split("== Optimized Logical Plan ==")[1]


def test_the_lean_plan_shuffles_the_batch_once_and_spreads_it_over_the_lanes(spark: Any) -> None:
    """Spread by (table, key) before the last change per key: the aggregate needs no shuffle of
    its own (the general plan shuffles for the aggregate, then again for the lanes)."""
    from airflow_cdc.spark.transforms import BatchFacts, flatten, laned_latest

    records = [(k % 150, pg_event("c", k % 150, {"id": k % 150, "n": str(k)}, (10, 10 + k))) for k in range(300)]
    frame = raw(spark, records)
    lean = laned_latest(flatten(frame), 4, facts=BatchFacts(300, False, False))
    plan = lean._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan
    parts = [p for p in lean.rdd.glom().collect() if p]
    assert len(parts) == 4
    assert sorted(r.key for p in parts for r in p) == sorted(json.dumps({"id": k}) for k in range(150))
    for part in parts:
        assert [r.position for r in part] == sorted(r.position for r in part)
    assert {r.after["n"] for p in parts for r in p} == {str(k) for k in range(150, 300)}  # the last change


def test_raw_facts_find_a_truncate_inside_a_schemas_enabled_record(spark: Any) -> None:
    from airflow_cdc.spark.transforms import BatchFacts, raw_facts

    truncate = {"op": "t", "source": {"schema": "inventory", "table": "customers", "sequence": '["5","25"]'}}
    wrapped = json.dumps({"schema": {"type": "struct"}, "payload": truncate})
    spaced = json.dumps(truncate, indent=2)  # whitespace around the colon: the JSON is parsed
    for value in (wrapped, spaced):
        frame = raw(spark, [(1, pg_event("c", 1, {"id": 1, "n": "t"}, (10, 11))), (0, value)])
        assert raw_facts(frame) == BatchFacts(2, True, False)
    assert raw_facts(raw(spark, [(1, pg_event("c", 1, {"id": 1, "n": "t"}, (10, 11)))])) == BatchFacts(1, False, False)
