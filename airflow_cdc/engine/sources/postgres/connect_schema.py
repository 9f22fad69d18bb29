"""The Connect schemas of a PostgreSQL table's change events, as Debezium's connector builds them
(TableSchemaBuilder over PostgresValueConverter.schemaBuilder), checked by the oracle
(tests/compat/test_postgres_schemas_oracle.py).

A column's schema follows its type and the value modes exactly as its converter does
(``types.py``): both leave out the same columns. ``optional`` is the column's nullability, and
``default`` the value Debezium resolves for the column's default expression: a constant's value;
for a NOT NULL column whose default is an expression (``now()``, ``nextval(...)``) the type's
fallback (Debezium's converter turns its unresolved null into the fallback); no default for a
nullable column's expression. ``column.propagate.source.type`` and ``datatype.propagate.source.type``
add the ``__debezium.source.column.*`` parameters (PropagateSourceMetadataToSchemaParameter).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from airflow_cdc.engine import connect_schema as cs
from airflow_cdc.engine.connect_schema import SchemaSettings
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes, temporal_precision

#: Debezium's PostgreSQL source struct: the common head, then these (PostgresSourceInfoStructMaker).
SOURCE = cs.struct(
    "io.debezium.connector.postgresql.Source",
    [
        *cs.SOURCE_HEAD_FIELDS,
        cs.field("schema", cs.schema("string")),
        cs.field("table", cs.schema("string")),
        cs.field("txId", cs.schema("int64", optional=True)),
        cs.field("lsn", cs.schema("int64", optional=True)),
        cs.field("xmin", cs.schema("int64", optional=True)),
        cs.field("origin", cs.schema("string", optional=True)),
        cs.field("origin_lsn", cs.schema("int64", optional=True)),
    ],
    version=1,
)


@functools.cache
def message_schemas(binary_mode: str) -> cs.ConnectSchemas:
    """The logical decoding message topic's key and value (PostgresSchemaFactory); the
    content's schema is ``binary.handling.mode``'s."""
    content = cs.schema("bytes" if binary_mode == "bytes" else "string", optional=True)
    message = cs.struct(
        "io.debezium.connector.postgresql.Message",
        [cs.field("prefix", cs.schema("string", optional=True)), cs.field("content", content)],
        version=1,
    )
    return cs.ConnectSchemas.of(
        cs.struct(
            "io.debezium.connector.postgresql.MessageKey",
            [cs.field("prefix", cs.schema("string", optional=True))],
            version=1,
        ),
        cs.struct(
            "io.debezium.connector.postgresql.MessageValue",
            [
                cs.field("op", cs.schema("string")),
                cs.field("ts_ms", cs.schema("int64", optional=True)),
                cs.field("source", SOURCE),
                cs.field("transaction", cs.TRANSACTION_BLOCK),
                cs.field("message", message),
            ],
            version=1,
        ),
    )


@dataclass
class ColumnFacts:
    """What the catalog says about one column beyond its type: read once per table schema."""

    name: str
    type_oid: int
    type_modifier: int
    not_null: bool
    #: Debezium's default, in the column's JSON representation; ``has_default`` tells a null apart.
    default: Any = None
    has_default: bool = False
    #: The type name JDBC reports (``serial`` for an int with a sequence default, a domain's name).
    source_type: str = ""
    parameters: dict[str, str] = dataclass_field(default_factory=dict)


def table_schemas(
    topic: str, schema: str, table: str, columns: Sequence[ColumnFacts], key: Sequence[str], *,
    modes: ValueModes, lookup: Callable[[int], TypeInfo], enum_values: Callable[[int], list[str]],
    settings: SchemaSettings,
) -> cs.ConnectSchemas:  # fmt: skip
    """A table's key and value schemas; ``columns`` are those its events carry, in their order."""

    def field(column: ColumnFacts, mapped: bool) -> cs.Schema | None:
        built = column_schema(column.type_oid, column.type_modifier, modes, lookup, enum_values)
        if built is None:
            return None
        # The column mapper alters the schema first, then nullability and the default are set
        # (TableSchemaBuilder.addField); the key gets no mapper.
        if mapped and settings.propagates(schema, table, column.name, column.source_type):
            built["parameters"] = {**built.get("parameters", {}), **column.parameters}
        if not column.not_null:
            built["optional"] = True
        if column.has_default and column.default is not None:
            built["default"] = column.default
        return cs.field(column.name, _ordered(built))

    values = [f for f in (field(c, True) for c in columns) if f is not None]
    by_name = {c.name: c for c in columns}
    keys = [f for f in (field(by_name[n], False) for n in key if n in by_name) if f is not None]
    row = cs.struct(f"{topic}.Value", values, optional=True)
    key_schema = cs.struct(f"{topic}.Key", keys) if keys else None
    return cs.ConnectSchemas.of(key_schema, cs.envelope(topic, row, SOURCE))


