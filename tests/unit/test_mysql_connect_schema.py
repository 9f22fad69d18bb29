"""The Connect schemas of MySQL/MariaDB tables (ADR 0024, MySQL section): built from the schema
history's definitions, once per definition; the oracle (test_mariadb_schemas_oracle.py) checks
them against Debezium's, these check the pieces without a server."""

from __future__ import annotations

import dataclasses
import re

from airflow_cdc.engine.connect_schema import SchemaSettings
from airflow_cdc.engine.sources.mysql import ddl
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder
from airflow_cdc.engine.sources.mysql.column_defaults import default_value
from airflow_cdc.engine.sources.mysql.connect_schema import TableSchemas, table_schemas
from airflow_cdc.engine.sources.mysql.ddl.information_schema import column
from airflow_cdc.engine.sources.mysql.types import ValueModes

ON = SchemaSettings(enabled=True)


def _table(*definitions: str, key: tuple[str, ...] = ("id",)) -> ddl.Table:
    columns = tuple(column(d.split(" ", 1)[0], d.split(" ", 1)[1], "utf8mb4") for d in definitions)
    return ddl.Table("db", "t", columns, key)


def _fields(schemas, side: str = "after") -> dict[str, dict]:
    envelope = schemas.value_schema
    row = next(f for f in envelope["fields"] if f["field"] == side)
    return {f["field"]: f for f in row["fields"]}


def test_no_builder_without_schemas_so_rows_take_the_old_path() -> None:
    assert table_schemas("mariadb", ValueModes(), SchemaSettings()) is None
    builder = ChangeBuilder(connector="mariadb", server="p", partition={}, tombstones=True, skipped=frozenset(),
                            extra_offset=dict)  # fmt: skip
    assert builder.plan(_table("id int not null"), "p.db.t", ValueModes(), snapshot=False).schemas is None


