"""Lake targets follow a source's schema changes (issue 28): a table that does not exist is
created from the schemas a batch's records carry, columns are added (existing rows get the
source's default, else NULL), dropped columns get NULL (evolve) or keep their values (lenient),
integers and decimals widen in place where the format allows, an incompatible change stops the
batch with a message naming the fix, and ``ignore`` logs each left-out column once.

Real Spark, Delta, Parquet and Iceberg tables; the batch writer's two calls, ``prepare(versions)``
then ``apply(latest)``, with schemas parsed from Connect JSON schemas as the job reads them.
After every step the target equals the expected rows.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.spark.frames import LATEST_SCHEMA, POSITION_COLUMN
from airflow_cdc.spark.schema_policy import SETTING
from airflow_cdc.spark.table_schemas import TableSchema, table_schema
from airflow_cdc.spark.targets import lake_backfill
from airflow_cdc.spark.targets.lake import LakeTarget, LakeTargetError

#: Each case is a few small Delta or Iceberg commits; the first pays the session and the formats' start.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

KINDS = ("delta", "parquet", "iceberg")
DECIMAL = "org.apache.kafka.connect.data.Decimal"


# --- schemas and changes as the job reads them --------------------------------------------------


def field(name: str, type_: str, semantic: str | None = None, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"field": name, "type": type_, "optional": name != "id"}
    if semantic:
        out["name"] = semantic
    return out | more


def decimal_field(name: str, precision: int, scale: int) -> dict[str, Any]:
    parameters = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return field(name, "bytes", DECIMAL, version=1, parameters=parameters)


def schema(table: str, *fields: dict[str, Any]) -> TableSchema:
    key = {"type": "struct", "fields": [field("id", "int32")]}
    found = table_schema(table, key, {"type": "struct", "fields": [field("id", "int32"), *fields]})
    assert found is not None
    return found


def decimal(value: str, scale: int) -> str:
    """Debezium's Decimal (precise): the unscaled value's big-endian two's complement, base64."""
    unscaled = int(Decimal(value).scaleb(scale))
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()


class Source:
    """One source table's changes, positions ascending across batches."""

    def __init__(self, table: str) -> None:
        self.table, self.position = table, 0

    def change(self, op: str, key: int, **after: Any) -> tuple[Any, ...]:
        self.position += 1
        values = None if op == "d" else {"id": str(key)} | {k: _text(v) for k, v in after.items()}
        return (self.table, op, json.dumps({"id": key}), values, [], f"{self.position:032x}")


def _text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def batch(target: LakeTarget, spark: Any, versions: list[TableSchema], *changes: tuple[Any, ...]) -> None:
    """One micro-batch as the batch writer runs it."""
    target.prepare({versions[0].table: versions})
    target.apply(spark.createDataFrame(list(changes), LATEST_SCHEMA))


def rows(target: LakeTarget, spark: Any, table: str) -> list[dict[str, Any]]:
    schema = target.format.schema(spark, table)
    assert schema is not None, f"no {target.kind} table for {table}"
    frame = target.read(spark, table)
    return sorted(
        ({k: v for k, v in r.asDict().items() if k != POSITION_COLUMN} for r in frame.collect()),
        key=lambda r: r["id"],
    )


def types(target: LakeTarget, spark: Any, table: str) -> dict[str, str]:
    found = target.format.columns(spark, table)
    assert found is not None
    return found


def lake(tmp_path: Path, kind: str, policy: str) -> tuple[LakeTarget, str]:
    table = f"shop.t_{kind}_{policy}_{uuid.uuid4().hex[:8]}"  # say_once is per process: a fresh table
    return LakeTarget(f"{kind}:{tmp_path / 'lake'}", {}, {SETTING: policy}), table


