"""The lake targets' type mapping and schema change decisions, without Spark: which Spark type a
source column gets, what each format widens, and what the policies plan."""

from __future__ import annotations

import pytest

from airflow_cdc.spark.table_schemas import SourceColumn, TableSchema
from airflow_cdc.spark.targets.lake_evolution import LakeTargetError, plan_table, sql_literal
from airflow_cdc.spark.targets.lake_schemas import can_widen, in_place, spark_type, takes, widened

DECIMAL = "org.apache.kafka.connect.data.Decimal"


def decimal(precision: int | None, scale: int) -> SourceColumn:
    parameters = {"scale": str(scale)} | ({"connect.decimal.precision": str(precision)} if precision else {})
    return SourceColumn("d", "bytes", semantic=DECIMAL, parameters=parameters)


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (SourceColumn("c", "int8"), "smallint"),
        (SourceColumn("c", "int16"), "smallint"),
        (SourceColumn("c", "int32"), "int"),
        (SourceColumn("c", "int64"), "bigint"),
        (SourceColumn("c", "float32"), "float"),
        (SourceColumn("c", "float64"), "double"),
        (SourceColumn("c", "boolean"), "boolean"),
        (SourceColumn("c", "string"), "string"),
        (SourceColumn("c", "bytes"), "binary"),
        (decimal(10, 2), "decimal(10,2)"),
        (decimal(65, 30), "string"),
        (decimal(None, 4), "decimal(38,4)"),
        (SourceColumn("c", "int32", semantic="io.debezium.time.Date"), "date"),
        (SourceColumn("c", "int64", semantic="io.debezium.time.MicroTime"), "string"),
        (SourceColumn("c", "int32", semantic="io.debezium.time.Time"), "string"),
        (SourceColumn("c", "int64", semantic="io.debezium.time.Timestamp"), "timestamp_ntz"),
        (SourceColumn("c", "int64", semantic="io.debezium.time.MicroTimestamp"), "timestamp_ntz"),
        (SourceColumn("c", "string", semantic="io.debezium.time.ZonedTimestamp"), "timestamp"),
        (SourceColumn("c", "string", semantic="io.debezium.data.Json"), "string"),
        (SourceColumn("c", "struct", semantic="io.debezium.data.VariableScaleDecimal"), "string"),
        (SourceColumn("c", "array", items=SourceColumn("", "int32")), "array<int>"),
        (SourceColumn("c", "struct"), "string"),
    ],
)
def test_spark_types(column: SourceColumn, expected: str) -> None:
    assert spark_type(column) == expected


@pytest.mark.parametrize(
    ("target", "source", "verdict"),
    [
        ("int", "int", "as is"),
        ("bigint", "int", "as is"),
        ("int", "bigint", "widen"),
        ("decimal(10,2)", "decimal(20,4)", "widen"),
        ("decimal(20,4)", "decimal(10,2)", "as is"),
        ("decimal(12,2)", "int", "as is"),
        ("decimal(5,2)", "int", "no"),
        ("string", "int", "no"),
        ("int", "string", "no"),
        ("float", "double", "widen"),
        ("timestamp_ntz", "timestamp", "no"),
    ],
)
def test_takes(target: str, source: str, verdict: str) -> None:
    assert takes(target, source) == verdict


def test_widened_keeps_the_larger_digits_on_each_side_of_the_point() -> None:
    assert widened("decimal(10,2)", "decimal(12,6)") == "decimal(14,6)"
    assert widened("int", "bigint") == "bigint"


@pytest.mark.parametrize(
    ("fmt", "target", "new", "can"),
    [
        ("delta", "int", "bigint", True),
        ("delta", "smallint", "int", True),
        ("delta", "decimal(10,2)", "decimal(20,4)", True),
        ("iceberg", "int", "bigint", True),
        ("iceberg", "decimal(10,2)", "decimal(20,2)", True),
        ("iceberg", "decimal(10,2)", "decimal(20,4)", True),
        ("iceberg", "smallint", "bigint", False),
        ("iceberg", "float", "double", True),
        ("parquet", "decimal(10,2)", "decimal(20,4)", True),
        ("parquet", "decimal(30,2)", "decimal(40,2)", False),
    ],
)
def test_what_each_format_widens(fmt: str, target: str, new: str, can: bool) -> None:
    assert can_widen(fmt, target, new) is can


