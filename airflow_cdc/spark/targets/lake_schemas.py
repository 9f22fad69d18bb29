"""A source column's Spark type on a lake target (Delta, Parquet, Iceberg), and whether a lake
column can take a source type as it is, after widening, or not at all - per format, because each
widens differently (the README's "Schema changes" table).

Types are Spark's DDL text (``StructField.dataType.simpleString()``: ``int``, ``bigint``,
``decimal(10,2)``, ``array<int>``). The mapping goes by Debezium's semantic type first, then
Connect's type, as ``sql/type_mapping.py`` does for the SQL targets:

- times of day (``Time``, ``MicroTime``, ``NanoTime``, ``ZonedTime``) are ``string`` in
  PostgreSQL's clock text (``13:45:00.250000``): Spark's ``time`` type is not one Delta, Iceberg
  and Parquet all write, and a ``long`` would leave the reader to guess the unit (milliseconds for
  ``Time``, microseconds for ``MicroTime``); the text sorts as the time does;
- a decimal wider than Spark's 38 digits is ``string`` (its exact text), as is a decimal without
  a fixed scale (``VariableScaleDecimal``);
- ``int8`` and ``int16`` are ``smallint`` (Iceberg stores it as ``int``), a map or struct JSON
  text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_cdc.spark.table_schemas import SourceColumn

_T = "io.debezium.time."
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
#: Spark's widest decimal.
MAX_PRECISION = 38

_SEMANTIC = {
    _T + "Date": "date",
    "org.apache.kafka.connect.data.Date": "date",
    _T + "Time": "string",
    "org.apache.kafka.connect.data.Time": "string",
    _T + "MicroTime": "string",
    _T + "NanoTime": "string",
    _T + "ZonedTime": "string",
    _T + "Timestamp": "timestamp_ntz",
    "org.apache.kafka.connect.data.Timestamp": "timestamp_ntz",
    _T + "MicroTimestamp": "timestamp_ntz",
    _T + "NanoTimestamp": "timestamp_ntz",
    _T + "ZonedTimestamp": "timestamp",
    _T + "Interval": "string",
    "io.debezium.data.VariableScaleDecimal": "string",
    "io.debezium.data.Json": "string",
    "io.debezium.data.Uuid": "string",
    "io.debezium.data.Xml": "string",
    "io.debezium.data.Enum": "string",
    "io.debezium.data.EnumSet": "string",
    "io.debezium.data.Bits": "binary",
}
_CONNECT = {
    "int8": "smallint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
    "map": "string",
    "struct": "string",
}


def spark_type(column: SourceColumn) -> str:
    """The Spark type (DDL text) a lake column for ``column`` is created with."""
    if column.type == "array" and column.items is not None:
        return f"array<{spark_type(column.items)}>"
    if column.semantic == _DECIMAL:
        precision, scale = column.precision, column.scale or 0
        if precision is None:
            precision = MAX_PRECISION  # Connect gives only the scale without the source's length
        if precision > MAX_PRECISION or scale > precision:
            return "string"
        return f"decimal({precision},{scale})"
    if column.semantic in _SEMANTIC:
        return _SEMANTIC[column.semantic]
    if column.semantic and column.semantic.startswith("io.debezium.data.geometry."):
        return "string"
    return _CONNECT.get(column.type, "string")


def decoded_as(column: SourceColumn) -> tuple[str, int | None, int | None]:
    """How the decoders (``values.py``, by PostgreSQL's type names) read ``column``'s values for
    a lake column: the type name, the numeric scale, the fractional-second digits. The lake
    column's own type does not say it: a ``string`` column may hold a time of day (Debezium's
    number of micro- or milliseconds, as clock text) or a JSON document (as it is)."""
    semantic = column.semantic or ""
    if semantic in (_T + "Time", "org.apache.kafka.connect.data.Time"):
        return "time", None, 3
    if semantic in (_T + "MicroTime", _T + "NanoTime"):
        return "time", None, 6
    if semantic in (_T + "Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return "timestamp", None, 3
    if semantic in (_T + "MicroTimestamp", _T + "NanoTimestamp"):
        return "timestamp", None, 6
    if semantic == _DECIMAL:
        return "numeric", column.scale or 0, None
    if semantic == "io.debezium.data.VariableScaleDecimal":
        return "numeric", None, None  # a {scale, value} struct: its number's text
    if semantic == _T + "ZonedTimestamp":
        return "timestamptz", None, None
    if semantic in (_T + "Date", "org.apache.kafka.connect.data.Date"):
        return "date", None, None
    if semantic == "io.debezium.data.Bits":
        return "bit", None, None
    return (
        {
            "int8": "int2",
            "int16": "int2",
            "int32": "int4",
            "int64": "int8",
            "float32": "float4",
            "float64": "float8",
            "boolean": "bool",
            "bytes": "bytea",
        }.get(column.type, "text"),
        None,
        None,
    )


# --- can a lake column take a source type? --------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """A Spark type's family and size: digits before and after the point for a decimal, bits for
    an integer or a float."""

    family: str
    size: tuple[int, ...] = ()


_INTEGERS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_FLOATS = {"float": 32, "double": 64}
_DECIMAL_TEXT = re.compile(r"decimal\((\d+),(\d+)\)")


def kind(spark: str) -> Kind:
    text = spark.strip().lower()
    if text in _INTEGERS:
        return Kind("integer", (_INTEGERS[text],))
    if text in _FLOATS:
        return Kind("float", (_FLOATS[text],))
    found = _DECIMAL_TEXT.fullmatch(text.replace(" ", ""))
    if found:
        precision, scale = int(found.group(1)), int(found.group(2))
        return Kind("decimal", (precision - scale, scale))
    return Kind(text)  # string, binary, boolean, date, timestamp, timestamp_ntz, array<...>


#: What each format widens in place: Delta's type widening (``delta.enableTypeWidening``: any
#: integer to a wider one, float to double, a decimal's precision and scale as long as its
#: integer digits do not shrink), Iceberg's schema evolution (int to long, float to double, a
#: decimal's precision with the same scale, its scale only by rewriting the table; Iceberg has no
#: 8- or 16-bit integer), Parquet's rewrite (anything a cast widens without loss).
FORMATS = ("delta", "iceberg", "parquet")


def takes(target: str, source: str) -> str:
    """Whether a lake column of Spark type ``target`` takes values of Spark type ``source``:
    ``"as is"``, ``"widen"`` (same family, the source's is larger) or ``"no"``."""
    have, want = kind(target), kind(source)
    if have.family == "decimal" and want.family == "integer":
        digits = {8: 3, 16: 5, 32: 10, 64: 19}[want.size[0]]
        return "as is" if have.size[0] >= digits else "no"
    if have.family != want.family:
        return "no"
    if all(w <= h for w, h in zip(want.size, have.size, strict=False)):
        return "as is"
    return "widen"


def widened(target: str, source: str) -> str:
    """The type to widen a ``target`` column to for ``source`` (a decimal keeps the larger of
    each side's digits before and after the point)."""
    have, want = kind(target), kind(source)
    if have.family == want.family == "decimal":
        before, after = max(have.size[0], want.size[0]), max(have.size[1], want.size[1])
        return f"decimal({before + after},{after})"
    return source


def can_widen(fmt: str, target: str, new: str) -> bool:
    """Whether ``fmt`` widens a ``target`` column to ``new`` (``widened`` chose ``new``), in place
    or (:func:`in_place` says which) by rewriting the table."""
    have, want = kind(target), kind(new)
    if have.family == "decimal" and want.size[0] + want.size[1] > MAX_PRECISION:
        return False
    if fmt == "parquet" or have.family in ("decimal", "float"):
        return True  # Iceberg changes a decimal's scale by a rewrite of its own table
    if have.family == "integer":
        return fmt == "delta" or (have.size[0] >= 32 and want.size[0] == 64)
    return False


def in_place(fmt: str, target: str, new: str) -> bool:
    """Whether ``fmt`` widens a ``target`` column to ``new`` by DDL alone (no data rewritten):
    Delta always, Iceberg unless a decimal's scale changes, Parquet never (its files are its schema)."""
    if fmt == "iceberg" and kind(target).family == "decimal":
        return kind(new).size[1] == kind(target).size[1]
    return fmt in ("delta", "iceberg")


def how_to_widen(fmt: str) -> str:
    return {
        "delta": "Delta widens integers, float to double and decimals whose integer digits do not shrink",
        "iceberg": (
            "Iceberg widens int to bigint, float to double and a decimal's precision; the job rewrites a table "
            "of its own catalog (iceberg:PATH) for a decimal's scale"
        ),
        "parquet": "",
    }[fmt]