# --- the cases ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_table_is_created_then_columns_are_added_and_widened(spark: Any, tmp_path: Path, kind: str) -> None:
    target, table = lake(tmp_path, kind, "lenient")
    source = Source(table)
    micro = "io.debezium.time.MicroTimestamp"
    v1 = schema(
        table,
        field("name", "string"),
        field("n", "int32"),
        decimal_field("amount", 10, 2),
        field("at", "int64", micro),
        field("clock", "int64", "io.debezium.time.MicroTime"),
        field("tags", "array", items={"type": "string", "optional": True}),
    )
    at = 1_700_000_000_123_456
    batch(
        target,
        spark,
        [v1],
        source.change("c", 1, name="a", n=1, amount=decimal("12.34", 2), at=at, clock=3_600_000_500, tags=["x"]),
        source.change("c", 2, name="b", n=2, amount=None, at=None, clock=None, tags=None),
    )
    assert types(target, spark, table) == {
        "id": "int",
        "name": "string",
        "n": "int",
        "amount": "decimal(10,2)",
        "at": "timestamp_ntz",
        "clock": "string",
        "tags": "array<string>",
        POSITION_COLUMN: "string",
    }
    first = {
        "id": 1,
        "name": "a",
        "n": 1,
        "amount": Decimal("12.34"),
        "at": dt.datetime(2023, 11, 14, 22, 13, 20, 123456),
    }
    first |= {"clock": "01:00:00.000500", "tags": ["x"]}
    second = {"id": 2, "name": "b", "n": 2, "amount": None, "at": None, "clock": None, "tags": None}
    assert rows(target, spark, table) == [first, second]

    # ADD COLUMN note text; ADD COLUMN flag int DEFAULT 7: existing rows get 7, a changed row its value.
    v2 = schema(table, *_fields(v1)[1:], field("note", "string"), field("flag", "int32", default=7))
    batch(target, spark, [v2], source.change("u", 2, name="b", n=2, note="new", flag=1))
    first |= {"note": None, "flag": 7}
    second |= {"note": "new", "flag": 1}
    assert rows(target, spark, table) == [first, second]

    # ALTER COLUMN n TYPE bigint, amount numeric(20,4) (Iceberg widens a decimal's precision only: 20,2).
    scale = 2 if kind == "iceberg" else 4
    v3 = schema(
        table,
        field("name", "string"),
        field("n", "int64"),
        decimal_field("amount", 20, scale),
        *[c for c in _fields(v2) if c["field"] not in ("id", "name", "n", "amount")],
    )
    batch(target, spark, [v3], source.change("c", 3, name="c", n=2**40, amount=decimal("123456789012.34", scale)))
    widened = types(target, spark, table)
    assert (widened["n"], widened["amount"]) == ("bigint", f"decimal(20,{scale})")
    third = {k: None for k in first} | {"id": 3, "name": "c", "n": 2**40, "amount": Decimal("123456789012.34")}
    assert _plain(rows(target, spark, table)) == _plain([first, second, third])


def _fields(version: TableSchema) -> list[dict[str, Any]]:
    """A parsed schema's columns back as Connect field schemas (enough for these tests)."""
    out = []
    for c in version.columns:
        f = field(c.name, c.type, c.semantic, parameters=dict(c.parameters))
        if c.items is not None:
            f["items"] = {"type": c.items.type, "optional": True}
        if c.has_default:
            f["default"] = c.default
        out.append(f)
    return out


