"""The Connect schemas of a MySQL/MariaDB table's change events, as Debezium's binlog connectors
build them (TableSchemaBuilder over BinlogValueConverters.schemaBuilder), checked by the oracle
(tests/compat/test_mariadb_schemas_oracle.py, ADR 0024).

Debezium builds a table's schema from its own model of the table, the DDL it parsed (the
snapshot's ``SHOW CREATE TABLE``, then each streamed statement); ours is the schema history's
(``schema.py``), which follows the same statements. A column's schema follows its type and the
value modes exactly as its converter does (``types.binlog_converter``): both leave out the same
columns. ``optional`` is the column's nullability; ``doc`` its comment; ``default`` its default
as the column's converter gives it (BinlogDefaultValueConverter converts the DDL's literal with
the column's value converter; ``CURRENT_TIMESTAMP`` is the epoch). ``column.propagate.source.type``
and ``datatype.propagate.source.type`` (``database.table.column`` / ``database.table.TYPE``) add
the ``__debezium.source.column.*`` parameters with the type as the DDL spells it (upper case,
``INT UNSIGNED``), its first argument as length and second as scale.
"""

from __future__ import annotations

import functools
from typing import Any

from airflow_cdc.engine import connect_schema as cs
from airflow_cdc.engine.connect_schema import SchemaSettings
from airflow_cdc.engine.sources.mysql.column_defaults import default_value
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.ddl.debezium_columns import column as debezium_column
from airflow_cdc.engine.sources.mysql.structured import GEOMETRY_TYPES, bit_length
from airflow_cdc.engine.sources.mysql.types import MySqlColumn, ValueModes, enum_options

__all__ = ["TableSchemas", "column_schema", "schema_change_schemas", "source_schema", "table_schemas"]


@functools.cache
def source_schema(connector: str) -> cs.Schema:
    """Debezium's MySQL/MariaDB source struct: the common head, then these
    (BinlogSourceInfoStructMaker); named by the connector (``mysql``, ``mariadb``)."""
    return cs.struct(
        f"io.debezium.connector.{connector}.Source",
        [
            *cs.SOURCE_HEAD_FIELDS,
            cs.field("table", cs.schema("string", optional=True)),
            cs.field("server_id", cs.schema("int64")),
            cs.field("gtid", cs.schema("string", optional=True)),
            cs.field("file", cs.schema("string")),
            cs.field("pos", cs.schema("int64")),
            cs.field("row", cs.schema("int32")),
            cs.field("thread", cs.schema("int64", optional=True)),
            cs.field("query", cs.schema("string", optional=True)),
        ],
        version=1,
    )


def _strings(optional: bool = True) -> cs.Schema:
    return cs.schema("array", optional=optional, items=cs.schema("string"))


_OPTIONAL = {
    "string": cs.schema("string", optional=True),
    "int32": cs.schema("int32", optional=True),
    "boolean": cs.schema("boolean", optional=True),
}
#: ConnectTableChangeSerializer's structs (SchemaFactory.schemaHistoryColumnSchema, ...TableSchema,
#: ...ChangeSchema): the ``tableChanges`` of a schema change event.
_COLUMN = cs.struct(
    "io.debezium.connector.schema.Column",
    [
        cs.field("name", cs.schema("string")),
        cs.field("jdbcType", cs.schema("int32")),
        cs.field("nativeType", _OPTIONAL["int32"]),
        cs.field("typeName", cs.schema("string")),
        cs.field("typeExpression", _OPTIONAL["string"]),
        cs.field("charsetName", _OPTIONAL["string"]),
        cs.field("length", _OPTIONAL["int32"]),
        cs.field("scale", _OPTIONAL["int32"]),
        cs.field("position", cs.schema("int32")),
        cs.field("optional", _OPTIONAL["boolean"]),
        cs.field("autoIncremented", _OPTIONAL["boolean"]),
        cs.field("generated", _OPTIONAL["boolean"]),
        cs.field("comment", _OPTIONAL["string"]),
        cs.field("defaultValueExpression", _OPTIONAL["string"]),
        cs.field("enumValues", _strings()),
    ],
    version=1,
)
_TABLE = cs.struct(
    "io.debezium.connector.schema.Table",
    [
        cs.field("defaultCharsetName", _OPTIONAL["string"]),
        cs.field("primaryKeyColumnNames", _strings()),
        cs.field("columns", cs.schema("array", items=_COLUMN)),
        cs.field("comment", _OPTIONAL["string"]),
    ],
    optional=True,
    version=1,
)
_TABLE_CHANGE = cs.struct(
    "io.debezium.connector.schema.Change",
    [cs.field("type", cs.schema("string")), cs.field("id", cs.schema("string")), cs.field("table", _TABLE)],
    version=1,
)