def test_key_value_and_envelope_names_types_optionality_and_defaults() -> None:
    table = _table(
        "id int not null",
        "n int unsigned default 5",
        "d decimal(10,2) not null default '1.50'",
        "dt datetime(6)",
        "ts timestamp(3) null default current_timestamp(3)",
        "tn timestamp not null default current_timestamp",
        "dz date default '0000-00-00'",
        "e enum('a','b','x,y') not null default 'b'",
        "b bit(3)",
        "c varchar(20) comment 'a note'",
    )
    schemas = TableSchemas("mariadb", ValueModes(), ON)(table, "p.db.t")
    assert schemas.key_schema == {
        "type": "struct",
        "fields": [{"type": "int32", "optional": False, "field": "id"}],
        "optional": False,
        "name": "p.db.t.Key",
    }
    assert schemas.value_schema["name"] == "p.db.t.Envelope"
    source = next(f for f in schemas.value_schema["fields"] if f["field"] == "source")
    assert source["name"] == "io.debezium.connector.mariadb.Source"
    fields = _fields(schemas)
    assert fields["n"] == {"type": "int64", "optional": True, "default": 5, "field": "n"}
    assert fields["d"]["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert fields["d"]["default"] == "AJY="  # 150 unscaled
    assert fields["dt"]["name"] == "io.debezium.time.MicroTimestamp"
    # CURRENT_TIMESTAMP is the epoch, which BinlogDefaultValueConverter drops in a nullable column
    assert "default" not in fields["ts"] and fields["tn"]["default"] == "1970-01-01T00:00:00Z"
    assert "default" not in fields["dz"]
    assert fields["e"]["parameters"] == {"allowed": "a,b,x\\,y"} and fields["e"]["default"] == "b"
    assert fields["b"]["parameters"] == {"length": "3"}
    assert fields["c"]["doc"] == "a note"


def test_modes_change_the_schemas() -> None:
    table = _table("id int not null", "d decimal(10,2) default 0", "bu bigint unsigned", "t time", "bl blob")
    modes = ValueModes(decimal="string", bigint_unsigned="precise", time_precision="connect", binary="hex")
    fields = _fields(TableSchemas("mysql", modes, ON)(table, "p.db.t"))
    assert fields["d"]["type"] == "string" and fields["d"]["default"] == "0.00"  # the scale's digits
    assert fields["bu"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert fields["bu"]["parameters"] == {"scale": "0", "connect.decimal.precision": "20"}
    assert fields["t"]["name"] == "org.apache.kafka.connect.data.Time"
    assert fields["bl"]["type"] == "string"


def test_propagated_source_types_only_in_the_value_and_only_where_they_match() -> None:
    settings = SchemaSettings(True, (re.compile(r"db\.t\.v", re.I),), (re.compile(r".+\.DECIMAL", re.I),))
    table = _table("id int(11) not null", "v varchar(20)", "d decimal(10,2)", "x int", "i integer")
    schemas = TableSchemas("mariadb", ValueModes(), settings)(table, "p.db.t")
    fields = _fields(schemas)
    assert fields["v"]["parameters"] == {
        "__debezium.source.column.type": "VARCHAR",
        "__debezium.source.column.length": "20",
        "__debezium.source.column.name": "v",
    }
    assert fields["d"]["parameters"]["__debezium.source.column.scale"] == "2"
    assert "parameters" not in fields["x"] and "parameters" not in schemas.key_schema["fields"][0]
    all_columns = SchemaSettings(True, (re.compile(".*"),))
    fields = _fields(TableSchemas("mariadb", ValueModes(), all_columns)(table, "p.db.t"))
    # the type as the statement spells it (a streamed CREATE TABLE), as Debezium's parser keeps it
    assert fields["i"]["parameters"]["__debezium.source.column.type"] == "INTEGER"


def test_built_once_per_definition() -> None:
    schemas = TableSchemas("mariadb", ValueModes(), ON)
    table = _table("id int not null", "a int")
    first = schemas(table, "p.db.t")
    assert schemas(table, "p.db.t") is first
    altered = ddl.apply("alter table t modify a bigint", "db", {("db", "t"): table})
    assert altered is not None and not isinstance(altered, ddl.Unknown)
    again = schemas(altered.tables[("db", "t")], "p.db.t")
    assert again is not first and _fields(again)["a"]["type"] == "int64"


def _default(definition: str, modes: ValueModes | None = None, *, streamed: bool = True):
    col = column("c", definition, "utf8mb4")
    if not streamed:  # as read from the server: no statement's spelling
        col = dataclasses.replace(col, source_type=None)
    return default_value(col, modes or ValueModes())


def test_defaults_as_debeziums_default_value_converter_gives_them() -> None:
    assert _default("bit(3) default b'101'") == "BQ=="  # the bits, little-endian
    assert _default("bit(1) not null default b'1'") is True
    assert _default("varbinary(4) default 'ab'", ValueModes(binary="hex")) == "6162"
    assert _default("varchar(10) default 'q''s'") == "q''s"  # Debezium's parser keeps it doubled
    assert _default("datetime default current_timestamp") == 0  # the epoch, even when nullable
    assert _default("date default '0000-00-00'") is None
    assert _default("date not null default '0000-00-00'") == 0
    assert _default("decimal(6,3) default 1.23456", ValueModes(decimal="string")) == "1.235"
    assert _default("time default '01:02:03'") == 3_723_000_000
    assert _default("int default (1 + 1)") is None  # an expression


def test_a_binary_default_differs_between_a_streamed_statement_and_the_snapshot() -> None:
    assert _default("binary(3) default 'a'") == "YQ=="
    assert _default("binary(3) default 'a'", streamed=False) == "YQAA"
    assert _default("varbinary(4) default x'0A0B'") is None
    assert _default("varbinary(4) default x'0A0B'", streamed=False) == "Cgs="


def test_set_and_drop_default_change_the_schemas_default() -> None:
    schemas = TableSchemas("mariadb", ValueModes(), ON)
    table = _table("id int not null", "b int default 5")
    changed = ddl.apply("alter table t alter column b set default 9", "db", {("db", "t"): table})
    assert changed is not None and not isinstance(changed, ddl.Unknown)
    table = changed.tables[("db", "t")]
    assert _fields(schemas(table, "p.db.t"))["b"]["default"] == 9
    dropped = ddl.apply("alter table t alter column b drop default", "db", {("db", "t"): table})
    assert dropped is not None and not isinstance(dropped, ddl.Unknown)
    assert "default" not in _fields(schemas(dropped.tables[("db", "t")], "p.db.t"))["b"]