def _plain(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decimals compared by value (a widened scale adds zeros)."""
    return [{k: (v.normalize() if isinstance(v, Decimal) else v) for k, v in r.items()} for r in found]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("policy", ["evolve", "lenient"])
def test_a_dropped_column_gets_null_under_evolve_and_keeps_its_values_under_lenient(
    spark: Any, tmp_path: Path, kind: str, policy: str
) -> None:
    target, table = lake(tmp_path, kind, policy)
    source = Source(table)
    v1 = schema(table, field("a", "int32"), field("b", "string"))
    batch(target, spark, [v1], source.change("c", 1, a=1, b="one"), source.change("c", 2, a=2, b="two"))
    # ALTER TABLE DROP COLUMN b; then key 1 changes (its event lacks b), key 2 does not.
    v2 = schema(table, field("a", "int32"))
    batch(target, spark, [v1, v2], source.change("u", 1, a=10))
    kept = "one" if policy == "lenient" else None
    assert rows(target, spark, table) == [{"id": 1, "a": 10, "b": kept}, {"id": 2, "a": 2, "b": "two"}]


@pytest.mark.parametrize("kind", KINDS)
def test_an_incompatible_change_stops_the_batch_with_the_fix(spark: Any, tmp_path: Path, kind: str) -> None:
    target, table = lake(tmp_path, kind, "lenient")
    source = Source(table)
    v1 = schema(table, field("code", "string"))
    batch(target, spark, [v1], source.change("c", 1, code="a1"))
    v2 = schema(table, field("code", "int32"))  # ALTER COLUMN code TYPE integer USING ...
    with pytest.raises(LakeTargetError) as stopped:
        batch(target, spark, [v2], source.change("u", 1, code=7))
    message = str(stopped.value)
    for part in (table, "column code is string", "int32 (int on this target)", "schema_change_policy='ignore'"):
        assert part in message, message
    assert "Nothing of this batch was applied" in message
    assert rows(target, spark, table) == [{"id": 1, "code": "a1"}]


def test_iceberg_widens_a_decimals_scale_by_replacing_its_own_table_and_stops_on_another_catalogs(
    spark: Any, tmp_path: Path
) -> None:
    target, table = lake(tmp_path, "iceberg", "lenient")
    source = Source(table)
    v1 = schema(table, decimal_field("amount", 10, 2), field("note", "string"))
    batch(target, spark, [v1], source.change("c", 1, amount=decimal("1.5", 2), note="a"))
    v2 = schema(table, decimal_field("amount", 20, 4), field("note", "string"))
    batch(target, spark, [v2], source.change("c", 2, amount=decimal("2.1234", 4), note="b"))
    assert types(target, spark, table)["amount"] == "decimal(20,4)"
    assert rows(target, spark, table) == [
        {"id": 1, "amount": Decimal("1.5000"), "note": "a"},
        {"id": 2, "amount": Decimal("2.1234"), "note": "b"},
    ]
    # The same table through a catalog the user configured: the job does not replace its tables.
    spark.conf.set("spark.sql.catalog.users_lake", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.users_lake.type", "hadoop")
    spark.conf.set("spark.sql.catalog.users_lake.warehouse", str(tmp_path / "users"))
    theirs = LakeTarget("iceberg:catalog=users_lake", {}, {SETTING: "lenient"})
    batch(theirs, spark, [v1], source.change("c", 3, amount=decimal("3.5", 2), note="c"))
    with pytest.raises(
        LakeTargetError, match=r"column amount must widen to decimal\(20,4\).*not in catalog users_lake"
    ):
        theirs.prepare({table: [v2]})
    assert rows(theirs, spark, table) == [{"id": 3, "amount": Decimal("3.50"), "note": "c"}]


@pytest.mark.parametrize("kind", KINDS)
def test_ignore_applies_the_targets_columns_and_logs_each_left_out_column_once(
    spark: Any, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    target, table = lake(tmp_path, kind, "ignore")
    source = Source(table)
    v1 = schema(table, field("a", "int32"))
    batch(target, spark, [v1], source.change("c", 1, a=1))
    v2 = schema(table, field("a", "int64"), field("extra", "string"))
    with caplog.at_level(logging.WARNING, logger="airflow_cdc.spark.schema_policy"):
        batch(target, spark, [v2], source.change("u", 1, a=2, extra="x"))
        batch(target, spark, [v1, v2], source.change("c", 2, a=3, extra="y"))
    said = [r.getMessage() for r in caplog.records]
    assert sum("no column extra" in m for m in said) == 1, said
    assert sum("Column a of" in m and "stays int" in m for m in said) == 1, said
    assert types(target, spark, table) == {"id": "int", "a": "int", POSITION_COLUMN: "string"}
    assert rows(target, spark, table) == [{"id": 1, "a": 2}, {"id": 2, "a": 3}]


@pytest.mark.parametrize("kind", KINDS)
def test_exception_creates_nothing_and_stops_as_before(spark: Any, tmp_path: Path, kind: str) -> None:
    target, table = lake(tmp_path, kind, "exception")
    source = Source(table)
    with pytest.raises(LakeTargetError, match=f"no {kind} table for {table}.*create_table"):
        batch(target, spark, [schema(table, field("a", "int32"))], source.change("c", 1, a=1))


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_default_a_killed_run_added_without_filling_is_filled_by_the_rerun(
    spark: Any, tmp_path: Path, kind: str
) -> None:
    """A driver killed between ``ADD COLUMNS`` and the default's ``UPDATE`` (two commits in both
    formats): the table is left as such a run leaves it - the pending default noted, the column
    added - and the next run fills the default into the rows before it writes its batch."""
    target, table = lake(tmp_path, kind, "lenient")
    source = Source(table)
    v1 = schema(table, field("name", "string"))
    batch(target, spark, [v1], source.change("c", 1, name="a"), source.change("c", 2, name="b"))
    fmt: Any = target.format
    ref = fmt.ref(table)
    statements: list[str] = []
    lake_backfill.note(statements.append, ref, {"flag": "7"})  # what the killed run did, in its order
    statements.append(f"ALTER TABLE {ref} ADD COLUMNS (`flag` int)")
    for statement in statements:
        spark.sql(statement)
    assert [r["flag"] for r in rows(target, spark, table)] == [None, None]  # what the kill left

    rerun = LakeTarget(f"{kind}:{tmp_path / 'lake'}", {}, {SETTING: "lenient"})
    v2 = schema(table, field("name", "string"), field("flag", "int32", default=7))
    batch(rerun, spark, [v2], source.change("c", 3, name="c", flag=1))
    assert [(r["id"], r["flag"]) for r in rows(rerun, spark, table)] == [(1, 7), (2, 7), (3, 1)]
    properties = {r["key"] for r in spark.sql(f"SHOW TBLPROPERTIES {ref}").collect()}
    assert lake_backfill.PENDING not in properties