@functools.cache
def schema_change_schemas(connector: str) -> cs.ConnectSchemas:
    """The schema change topic's key and value (SchemaFactory.schemaHistoryConnectorKeySchema
    and ...ValueSchema): ``io.debezium.connector.<connector>.SchemaChangeKey`` / ``...Value``."""
    prefix = f"io.debezium.connector.{connector}"
    return cs.ConnectSchemas.of(
        cs.struct(f"{prefix}.SchemaChangeKey", [cs.field("databaseName", cs.schema("string"))], version=1),
        cs.struct(
            f"{prefix}.SchemaChangeValue",
            [
                cs.field("source", source_schema(connector)),
                cs.field("ts_ms", cs.schema("int64")),
                cs.field("databaseName", _OPTIONAL["string"]),
                cs.field("schemaName", _OPTIONAL["string"]),
                cs.field("ddl", _OPTIONAL["string"]),
                cs.field("tableChanges", cs.schema("array", items=_TABLE_CHANGE)),
            ],
            version=1,
        ),
    )


def table_schemas(connector: str, modes: ValueModes, settings: SchemaSettings) -> TableSchemas | None:
    """The builder of the tables' schemas, or None when no converter writes schemas (the rows'
    path is then the one without schemas, at no cost)."""
    return TableSchemas(connector, modes, settings) if settings.enabled else None


class TableSchemas:
    """A table's ConnectSchemas, built once per table definition (the schema history makes a new
    ``Table`` object for each DDL that changes it) and topic: every row of that definition
    shares them."""

    def __init__(self, connector: str, modes: ValueModes, settings: SchemaSettings) -> None:
        self._source = source_schema(connector)
        self._modes, self._settings = modes, settings
        self._last: dict[str, tuple[Table, cs.ConnectSchemas]] = {}

    def __call__(self, table: Table, topic: str) -> cs.ConnectSchemas:
        cached = self._last.get(topic)
        if cached is not None and cached[0] is table:
            return cached[1]
        built = self.build(table, topic)
        if len(self._last) > 4096:  # tables come and go over months of streaming
            self._last.clear()
        self._last[topic] = (table, built)
        return built

    def build(self, table: Table, topic: str) -> cs.ConnectSchemas:
        def field(column: MySqlColumn, mapped: bool) -> cs.Schema | None:
            built = column_schema(column, self._modes)
            if built is None:
                return None
            # The column mapper alters the schema first, then nullability, doc and default are
            # set (TableSchemaBuilder.addField); the key gets no mapper.
            if mapped:
                _propagate(built, table, column, self._settings)
            if column.nullable:
                built["optional"] = True
            if column.comment:
                built["doc"] = column.comment
            default = default_value(column, self._modes)
            if default is not None:
                built["default"] = default
            return cs.field(column.name, _ordered(built))

        values = [f for f in (field(c, True) for c in table.columns) if f is not None]
        by_name = {c.name: c for c in table.columns}
        keys = [f for f in (field(by_name[n], False) for n in table.key if n in by_name) if f is not None]
        row = cs.struct(f"{topic}.Value", values, optional=True)
        key_schema = cs.struct(f"{topic}.Key", keys) if keys else None
        return cs.ConnectSchemas.of(key_schema, cs.envelope(topic, row, self._source))


def _propagate(built: cs.Schema, table: Table, column: MySqlColumn, settings: SchemaSettings) -> None:
    if not (settings.by_column or settings.by_type):
        return
    source = debezium_column(column.name, _declared(column), None)
    type_name = column.source_type or source.type_name
    if not settings.propagates(table.database, table.name, column.name, type_name):
        return
    parameters = {"__debezium.source.column.type": type_name.upper()}
    if source.length is not None:
        parameters["__debezium.source.column.length"] = str(source.length)
    if source.scale is not None:
        parameters["__debezium.source.column.scale"] = str(source.scale)
    if column.comment:
        parameters["__debezium.source.column.comment"] = column.comment
    parameters["__debezium.source.column.name"] = column.name
    built["parameters"] = {**built.get("parameters", {}), **parameters}


def _declared(column: MySqlColumn) -> str:
    """The column's type as a DDL statement declares it (SHOW CREATE TABLE's spelling)."""
    if column.data_type == "boolean":
        return "bool"
    return column.column_type


_ORDER = ("type", "fields", "items", "keys", "values", "optional", "name", "version", "doc", "parameters", "default")


def _ordered(schema: cs.Schema) -> cs.Schema:
    """asJsonSchema's key order, ``field`` last."""
    out = {k: schema[k] for k in _ORDER if k in schema}
    out.update((k, v) for k, v in schema.items() if k not in out)
    return out


# --- per type --------------------------------------------------------------------------------


def _named(type_: str, name: str, version: int = 1, **extra: Any) -> cs.Schema:
    return cs.schema(type_, name=name, version=version, **extra)


