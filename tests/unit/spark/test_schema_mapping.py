"""The table schema read from a record's Connect schemas, and its type on each SQL target."""

from __future__ import annotations

import pytest

from airflow_cdc.spark.table_schemas import SourceColumn, merged, table_schema
from airflow_cdc.spark.targets.sql.type_mapping import kind, mysql_type, postgres_type, takes, widened

KEY = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}], "name": "p.public.t.Key"}


def _envelope(*fields: dict) -> dict:
    row = {"type": "struct", "fields": list(fields), "optional": True, "name": "p.public.t.Value"}
    return {
        "type": "struct",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {
                "type": "struct",
                "fields": [],
                "optional": False,
                "name": "io.debezium.connector.postgresql.Source",
                "field": "source",
            },
            {"type": "string", "optional": False, "field": "op"},
        ],
        "name": "p.public.t.Envelope",
    }


def test_the_envelope_gives_columns_in_order_with_the_key() -> None:
    value = _envelope(
        {"type": "int32", "optional": False, "field": "id"},
        {
            "type": "string",
            "optional": True,
            "parameters": {"__debezium.source.column.type": "VARCHAR", "__debezium.source.column.length": "20"},
            "field": "name",
        },
        {"type": "int32", "optional": False, "default": 7, "field": "n"},
    )
    schema = table_schema("public.t", KEY, value)
    assert schema is not None
    assert schema.names == ("id", "name", "n") and schema.key == ("id",)
    name = schema.column("name")
    assert name is not None and name.source_type == "VARCHAR" and name.length == 20 and name.optional
    n = schema.column("n")
    assert n is not None and n.has_default and n.default == 7 and not n.optional


def test_an_envelope_without_a_row_is_no_table() -> None:
    message = {
        "type": "struct",
        "fields": [
            {"type": "string", "field": "op"},
            {"type": "struct", "fields": [], "field": "source"},
            {"type": "struct", "fields": [], "field": "message"},
        ],
    }
    assert table_schema("public.t", None, message) is None


def test_merged_keeps_the_newest_order_then_dropped_columns() -> None:
    old = table_schema("t", KEY, _envelope({"type": "int32", "field": "id"}, {"type": "string", "field": "a"}))
    new = table_schema("t", KEY, _envelope({"type": "int32", "field": "id"}, {"type": "int64", "field": "b"}))
    assert old is not None and new is not None
    assert merged([old, new]).names == ("id", "b", "a")


@pytest.mark.parametrize(
    ("column", "postgres", "mysql"),
    [
        (SourceColumn("c", "int32"), "integer", "int"),
        (SourceColumn("c", "int64"), "bigint", "bigint"),
        (SourceColumn("c", "int16"), "smallint", "smallint"),
        (SourceColumn("c", "boolean"), "boolean", "boolean"),
        (SourceColumn("c", "float64"), "double precision", "double"),
        (SourceColumn("c", "string"), "text", "longtext"),
        (SourceColumn("c", "bytes"), "bytea", "longblob"),
        (
            SourceColumn(
                "c",
                "bytes",
                semantic="org.apache.kafka.connect.data.Decimal",
                parameters={"scale": "2", "connect.decimal.precision": "10"},
            ),
            "numeric(10,2)",
            "decimal(10,2)",
        ),
        (SourceColumn("c", "int32", semantic="io.debezium.time.Date"), "date", "date"),
        (SourceColumn("c", "int64", semantic="io.debezium.time.MicroTimestamp"), "timestamp(6)", "datetime(6)"),
        (SourceColumn("c", "int64", semantic="io.debezium.time.Timestamp"), "timestamp(3)", "datetime(3)"),
        (SourceColumn("c", "string", semantic="io.debezium.time.ZonedTimestamp"), "timestamptz", "datetime(6)"),
        (SourceColumn("c", "string", semantic="io.debezium.data.Json"), "jsonb", "json"),
        (SourceColumn("c", "string", semantic="io.debezium.data.Uuid"), "uuid", "char(36)"),
        (
            SourceColumn(
                "c",
                "string",
                parameters={"__debezium.source.column.type": "VARCHAR", "__debezium.source.column.length": "20"},
            ),
            "varchar(20)",
            "varchar(20)",
        ),
        (SourceColumn("c", "array", items=SourceColumn("", "int32")), "integer[]", "json"),
    ],
)
def test_each_dialect_maps_a_source_column(column: SourceColumn, postgres: str, mysql: str) -> None:
    assert postgres_type(column) == postgres
    assert mysql_type(column) == mysql


def test_a_mysql_key_column_gets_a_bounded_type() -> None:
    assert mysql_type(SourceColumn("k", "string"), key=True) == "varchar(255)"


@pytest.mark.parametrize(
    ("target", "source", "verdict", "to"),
    [
        ("integer", "bigint", "widen", "bigint"),
        ("int(11)", "bigint", "widen", "bigint"),
        ("bigint", "integer", "as is", None),
        ("character varying(20)", "varchar(200)", "widen", "varchar(200)"),
        ("text", "varchar(200)", "as is", None),
        ("numeric(10,2)", "numeric(20,4)", "widen", "numeric(20,4)"),
        ("numeric(10,4)", "numeric(8,2)", "as is", None),
        ("numeric(10,4)", "numeric(12,2)", "widen", "numeric(14,4)"),
        ("decimal(10,2)", "decimal(20,4)", "widen", "decimal(20,4)"),
        ("text", "integer", "no", None),
        ("integer", "text", "no", None),
        ("timestamp(6) without time zone", "timestamp(6)", "as is", None),
        ("timestamp with time zone", "timestamptz", "as is", None),
        ("longtext", "json", "as is", None),
        ("text", "uuid", "as is", None),
        ("tinyint(1)", "boolean", "as is", None),
        ("integer[]", "integer[]", "as is", None),
    ],
)
def test_a_target_column_takes_a_source_type(target: str, source: str, verdict: str, to: str | None) -> None:
    assert takes(target, source) == verdict
    if to is not None:
        assert widened(target, source) == to


def test_kind_reads_sizes() -> None:
    assert kind("varchar(20)").size == (20.0,)
    assert kind("numeric(10,2)").size == (8.0, 2.0)
    assert kind("time(6) without time zone").family == "time"
