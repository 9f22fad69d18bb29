"""The snapshot's SELECT list: the server computes Debezium's value wherever the result is the
same as what the text converters in :mod:`types` make of the column's text, so the snapshot's
Python side mostly puts values into a dict.

Each column becomes one of:

* **loaded** - an expression whose result psycopg's C loaders turn into the final value:
  integers, ``bool``, floats and text as they are; ``numeric(p, s)`` with ``p <= 18`` in
  ``precise`` mode as the base64 of its unscaled two's-complement bytes and in ``double`` mode
  as ``float8``; ``date`` as days since the epoch; ``timestamptz`` as ISO-8601 with ``Z``;
  ``bytea`` encoded per ``binary.handling.mode``; types whose converter is ``str`` as their text.
* **rare** - loaded, except for values outside the range where the expression is known to
  agree (``timestamptz`` before year 1 or after 9999, infinite dates and timestamps): such a
  row sets the row's flag column, and those values are read again from an extra column of
  their text (NULL in every other row) and converted by the reference converter.
* **converted** - the column's text, converted in Python by the reference converter (arrays,
  intervals, money, variable-scale numeric, times, ...).

The server runs on the other core while the engine builds and serializes records, so work
moved there is nearly free; ``tests/integration/test_postgres_snapshot_fast.py`` checks that
the loaded values equal the reference converters' for every type and mode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from psycopg import sql

from airflow_cdc.engine.sources.postgres import temporal
from airflow_cdc.engine.sources.postgres.catalog import TableColumns
from airflow_cdc.engine.sources.postgres.changes import ColumnPlan, TableSchema
from airflow_cdc.engine.sources.postgres.numeric import SPECIAL_STRINGS
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes, numeric_scale, temporal_precision

log = logging.getLogger(__name__)

# Built-in type oids (fixed in every PostgreSQL): the fast paths match oids, not names, so a
# user type that happens to be called "int4" never takes one.
BOOL, BYTEA, INT8, INT2, INT4, TEXT, OID = 16, 17, 20, 21, 23, 25, 26
FLOAT4, FLOAT8, VARCHAR, DATE, TIMESTAMPTZ, NUMERIC = 700, 701, 1043, 1082, 1184, 1700
#: Result types psycopg loads (in C) into exactly what the text converters return.
LOADED_AS_IS = {
    INT2: "int2",
    INT4: "int4",
    INT8: "int8",
    OID: "oid",
    FLOAT4: "float4",
    FLOAT8: "float8",
    BOOL: "bool",
    TEXT: "text",
    VARCHAR: "varchar",
}
#: numeric(p, s) with p up to 18: the unscaled value fits an int8.
MAX_INT8_PRECISION = 18

_BASE64 = {
    "bytes": "translate(encode({c}, 'base64'), E'\\n', '')",
    "base64": "translate(encode({c}, 'base64'), E'\\n', '')",
    "base64-url-safe": "translate(encode({c}, 'base64'), E'+/\\n', '-_')",
    "hex": "encode({c}, 'hex')",
}
# Under DateStyle=ISO and TimeZone=UTC a timestamptz from year 1 to 9999 prints as
# 'YYYY-MM-DD HH:MM:SS[.ffffff]+00': types._timestamptz's common case for precision 0; other
# precisions pad the fraction to their digits ('YYYY-MM-DDTHH:MM:SS.' is 20 characters, and the
# value is already rounded to the precision, so cutting the microseconds is exact).
_TIMESTAMPTZ = "replace(replace({c}::text, ' ', 'T'), '+00', 'Z')"
_TIMESTAMPTZ_PADDED = "left(to_char({c}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US'), {width}) || 'Z'"
_TIMESTAMPTZ_RARE = "not ({c} >= '0001-01-01 00:00:00+00' and {c} < '10000-01-01 00:00:00+00')"
# PostgreSQL's day count is temporal.parse_date's (BC dates included); the infinities are what
# Debezium's snapshot emits for them (not what its streaming emits: see snapshot_date).
_DATE = (
    "case when {c} = 'infinity' then " + str(temporal.SNAPSHOT_POSITIVE_INFINITY_DAYS)
    + " when {c} = '-infinity' then " + str(temporal.SNAPSHOT_NEGATIVE_INFINITY_DAYS)
    + " else {c} - date '1970-01-01' end"
)  # fmt: skip
# NaN and the infinities load as floats that JSON cannot carry: read again as text.
_FLOAT_RARE = "{c} in ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"
_NUMERIC_FLOAT_RARE = "{c}::float8 in ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"
_NUMERIC_STRING = (
    "case {c}::text"
    + "".join(f" when '{text}' then '{name}'" for text, name in SPECIAL_STRINGS.items())
    + " else {c}::text end"
)


@dataclass
class SnapshotColumns:
    """The SELECT list of one table and how to turn its rows into Debezium's ``after``."""

    names: list[str]  # the row's first len(names) values are the columns, in order
    expressions: list[sql.Composable]
    converted: list[tuple[ColumnPlan, int]] = field(default_factory=list)  # (column, row index)
    rare: list[tuple[ColumnPlan, int]] = field(default_factory=list)  # (column, index of its text)
    flag_index: int | None = None
    text_oids: set[int] = field(default_factory=set)  # result types to load as plain text

    def query(self, table: TableColumns) -> sql.Composed:
        return sql.SQL("select {} from {}").format(
            sql.SQL(", ").join(self.expressions), sql.Identifier(table.schema, table.name)
        )

    def row_builder(self, schema: TableSchema) -> Callable[[tuple[Any, ...]], dict[str, Any]]:
        names, converted, rare, flag = self.names, self.converted, self.rare, self.flag_index
        if not converted and flag is None:
            return lambda row: dict(zip(names, row))  # noqa: B905 - the row has extra columns
        if not converted and flag is not None:
            return _rare_only_builder(schema, names, rare, flag)

        def build(row: tuple[Any, ...]) -> dict[str, Any]:
            after = dict(zip(names, row))  # noqa: B905
            for column, index in converted:
                text = row[index]
                if text is not None:
                    after[column.name] = convert_text(schema, column, text)
            if flag is not None and row[flag]:
                for column, index in rare:
                    text = row[index]
                    if text is not None:
                        after[column.name] = convert_text(schema, column, text)
            return after

        return build