_ORDER = ("type", "fields", "items", "keys", "values", "optional", "name", "version", "doc", "parameters", "default")


def _ordered(schema: cs.Schema) -> cs.Schema:
    """asJsonSchema's key order, ``field`` last."""
    out = {k: schema[k] for k in _ORDER if k in schema}
    out.update((k, v) for k, v in schema.items() if k not in out)
    return out


def column_schema(
    oid: int, typmod: int, modes: ValueModes, lookup: Callable[[int], TypeInfo], enum_values: Callable[[int], list[str]]
) -> cs.Schema | None:
    """A column's schema (not yet optional: the caller knows its nullability), or None for a
    column Debezium leaves out. Mirrors ``types.converter_for``."""
    info = lookup(oid)
    if info.kind == "d" and info.base_oid:  # a domain: its base type decides
        return column_schema(info.base_oid, typmod, modes, lookup, enum_values)
    if info.category == "A" and info.element_oid:
        return _array(lookup(info.element_oid), typmod, modes, enum_values)
    built = _scalar(info, typmod, modes, enum_values)
    if built is None and modes.include_unknown:
        built = _binary(modes)
    return built


def _binary(modes: ValueModes) -> cs.Schema:
    return cs.schema("bytes" if modes.binary == "bytes" else "string")


def _decimal(precision: int | None, scale: int) -> cs.Schema:
    parameters = {"scale": str(scale)}
    if precision is not None:
        parameters["connect.decimal.precision"] = str(precision)
    return cs.schema("bytes", name="org.apache.kafka.connect.data.Decimal", version=1, parameters=parameters)


_VARIABLE_SCALE_DECIMAL = cs.struct(
    "io.debezium.data.VariableScaleDecimal",
    [cs.field("scale", cs.schema("int32")), cs.field("value", cs.schema("bytes"))],
    version=1,
)
_VARIABLE_SCALE_DECIMAL["doc"] = "Variable scaled decimal"