def test_what_each_format_widens_without_rewriting_data() -> None:
    assert in_place("delta", "decimal(10,2)", "decimal(20,4)")
    assert in_place("iceberg", "decimal(10,2)", "decimal(20,2)")
    assert not in_place("iceberg", "decimal(10,2)", "decimal(20,4)")  # the job replaces the table
    assert in_place("iceberg", "int", "bigint")
    assert not in_place("parquet", "int", "bigint")


def version(*columns: SourceColumn) -> TableSchema:
    return TableSchema("s.t", (SourceColumn("id", "int32", optional=False), *columns), ("id",))


CURRENT = {"id": "int", "a": "int", "b": "string", "_cdc_position": "string"}
V1 = version(SourceColumn("a", "int32"), SourceColumn("b", "string"))


def test_a_missing_table_is_created_unless_the_policy_is_exception() -> None:
    plan = plan_table("delta", "lenient", "/l/s.t", "s.t", [V1], None)
    assert plan.create == [("id", "int"), ("a", "int"), ("b", "string")]
    assert plan_table("delta", "exception", "/l/s.t", "s.t", [V1], None).create is None


def test_added_widened_and_dropped_columns_by_policy() -> None:
    v2 = version(SourceColumn("a", "int64"), SourceColumn("c", "string", default="x", has_default=True))
    lenient = plan_table("iceberg", "lenient", "t", "s.t", [V1, v2], CURRENT)
    assert [(n, t) for n, t, _ in lenient.add] == [("c", "string")]
    assert lenient.widen == [("a", "int", "bigint")]
    assert lenient.keep_absent == {"b", "c"}  # b dropped; c added with a default
    evolve = plan_table("iceberg", "evolve", "t", "s.t", [V1, v2], CURRENT)
    assert evolve.keep_absent == {"c"}
    ignore = plan_table("iceberg", "ignore", "t", "s.t", [V1, v2], CURRENT)
    assert not ignore.changes and ignore.keep_absent == {"b"}


def test_exception_refuses_what_lenient_would_change() -> None:
    with pytest.raises(LakeTargetError, match=r"lacks the column\(s\) c .*ADD COLUMNS \(c string\)"):
        plan_table(
            "delta",
            "exception",
            "t",
            "s.t",
            [version(SourceColumn("a", "int32"), SourceColumn("c", "string"))],
            CURRENT,
        )
    with pytest.raises(LakeTargetError, match="narrower than the source's int64: widen it to bigint"):
        plan_table("delta", "exception", "t", "s.t", [version(SourceColumn("a", "int64"))], CURRENT)


def test_an_incompatible_change_names_table_column_both_types_and_the_fix() -> None:
    with pytest.raises(LakeTargetError) as stopped:
        plan_table("delta", "evolve", "/l/s.t", "s.t", [version(SourceColumn("b", "int32"))], CURRENT)
    message = str(stopped.value)
    assert "/l/s.t (source s.t): column b is string" in message
    assert "int32 (int on this target)" in message
    assert "overwriteSchema" in message and "schema_change_policy='ignore'" in message


def test_sql_literals() -> None:
    import datetime as dt
    from decimal import Decimal

    assert sql_literal(Decimal("1.50"), "decimal(10,2)") == "CAST('1.50' AS decimal(10,2))"
    assert sql_literal("it's", "string") == "CAST('it\\'s' AS string)"
    assert (
        sql_literal(dt.datetime(2024, 1, 2, 3, 4, 5), "timestamp_ntz") == "CAST('2024-01-02 03:04:05' AS timestamp_ntz)"
    )
    assert sql_literal(b"\x01\xff", "binary") == "X'01ff'"
    assert sql_literal(True, "boolean") == "true"