def _rare_only_builder(
    schema: TableSchema, names: list[str], rare: list[tuple[ColumnPlan, int]], flag: int
) -> Callable[[tuple[Any, ...]], dict[str, Any]]:
    """The row builder when the only values to look at again are the rare ones (any table with
    a timestamptz or float column and nothing converted in Python): without the general
    builder's empty loop and checks, 0.1-0.2 us less per row."""

    def build_rare(row: tuple[Any, ...]) -> dict[str, Any]:
        after = dict(zip(names, row))  # noqa: B905 - the row has extra columns
        if row[flag]:
            for column, index in rare:
                text = row[index]
                if text is not None:
                    after[column.name] = convert_text(schema, column, text)
        return after

    return build_rare


def convert_text(schema: TableSchema, column: ColumnPlan, text: str) -> Any:
    """The reference conversion, with TableSchema's rule for odd values: emit the text."""
    try:
        return column.convert(text)
    except (ValueError, ArithmeticError) as exc:
        log.warning(
            "%s.%s.%s: cannot convert %s value %r (%s); emitting it as text",
            schema.schema,
            schema.name,
            column.name,
            column.type_name,
            text[:60],
            exc,
        )
        return text


def _base(oid: int, lookup: Callable[[int], TypeInfo]) -> TypeInfo:
    info = lookup(oid)
    while info.kind == "d" and info.base_oid:  # a domain: its base type decides (as converter_for)
        info = lookup(info.base_oid)
    return info


def _numeric_precision(type_modifier: int) -> int | None:
    return None if type_modifier < 4 else ((type_modifier - 4) >> 16) & 0xFFFF


def _unscaled_base64(column: sql.Identifier, scale: int) -> sql.Composable:
    """base64 of numeric(p<=18, s)'s unscaled value in the fewest two's-complement bytes, as
    types._fixed_scale_decimal writes it; NaN is NULL, as there."""
    steps = []
    for length in range(1, 8):
        # n bytes when -2^(8n-1) <= unscaled < 2^(8n-1), as Java's BigInteger.toByteArray() (so
        # -128 takes one byte, 128 two); bounds scaled back to the column.
        bound = sql.Literal(Decimal(2 ** (8 * length - 1)).scaleb(-scale))
        steps.append(
            sql.SQL("when {c} >= -{b} and {c} < {b} then {start}").format(
                c=column, b=bound, start=sql.Literal(9 - length)
            )
        )
    return sql.SQL(
        "case when {c} <> 'NaN' then encode(substring(int8send(({c} * {factor})::int8) "
        "from case {steps} else 1 end), 'base64') end"
    ).format(c=column, factor=sql.Literal(10**scale), steps=sql.SQL(" ").join(steps))


def _loaded(
    column: ColumnPlan, type_oid: int, type_modifier: int, modes: ValueModes, lookup: Callable[[int], TypeInfo]
) -> tuple[sql.Composable, str | None] | None:
    """(expression, rare predicate or None) for a column the server can convert, else None."""
    c = sql.Identifier(column.name)
    base = _base(type_oid, lookup)
    if base.category == "A":
        return None
    if base.oid in LOADED_AS_IS:
        rare = _FLOAT_RARE if base.oid in (FLOAT4, FLOAT8) else None
        return sql.SQL("{}::pg_catalog.{}").format(c, sql.SQL(LOADED_AS_IS[base.oid])), rare
    if base.oid == NUMERIC:
        return _loaded_numeric(c, type_modifier, modes)
    if base.oid == DATE:
        return sql.SQL(_DATE).format(c=c), None
    if base.oid == TIMESTAMPTZ:
        digits = temporal_precision(type_modifier)
        if not digits:
            return sql.SQL(_TIMESTAMPTZ).format(c=c), _TIMESTAMPTZ_RARE
        padded = sql.SQL(_TIMESTAMPTZ_PADDED).format(c=c, width=sql.Literal(20 + digits))
        return padded, _TIMESTAMPTZ_RARE
    if base.oid == BYTEA and modes.binary in _BASE64:
        return sql.SQL(_BASE64[modes.binary]).format(c=c), None
    return None


