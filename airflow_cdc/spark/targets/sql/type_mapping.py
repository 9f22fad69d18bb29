"""A source column's type on a SQL target: one mapping per dialect (the README's table), modelled
on Debezium's JDBC sink (``dialect/postgres``, ``dialect/mysql``: by Debezium's semantic type
first, then Connect's type, the source's length and scale where ``column.propagate.source.type``
gave them), and the families that say whether a target column can take a source type as it is,
after widening, or not at all (``evolution.py``).

Temporal precision follows the encoding, not a guess: a ``Timestamp`` carries milliseconds, so
its column is ``timestamp(3)``; the decoders read a value by the target column's precision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_cdc.spark.table_schemas import SourceColumn

# Semantic types (Debezium's and Connect's logical types).
_T = "io.debezium.time."
_DECIMALS = ("org.apache.kafka.connect.data.Decimal",)
_VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_JSON = "io.debezium.data.Json"

_POSTGRES_SEMANTIC = {
    _T + "Date": "date",
    "org.apache.kafka.connect.data.Date": "date",
    _T + "Time": "time(3)",
    "org.apache.kafka.connect.data.Time": "time(3)",
    _T + "MicroTime": "time(6)",
    _T + "NanoTime": "time(6)",
    _T + "ZonedTime": "timetz",
    _T + "Timestamp": "timestamp(3)",
    "org.apache.kafka.connect.data.Timestamp": "timestamp(3)",
    _T + "MicroTimestamp": "timestamp(6)",
    _T + "NanoTimestamp": "timestamp(6)",
    _T + "ZonedTimestamp": "timestamptz",
    _T + "MicroDuration": "interval",
    _T + "Interval": "interval",
    _T + "Year": "integer",
    _VARIABLE_DECIMAL: "numeric",
    _JSON: "jsonb",
    "io.debezium.data.Uuid": "uuid",
    "io.debezium.data.Xml": "xml",
    "io.debezium.data.Enum": "text",
    "io.debezium.data.EnumSet": "text",
    "io.debezium.data.Ltree": "text",
    "io.debezium.data.geometry.Point": "point",
}
_POSTGRES_CONNECT = {
    "int8": "smallint",
    "int16": "smallint",
    "int32": "integer",
    "int64": "bigint",
    "float32": "real",
    "float64": "double precision",
    "boolean": "boolean",
    "string": "text",
    "bytes": "bytea",
    "map": "jsonb",
    "struct": "jsonb",
}
#: PostgreSQL source types a PostgreSQL target takes by their own name (with propagated source types).
_POSTGRES_OWN = {"JSON": "json", "INET": "inet", "CIDR": "cidr", "MACADDR": "macaddr", "MONEY": "money"}

_MYSQL_SEMANTIC = {
    _T + "Date": "date",
    "org.apache.kafka.connect.data.Date": "date",
    _T + "Time": "time(3)",
    "org.apache.kafka.connect.data.Time": "time(3)",
    _T + "MicroTime": "time(6)",
    _T + "NanoTime": "time(6)",
    _T + "ZonedTime": "varchar(32)",
    _T + "Timestamp": "datetime(3)",
    "org.apache.kafka.connect.data.Timestamp": "datetime(3)",
    _T + "MicroTimestamp": "datetime(6)",
    _T + "NanoTimestamp": "datetime(6)",
    _T + "ZonedTimestamp": "datetime(6)",
    _T + "MicroDuration": "bigint",
    _T + "Interval": "varchar(64)",
    _T + "Year": "int",
    _VARIABLE_DECIMAL: "decimal(65,30)",
    _JSON: "json",
    "io.debezium.data.Uuid": "char(36)",
    "io.debezium.data.Xml": "longtext",
    "io.debezium.data.Enum": "varchar(255)",
    "io.debezium.data.EnumSet": "varchar(255)",
}
_MYSQL_CONNECT = {
    "int8": "smallint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "longtext",
    "bytes": "longblob",
    "array": "json",
    "map": "json",
    "struct": "json",
}
#: MySQL cannot index a TEXT or BLOB whole: a key column of those types gets a bounded one.
_MYSQL_KEY_BOUNDED = {"longtext": "varchar(255)", "longblob": "varbinary(255)"}


def postgres_type(column: SourceColumn) -> str:
    """The PostgreSQL type a target column for ``column`` is created with."""
    if column.type == "array" and column.items is not None:
        element = postgres_type(column.items)
        return "jsonb" if element in ("jsonb", "json") else f"{element}[]"
    sized = _sized(column, "postgresql")
    if sized:
        return sized
    if column.source_type in _POSTGRES_OWN:
        return _POSTGRES_OWN[column.source_type]
    if column.semantic in _DECIMALS:
        return _numeric(column, "numeric")
    if column.semantic in _POSTGRES_SEMANTIC:
        return _POSTGRES_SEMANTIC[column.semantic]
    if column.semantic and column.semantic.startswith("io.debezium.data.geometry."):
        return "jsonb"  # a {wkb, srid} struct, kept whole
    if column.semantic == "io.debezium.data.Bits":
        return "bit varying"
    return _POSTGRES_CONNECT.get(column.type, "text")


def mysql_type(column: SourceColumn, key: bool = False) -> str:
    """The MySQL/MariaDB type a target column for ``column`` is created with."""
    sized = _sized(column, "mysql")
    if sized:
        found = sized
    elif column.semantic in _DECIMALS:
        found = _numeric(column, "decimal", cap=65)
    elif column.semantic in _MYSQL_SEMANTIC:
        found = _MYSQL_SEMANTIC[column.semantic]
    elif column.semantic == "io.debezium.data.Bits":
        found = f"bit({min(column.length or 64, 64)})" if column.length else "varbinary(255)"
    elif column.semantic and column.semantic.startswith("io.debezium.data.geometry."):
        found = "json"
    else:
        found = _MYSQL_CONNECT.get(column.type, "longtext")
    return _MYSQL_KEY_BOUNDED.get(found, found) if key else found


def _numeric(column: SourceColumn, name: str, cap: int = 1000) -> str:
    precision, scale = column.precision, column.scale
    if precision and 0 < precision <= cap:
        return f"{name}({precision},{scale or 0})"
    return name if name == "numeric" else f"{name}(65,{min(scale or 30, 30)})"


#: Source types whose length says the target's: character types and PostgreSQL's temporal
#: precision (``__debezium.source.column.scale`` there is the fractional digits).
_CHARACTER = {
    "VARCHAR": "varchar",
    "CHARACTER VARYING": "varchar",
    "BPCHAR": "char",
    "CHAR": "char",
    "CHARACTER": "char",
}


def _sized(column: SourceColumn, dialect: str) -> str | None:
    source, length = column.source_type, column.length
    if column.type != "string" or source not in _CHARACTER or not length:
        return None
    if length > (10_485_760 if dialect == "postgresql" else 16_383):
        return None  # unbounded (PostgreSQL's varchar without a length reports 2147483647)
    return f"{_CHARACTER[source]}({length})"


# --- families: can a target column take a source type? ----------------------------------------


@dataclass(frozen=True)
class Kind:
    """A SQL type's family and size within it: a target of family F and size s takes a type of
    family F and size <= s as it is; a larger size of the same family by widening."""

    family: str
    size: tuple[float, ...] = ()


_INFINITE = float("inf")
_INTEGER_SIZES = {
    "tinyint": 8,
    "int1": 8,
    "smallint": 16,
    "int2": 16,
    "mediumint": 24,
    "int": 32,
    "integer": 32,
    "int4": 32,
    "serial": 32,
    "bigint": 64,
    "int8": 64,
    "bigserial": 64,
    "year": 32,
}
_TEXT = ("text", "longtext", "mediumtext", "tinytext", "character varying", "varchar", "char", "bpchar", "character")
_SAME = {
    "float": ("float", 32),
    "real": ("float", 32),
    "float4": ("float", 32),
    "double": ("float", 64),
    "double precision": ("float", 64),
    "float8": ("float", 64),
    "timestamptz": ("timestamp", 0),
    "timestamp with time zone": ("timestamp", 0),
    "timestamp": ("timestamp", 0),
    "timestamp without time zone": ("timestamp", 0),
    "datetime": ("timestamp", 0),
    "json": ("json", 0),
    "jsonb": ("json", 0),
    "bytea": ("binary", _INFINITE),
    "longblob": ("binary", _INFINITE),
    "blob": ("binary", 65_535),
    "varbinary": ("binary", 0),
    "binary": ("binary", 0),
}
_SIZE = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")


def kind(sql_type: str) -> Kind:
    """The family and size of a SQL type as written (``varchar(20)``, ``numeric(10,2)``, ``int4``)."""
    text = sql_type.strip().lower()
    if text.endswith("[]"):
        return Kind("array:" + kind(text[:-2]).family)
    base = _SIZE.sub("", text).replace(" unsigned", "").replace(" zerofill", "").strip()
    base = base.replace(" without time zone", "").replace(" with time zone", "tz")
    size = _SIZE.search(text)
    first = float(size.group(1)) if size else None
    second = float(size.group(2)) if size and size.group(2) else 0.0
    if base in ("boolean", "bool"):
        return Kind("boolean")
    if base in _INTEGER_SIZES:
        return Kind("integer", (_INTEGER_SIZES[base],))
    if base in ("numeric", "decimal", "fixed"):
        if first is None:
            return Kind("numeric", (_INFINITE, _INFINITE))
        return Kind("numeric", (first - second, second))  # digits before the point, after it
    if base in _TEXT:
        bounded = base not in ("text", "longtext", "mediumtext", "tinytext") and first is not None
        return Kind("text", (first if bounded else _INFINITE,))  # type: ignore[arg-type]
    if base in ("time", "timetz"):
        return Kind("time")
    if base in _SAME:
        family, width = _SAME[base]
        if family == "binary" and first is not None:
            width = first
        return Kind(family, (float(width),))
    return Kind(base)


#: Families a text column does not take as it is: their values would change meaning or sort
#: order as text (the source's ``text -> integer`` is a change a target cannot follow).
_NOT_TEXT = frozenset(("integer", "numeric", "float", "boolean", "timestamp", "date", "time", "binary"))


def takes(target: str, source: str) -> str:
    """Whether a target column of type ``target`` takes values of the mapped source type
    ``source``: ``"as is"``, ``"widen"`` (same family, the source's is larger) or ``"no"``."""
    have, want = kind(target), kind(source)
    if have.family == "numeric" and want.family == "integer":
        return "as is"  # a value out of the numeric's range is the target's error, naming it
    if have.family == "integer" and want.family == "boolean":
        return "as is"  # MySQL's boolean is tinyint(1)
    stringy = want.family not in _NOT_TEXT and not want.family.startswith("array:") and want.family != "text"
    if have.family == "text" and stringy:
        return "as is"  # json, uuid, xml, enum, inet ... kept as their text
    if have.family != want.family:
        return "no"
    if all(w <= h for w, h in zip(want.size, have.size, strict=False)):
        return "as is"
    return "widen"


def widened(target: str, source: str) -> str:
    """The type to widen a ``target`` column to for ``source``: a numeric keeps the larger of
    each side's digits before and after the point."""
    have, want = kind(target), kind(source)
    if have.family == want.family == "numeric" and _INFINITE not in have.size + want.size:
        before = int(max(have.size[0], want.size[0]))
        after = int(max(have.size[1], want.size[1]))
        name = "numeric" if target.lower().startswith("numeric") else "decimal"
        return f"{name}({before + after},{after})"
    return source
