"""The snapshot's SELECT list: the server computes Debezium's value wherever the result is the
one the snapshot converters in ``types.py`` make of PyMySQL's value, so the snapshot's Python
side mostly puts values into a dict (the pattern of the PostgreSQL snapshot's
``snapshot_columns.py``; issue 30).

Each column Debezium emits becomes one of:

* **as is** - the value a plain ``SELECT col`` returns is already Debezium's: integers (not
  ``bigint unsigned``), ``double``, ``year``, and every type read as text (the connection's
  character set is utf8mb4, so the server converts all text to it and it arrives as ``str``);
* **computed** - an expression whose result is the converter's: ``decimal(p <= 18, s)`` in
  ``precise`` mode as the base64 of its unscaled two's-complement bytes; ``date`` as days since
  the epoch; ``datetime`` as epoch micro- or milliseconds; ``timestamp`` as its ISO-8601 text.
  The temporal ones only for a valid date from the year 1000 (MySQL's supported range; a zero or
  invalid date, or an older one, has no such guarantee): any other value is read again, as it
  is, from an extra column (NULL in every ordinary row) and converted by the reference converter;
* **converted** - the column as it is, converted in Python by the reference converter.

``tests/integration/test_mysql_snapshot_columns.py`` checks the rows against the reference
conversion (``RowPlan.row`` over a plain SELECT) for every table of the value oracle and every mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.sources.mysql.changes import RowPlan, ValueConversionError
from airflow_cdc.engine.sources.mysql.types import Converter, MySqlColumn

_INTEGERS = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint"))
_AS_TEXT = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json", "uuid"))
#: decimal(p, s) with p up to 18: the unscaled value fits a signed bigint.
MAX_BIGINT_PRECISION = 18
#: A date the server's day arithmetic and Python's agree on: a real calendar day from year 1000.
_VALID_DATE = "({c} >= '1000-01-01' AND DAYOFMONTH({c}) BETWEEN 1 AND DAYOFMONTH(LAST_DAY({c})))"
_EPOCH_MICROS = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {c})"
# temporal.iso_offset_timestamp: the fraction without its trailing zeros, none when zero; the
# session's time zone is UTC, as for the plain SELECT.
_ISO_TIMESTAMP = (
    "CONCAT(DATE_FORMAT({c}, '%Y-%m-%dT%H:%i:%s'), IF(MICROSECOND({c}) = 0, '', "
    "TRIM(TRAILING '0' FROM CONCAT('.', LPAD(MICROSECOND({c}), 6, '0')))), 'Z')"
)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class SnapshotRowPlan(RowPlan):
    """A RowPlan whose rows are the SELECT list's (:func:`snapshot_plan`): ``row`` puts the
    server's values into the dict and converts only what the server did not."""

    select: tuple[str, ...] = ()
    names: tuple[str, ...] = ()  # the first len(names) values of a row, in the table's order
    converted: tuple[tuple[str, int, Converter], ...] = ()  # (column, row index, converter)

    def row(self, values: Sequence[Any]) -> dict[str, Any]:
        after = dict(zip(self.names, values))  # noqa: B905 - the row has the extra columns too
        for name, index, convert in self.converted:
            value = values[index]
            if value is not None:
                try:
                    after[name] = convert(value)
                except (ValueError, TypeError, ArithmeticError) as exc:
                    raise ValueConversionError(name, value, exc) from exc
        return after


def snapshot_plan(plan: RowPlan) -> SnapshotRowPlan:
    """``plan``'s columns as a SELECT list the server computes what it can of (module doc)."""
    names: list[str] = []
    select: list[str] = []
    converted: list[tuple[str, int, Converter]] = []
    rare: list[tuple[str, str, Converter]] = []  # (column, expression of the raw value, converter)
    for index, name, convert in plan.columns:
        column = plan.table.columns[index]
        c = quote(column.name)
        names.append(name)
        if _as_is(column, plan):
            select.append(c)
            continue
        computed = _computed(column, plan)
        if computed is None:
            converted.append((name, len(select), convert))
            select.append(c)
            continue
        expression, valid = computed
        if valid is None:
            select.append(expression)
        else:
            select.append(f"IF({valid}, {expression}, NULL)")
            rare.append((name, f"IF({valid}, NULL, {c})", convert))
    for name, expression, convert in rare:
        converted.append((name, len(select), convert))
        select.append(expression)
    return SnapshotRowPlan(
        plan.table,
        plan.topic,
        plan.columns,
        plan.key,
        plan.modes,
        plan.schemas,
        select=tuple(select),
        names=tuple(names),
        converted=tuple(converted),
    )


def _as_is(column: MySqlColumn, plan: RowPlan) -> bool:
    kind = column.data_type
    if kind in _INTEGERS:
        return not (kind == "bigint" and column.unsigned)  # int(value) of an int
    return kind in _AS_TEXT or kind in ("double", "real", "year")  # str, float, int: as converted


def _computed(column: MySqlColumn, plan: RowPlan) -> tuple[str, str | None] | None:
    """(expression, the SQL condition under which it is exact, or None: always), or None."""
    c, kind, connect = quote(column.name), column.data_type, plan.modes.time_precision == "connect"
    if kind in ("decimal", "numeric") and plan.modes.decimal == "precise":
        if (column.precision or 0) > MAX_BIGINT_PRECISION:
            return None
        return _unscaled_base64(c, column.scale or 0), None
    if kind == "date":
        return f"DATEDIFF({c}, '1970-01-01')", _VALID_DATE.format(c=c)
    if kind == "datetime":
        micros = _EPOCH_MICROS.format(c=c)
        if connect or (column.fsp or 0) <= 3:  # temporal.epoch_millis: floor
            return f"CAST(FLOOR({micros} / 1000) AS SIGNED)", _VALID_DATE.format(c=c)
        return micros, _VALID_DATE.format(c=c)
    if kind == "timestamp":  # a TIMESTAMP holds no invalid date; zero is the only odd value
        return _ISO_TIMESTAMP.format(c=c), f"YEAR({c}) > 0"
    return None


def _unscaled_base64(c: str, scale: int) -> str:
    """types.unscaled_base64 of decimal(p <= 18, s): the fewest big-endian two's-complement
    bytes with room for the sign (Java's ``BigInteger.toByteArray()``), base64 without line
    breaks (at most 8 bytes: 12 characters, below TO_BASE64's 76-character lines). HEX of a
    negative bigint is its 16 two's-complement digits; the last 2n of them are its n bytes."""
    unscaled = f"CAST({c} AS SIGNED)" if not scale else f"CAST({c} * {10**scale} AS SIGNED)"
    steps = " ".join(
        f"WHEN {unscaled} BETWEEN {-(2 ** (8 * n - 1))} AND {2 ** (8 * n - 1) - 1} THEN {2 * n}" for n in range(1, 8)
    )
    return f"TO_BASE64(UNHEX(RIGHT(LPAD(HEX({unscaled}), 16, '0'), CASE {steps} ELSE 16 END)))"