def _loaded_numeric(
    c: sql.Identifier, type_modifier: int, modes: ValueModes
) -> tuple[sql.Composable, str | None] | None:
    if modes.decimal == "double":
        return sql.SQL("{}::pg_catalog.float8").format(c), _NUMERIC_FLOAT_RARE
    if modes.decimal == "string":
        return sql.SQL(_NUMERIC_STRING).format(c=c), None
    scale, precision = numeric_scale(type_modifier), _numeric_precision(type_modifier)
    if scale is not None and precision is not None and 0 <= scale <= precision <= MAX_INT8_PRECISION:
        return _unscaled_base64(c, scale), None  # the unscaled value fits an int8
    return None  # variable scale, or too wide: converted in Python


def plan_columns(
    table: TableColumns,
    schema: TableSchema,
    modes: ValueModes | None,
    lookup: Callable[[int], TypeInfo] | None,
    *,
    temporal_text: bool = True,
) -> SnapshotColumns:
    """The SELECT list for ``schema``'s columns. Without ``modes`` and ``lookup`` every column is
    read as text and converted in Python (the reference path). ``temporal_text=False`` (the
    session's DateStyle/TimeZone are not ISO/UTC) keeps dates and timestamps on that path too."""
    plan = SnapshotColumns([c.name for c in schema.columns], [])
    rare: list[tuple[ColumnPlan, str]] = []
    for column in schema.columns:
        _, type_oid, type_modifier = table.columns[column.index]
        if column.convert is str:  # text-like, enums, uuid, json, inet, ...: the text is the value
            plan.expressions.append(sql.Identifier(column.name))
            plan.text_oids.update(_text_oids(type_oid, lookup))
            continue
        loaded = None
        if modes is not None and lookup is not None:
            loaded = _loaded(column, type_oid, type_modifier, modes, lookup)
            if loaded is not None and loaded[1] is not None and not temporal_text:
                loaded = None
        if loaded is None:  # the column's text, converted in Python
            plan.expressions.append(sql.Identifier(column.name))
            plan.converted.append((snapshot_date(column, type_oid), len(plan.expressions) - 1))
            plan.text_oids.update(_text_oids(type_oid, lookup))
            continue
        expression, rare_when = loaded
        plan.expressions.append(expression)
        if rare_when is not None:
            rare.append((column, rare_when))
    if rare:
        predicates = [sql.SQL(when).format(c=sql.Identifier(column.name)) for column, when in rare]
        plan.expressions.append(sql.SQL("({})").format(sql.SQL(" or ").join(predicates)))
        plan.flag_index = len(plan.expressions) - 1
        for (column, _), predicate in zip(rare, predicates, strict=True):
            # As text: a float column's own type must still load as a float.
            text = sql.SQL("case when {} then {}::text end").format(predicate, sql.Identifier(column.name))
            plan.expressions.append(text)
            plan.rare.append((column, len(plan.expressions) - 1))
    if modes is not None and plan.text_oids & (set(LOADED_AS_IS) - {TEXT, VARCHAR}):
        # A column read as text arrives as a type the loaded expressions return (a user type
        # named like a built-in one): one loader per type, so read everything as text.
        return plan_columns(table, schema, None, None)
    return plan


def snapshot_date(column: ColumnPlan, type_oid: int) -> ColumnPlan:
    """A date column as Debezium's snapshot reads it: pgjdbc turns 'infinity' and '-infinity'
    into java.sql.Date constants whose days differ from what its streaming emits."""
    if type_oid != DATE:
        return column
    stream = column.convert
    infinities = {
        "infinity": temporal.SNAPSHOT_POSITIVE_INFINITY_DAYS,
        "-infinity": temporal.SNAPSHOT_NEGATIVE_INFINITY_DAYS,
    }

    def convert(text: str) -> Any:
        return infinities[text] if text in infinities else stream(text)

    return replace(column, convert=convert)


def _text_oids(type_oid: int, lookup: Callable[[int], TypeInfo] | None) -> set[int]:
    """The result type oids a column of ``type_oid`` may arrive as (a domain arrives as its
    base type)."""
    oids = {type_oid}
    if lookup is not None:
        info = lookup(type_oid)
        while info.kind == "d" and info.base_oid:
            oids.add(info.base_oid)
            info = lookup(info.base_oid)
    return oids