_POINT = _named(
    "struct",
    "io.debezium.data.geometry.Point",
    doc="Geometry (POINT)",
    fields=[
        cs.field("x", cs.schema("double")),
        cs.field("y", cs.schema("double")),
        cs.field("wkb", cs.schema("bytes", optional=True)),
        cs.field("srid", cs.schema("int32", optional=True)),
    ],
)
#: MySQL's Geometry: MySqlGeometry's {wkb, srid}, without the extensions of PostgreSQL's.
_GEOMETRY = _named(
    "struct",
    "io.debezium.data.geometry.Geometry",
    doc="Geometry",
    fields=[cs.field("wkb", cs.schema("bytes")), cs.field("srid", cs.schema("int32", optional=True))],
)
_TEXTS = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"))
_BINARIES = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))
_FIXED: dict[str, cs.Schema] = {
    "boolean": cs.schema("boolean"),
    "bool": cs.schema("boolean"),
    "tinyint": cs.schema("int16"),
    "mediumint": cs.schema("int32"),
    "double": cs.schema("double"),
    "real": cs.schema("double"),
    "year": _named("int32", "io.debezium.time.Year"),
    "timestamp": _named("string", "io.debezium.time.ZonedTimestamp"),
    "json": _named("string", "io.debezium.data.Json"),
    "uuid": _named("string", "io.debezium.data.Uuid"),
    "point": _POINT,
    **dict.fromkeys(GEOMETRY_TYPES, _GEOMETRY),
    **dict.fromkeys(_TEXTS, cs.schema("string")),
}


def _decimal(precision: int, scale: int) -> cs.Schema:
    parameters = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return _named("bytes", "org.apache.kafka.connect.data.Decimal", parameters=parameters)


def _integer(column: MySqlColumn, modes: ValueModes) -> cs.Schema:
    signed = {"smallint": "int16", "int": "int32", "integer": "int32", "bigint": "int64"}
    unsigned = {"smallint": "int32", "int": "int64", "integer": "int64", "bigint": "int64"}
    if column.data_type == "bigint" and column.unsigned and modes.bigint_unsigned == "precise":
        return _decimal(20, 0)
    return cs.schema((unsigned if column.unsigned else signed)[column.data_type])


def _temporal(column: MySqlColumn, modes: ValueModes) -> cs.Schema:
    connect = modes.time_precision == "connect"
    kind = column.data_type
    if kind == "date":
        return _named("int32", "org.apache.kafka.connect.data.Date" if connect else "io.debezium.time.Date")
    if kind == "time":
        return (
            _named("int32", "org.apache.kafka.connect.data.Time")
            if connect
            else _named("int64", "io.debezium.time.MicroTime")
        )
    if connect:
        return _named("int64", "org.apache.kafka.connect.data.Timestamp")
    micro = (column.fsp or 0) > 3
    return _named("int64", "io.debezium.time.MicroTimestamp" if micro else "io.debezium.time.Timestamp")


def _by_kind(column: MySqlColumn, modes: ValueModes) -> cs.Schema | None:
    kind = column.data_type
    if kind in ("smallint", "int", "integer", "bigint"):
        return _integer(column, modes)
    if kind in ("decimal", "numeric"):
        if modes.decimal != "precise":
            return cs.schema("double" if modes.decimal == "double" else "string")
        return _decimal(column.precision or 10, column.scale or 0)
    if kind == "float":  # float(M,D) is a double (BinlogValueConverters: no scale, length <= 24)
        return cs.schema("float" if "," not in column.column_type else "double")
    if kind in ("date", "time", "datetime"):
        return _temporal(column, modes)
    if kind in _BINARIES:
        return cs.schema("bytes" if modes.binary == "bytes" else "string")
    if kind in ("enum", "set"):
        # EnumeratedValues.toCommaSeparatedString: a backslash and a comma in an option escaped
        allowed = ",".join(o.replace("\\", "\\\\").replace(",", "\\,") for o in enum_options(column.column_type))
        name = "io.debezium.data.Enum" if kind == "enum" else "io.debezium.data.EnumSet"
        return _named("string", name, parameters={"allowed": allowed})
    if kind == "bit":
        length = bit_length(column.column_type, column.precision)
        if length == 1:
            return cs.schema("boolean")
        return _named("bytes", "io.debezium.data.Bits", parameters={"length": str(length)})
    return None


def column_schema(column: MySqlColumn, modes: ValueModes) -> cs.Schema | None:
    """A column's schema (not yet optional: the caller knows its nullability), or None for a
    column Debezium leaves out (no converter: ``types.binlog_converter``)."""
    fixed = _FIXED.get(column.data_type)
    if fixed is not None:
        return dict(fixed)
    return _by_kind(column, modes)
