"""Latest-frame rows as a lake table's Spark rows: each value decoded (``values.py``, by
PostgreSQL's type names) and turned into the Python value of the lake column's Spark type.

How a value is decoded comes from the source column when the batch's records carry schemas
(``lake_schemas.decoded_as``: a ``string`` column may hold a time of day, a ``timestamp_ntz`` one
milliseconds or microseconds); without them, from the lake column's Spark type alone, as before
schemas reached the job.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Collection, Mapping
from decimal import Decimal
from typing import Any

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.table_schemas import SourceColumn
from airflow_cdc.spark.targets.lake_schemas import decoded_as
from airflow_cdc.spark.values import ColumnType, Modes, decoder_for, json_text


def _pg_type(spark_type: Any) -> tuple[str, int | None]:
    name = spark_type.typeName()
    if name == "decimal":
        return "numeric", spark_type.scale
    return {
        "integer": "int4",
        "long": "int8",
        "short": "int2",
        "byte": "int2",
        "double": "float8",
        "float": "float4",
        "boolean": "bool",
        "date": "date",
        "timestamp_ntz": "timestamp",
        "timestamp": "timestamptz",
        "binary": "bytea",
    }.get(name, "text"), None


def _pythonic(spark_type: Any) -> Callable[[Any], Any]:
    """The decoder's output (PostgreSQL's text form, or bytes) as the Spark type's Python value."""
    name = spark_type.typeName()
    if name in ("integer", "long", "short", "byte"):
        return int
    if name in ("double", "float"):
        return float
    if name == "decimal":
        return Decimal
    if name == "boolean":
        return lambda v: v if isinstance(v, bool) else str(v).lower() in ("t", "true", "1")
    if name == "date":
        return dt.date.fromisoformat
    if name == "timestamp_ntz":
        return lambda v: dt.datetime.fromisoformat(str(v).replace(" ", "T"))
    if name == "timestamp":
        return lambda v: dt.datetime.fromisoformat(str(v).replace(" ", "T").replace("Z", "+00:00"))
    if name == "string":
        return lambda v: v if isinstance(v, str) else str(v)  # a decimal kept as its text
    return lambda v: v


def value_decoder(
    table: str, name: str, spark_type: Any, source: SourceColumn | None, modes: Modes
) -> Callable[[Any], Any]:
    """One column's JSON text (or None) → the Python value of ``spark_type``."""
    if spark_type.typeName() == "array":
        element_type = spark_type.elementType
        items = source.items if source is not None else None
        element = value_decoder(table, name, element_type, items, modes)

        def array(text: Any) -> Any:
            if text is None:
                return None
            values = json.loads(text) if isinstance(text, str) else text
            return [element(json_text(v)) for v in values]

        return array
    if source is not None:
        type_name, scale, precision = decoded_as(source)
    else:
        (type_name, scale), precision = _pg_type(spark_type), None
    decode = decoder_for(ColumnType(table, name, type_name, scale=scale, precision=precision), modes)
    python = _pythonic(spark_type)

    def value(text: Any) -> Any:
        decoded = decode(text)
        return None if decoded is None else python(decoded)

    return value


def row_decoder(
    table: str,
    schema: Any,
    modes: Modes,
    sources: Mapping[str, SourceColumn] | None = None,
    keep_absent: Collection[str] = (),
) -> Callable[[Any], tuple[Any, ...]]:
    """A latest-frame row → a tuple in the target schema's order, then ``_op``, ``_unavailable``.

    ``keep_absent``: columns the source dropped that the target keeps (``lenient``): a change
    without them lists them as unavailable, so the target keeps the row's value, as for an
    unchanged TOASTed column."""
    sources = sources or {}
    columns = [f for f in schema.fields if f.name != POSITION_COLUMN]
    steps = [(f.name, value_decoder(table, f.name, f.dataType, sources.get(f.name), modes)) for f in columns]
    kept = [name for name, _ in steps if name in keep_absent]

    def convert(row: Any) -> tuple[Any, ...]:
        after = row.after or {}
        unavailable = list(row.unavailable or ())
        if row.op == "d":
            after = {k: json_text(v) for k, v in json.loads(row.key).items()}
        elif kept:
            unavailable += [name for name in kept if name not in after]
        values = [decode(after.get(name)) for name, decode in steps]
        return (*values, row.position, row.op, unavailable)

    return convert


def default_value(table: str, column: SourceColumn, spark_type: Any, modes: Modes) -> Any:
    """The Python value of a source column's default (Connect's JSON form) in ``spark_type``."""
    if not column.has_default or column.default is None:
        return None
    return value_decoder(table, column.name, spark_type, column, modes)(json_text(column.default))