def _numeric(typmod: int, modes: ValueModes) -> cs.Schema:
    if modes.decimal == "double":
        return cs.schema("double")
    if modes.decimal == "string":
        return cs.schema("string")
    if typmod < 0:
        return dict(_VARIABLE_SCALE_DECIMAL)
    return _decimal(((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF)


def _money(modes: ValueModes) -> cs.Schema:
    if modes.decimal in ("double", "string"):
        return cs.schema("double" if modes.decimal == "double" else "string")
    return _decimal(None, modes.money_fraction_digits)


def _named(type_: str, name: str, version: int = 1, **extra: Any) -> cs.Schema:
    return cs.schema(type_, name=name, version=version, **extra)


def _temporal(name: str, typmod: int, modes: ValueModes) -> cs.Schema:
    """Date, time and timestamp by ``time.precision.mode`` (adaptive: millis up to precision 3)."""
    if modes.time_precision == "connect":
        connect = {"date": ("int32", "Date"), "time": ("int32", "Time"), "timestamp": ("int64", "Timestamp")}[name]
        return _named(connect[0], f"org.apache.kafka.connect.data.{connect[1]}")
    if name == "date":
        return _named("int32", "io.debezium.time.Date")
    micro = temporal_precision(typmod) > 3 or (name == "time" and modes.time_precision == "adaptive_time_microseconds")
    if name == "time":
        return _named("int64", "io.debezium.time.MicroTime") if micro else _named("int32", "io.debezium.time.Time")
    return _named("int64", "io.debezium.time.MicroTimestamp" if micro else "io.debezium.time.Timestamp")


def _bits(typmod: int) -> cs.Schema:
    length = typmod if typmod > 0 else 2147483647  # varbit without a length: Integer.MAX_VALUE
    if length > 1:
        return _named("bytes", "io.debezium.data.Bits", parameters={"length": str(length)})
    return cs.schema("boolean")


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
_GEOMETRY = _named(
    "struct",
    "io.debezium.data.geometry.Geometry",
    2,
    doc="Geometry",
    fields=[
        cs.field("wkb", cs.schema("bytes")),
        cs.field("srid", cs.schema("int32", optional=True)),
        cs.field("extensions", cs.schema("map", optional=True, keys=cs.schema("string"), values=cs.schema("string"))),
    ],
)
_GEOMETRIC: dict[str, cs.Schema] = {
    "point": _POINT,
    "box": _GEOMETRY,
    "lseg": _GEOMETRY,
    "path": _GEOMETRY,
    "polygon": _GEOMETRY,
    "circle": _named(
        "struct",
        "io.debezium.data.geometry.Circle",
        doc="Geometry (CIRCLE)",
        fields=[cs.field("center", _POINT), cs.field("radius", cs.schema("double"))],
    ),
    "line": _named(
        "struct",
        "io.debezium.data.geometry.Line",
        doc="Geometry (LINE)",
        fields=[cs.field(axis, cs.schema("double")) for axis in ("a", "b", "c")],
    ),
}

_FIXED: dict[str, cs.Schema] = {
    "int2": cs.schema("int16"),
    "int4": cs.schema("int32"),
    "int8": cs.schema("int64"),
    "oid": cs.schema("int64"),
    "float4": cs.schema("float"),
    "float8": cs.schema("double"),
    "bool": cs.schema("boolean"),
    "timetz": _named("string", "io.debezium.time.ZonedTime"),
    "timestamptz": _named("string", "io.debezium.time.ZonedTimestamp"),
    "uuid": _named("string", "io.debezium.data.Uuid"),
    "json": _named("string", "io.debezium.data.Json"),
    "jsonb": _named("string", "io.debezium.data.Json"),
    "xml": _named("string", "io.debezium.data.Xml"),
    "ltree": _named("string", "io.debezium.data.Ltree"),
    "tsvector": _named("string", "io.debezium.data.Tsvector"),
    **dict.fromkeys(
        (
            "text",
            "varchar",
            "bpchar",
            "char",
            "name",
            "citext",
            "isbn",
            "inet",
            "cidr",
            "macaddr",
            "macaddr8",
            "int4range",
            "int8range",
            "numrange",
            "tsrange",
            "tstzrange",
            "daterange",
        ),
        cs.schema("string"),
    ),
    **_GEOMETRIC,
}

_BY_MODE: dict[str, Callable[[int, ValueModes], cs.Schema]] = {
    "numeric": _numeric,
    "money": lambda typmod, modes: _money(modes),
    "bytea": lambda typmod, modes: _binary(modes),
    "date": lambda typmod, modes: _temporal("date", typmod, modes),
    "time": lambda typmod, modes: _temporal("time", typmod, modes),
    "timestamp": lambda typmod, modes: _temporal("timestamp", typmod, modes),
    "interval": lambda typmod, modes: (
        _named("int64", "io.debezium.time.MicroDuration")
        if modes.interval == "numeric"
        else _named("string", "io.debezium.time.Interval")
    ),
    "bit": lambda typmod, modes: _bits(typmod),
    "varbit": lambda typmod, modes: _bits(typmod),
    "hstore": lambda typmod, modes: (
        _named("string", "io.debezium.data.Json")
        if modes.hstore == "json"
        else cs.schema("map", keys=cs.schema("string"), values=cs.schema("string", optional=True))
    ),
}


def _scalar(
    info: TypeInfo, typmod: int, modes: ValueModes, enum_values: Callable[[int], list[str]]
) -> cs.Schema | None:
    fixed = _FIXED.get(info.name)
    if fixed is not None:
        return dict(fixed)
    by_mode = _BY_MODE.get(info.name)
    if by_mode is not None:
        return by_mode(typmod, modes)
    if info.kind == "e":
        return _named("string", "io.debezium.data.Enum", parameters={"allowed": ",".join(enum_values(info.oid))})
    return None


#: Element types whose arrays Debezium has no schema for (PostgresValueConverter returns null).
_NO_ARRAY_SCHEMA = frozenset(("money", "name", "interval", "varbit", "xml", "point", "refcursor"))


def _array(
    element: TypeInfo, typmod: int, modes: ValueModes, enum_values: Callable[[int], list[str]]
) -> cs.Schema | None:
    if element.name in _NO_ARRAY_SCHEMA:
        return None
    if element.name == "bit":
        return _bits(typmod)  # Debezium gives bit[] the schema of a bit (its values are all null)
    if element.kind == "e":  # an enum's elements are not optional in Debezium's array schema
        return cs.schema("array", items=_scalar(element, typmod, modes, enum_values))
    items = None if element.kind == "d" else _scalar(element, typmod, modes, enum_values)
    if items is None:
        if not modes.include_unknown:
            return None
        # include.unknown.datatypes: the binary mode's schema, its elements not optional
        # (PostgresValueConverter: SchemaBuilder.array(binaryMode.getSchema())).
        return cs.schema("array", items=_binary(modes))
    return cs.schema("array", items=cs.optional(items))


def source_parameters(name: str, type_name: str, length: int | None, scale: int | None) -> dict[str, str]:
    """The ``__debezium.source.column.*`` parameters, in Debezium's order."""
    parameters = {"__debezium.source.column.type": type_name.upper()}
    if length is not None:
        parameters["__debezium.source.column.length"] = str(length)
    if scale is not None:
        parameters["__debezium.source.column.scale"] = str(scale)
    parameters["__debezium.source.column.name"] = name
    return parameters
