"""A MySQL/MariaDB column's default as Debezium's schema carries it (``connect_schema.py``):
BinlogDefaultValueConverter parses the DDL's literal into the column's Java value and converts it
with the column's value converter; here the literal becomes the value PyMySQL would return for
the column and ``types.snapshot_converter`` converts it. ``CURRENT_TIMESTAMP`` (and its synonyms)
is the epoch, as Debezium's parser reads it; an expression it cannot read gives no default.
The literal is COLUMN_DEFAULT's text: MariaDB quotes a literal, MySQL does not.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from airflow_cdc.engine.sources.mysql.types import MySqlColumn, ValueModes, snapshot_converter

_TEXTS = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"))

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TEXT = "1970-01-01 00:00:00"
#: Zero dates (EPOCH_EQUIVALENT_DATE / _TIMESTAMP).
_ZERO = re.compile(r"^(\d{4}-\d{2}-00|\d{4}-00-\d{2}|0000-\d{2}-\d{2})( 00:00:00(\.\d{1,6})?)?$")
_NOW = re.compile(r"^(current_timestamp|now|localtime|localtimestamp)\s*(\(\s*\d*\s*\))?$", re.I)
_TIME = re.compile(r"^(-)?(\d+):(\d\d)(?::(\d\d)(?:\.(\d+))?)?$")


def default_value(column: MySqlColumn, modes: ValueModes) -> Any:
    """The column's default as Debezium's schema carries it (its converter's JSON of the
    literal), or None: no default, NULL, or an expression Debezium cannot read."""
    raw = column.default
    if raw is None or raw.upper() == "NULL":
        return None
    quoted = len(raw) >= 2 and raw[0] == raw[-1] == "'"
    literal = raw[1:-1].replace("''", "'") if quoted else raw
    try:
        value = _python_value(column, literal, quoted)
    except (ValueError, InvalidOperation, ArithmeticError):
        return None
    if value is None:
        return None
    convert = snapshot_converter(column, modes)
    if convert is None:
        return None
    try:
        return convert(value)
    except (ValueError, TypeError, ArithmeticError):
        return None


_PARSERS: dict[str, Callable[[str], Any]] = {
    "float": float,
    "double": float,
    "real": float,
    "year": int,
}


def _python_value(column: MySqlColumn, literal: str, quoted: bool) -> Any:
    """``literal`` as PyMySQL would return the column's value (what snapshot_converter takes)."""
    kind = column.data_type
    if kind in ("date", "datetime", "timestamp"):
        return _temporal_value(column, literal.strip(), quoted)
    if kind in ("decimal", "numeric"):
        value = Decimal(literal.strip())  # BigDecimal.setScale(scale, HALF_UP)
        return value if column.scale is None else value.quantize(Decimal(1).scaleb(-column.scale), ROUND_HALF_UP)
    if kind in ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "boolean", "bool"):
        lowered = literal.strip().lower()
        return 1 if lowered == "true" else 0 if lowered == "false" else int(Decimal(lowered))
    parse = _PARSERS.get(kind)
    if parse is not None:
        return parse(literal.strip())
    if kind == "time":
        return _timedelta(literal.strip())
    if kind in _TEXTS or kind in ("enum", "set"):
        return literal  # MySQL writes a text literal unquoted, MariaDB quoted
    return None  # binary, bit, json, geometry: not converted here


def _temporal_value(column: MySqlColumn, text: str, quoted: bool) -> dt.date | None:
    """BinlogDefaultValueConverter's dates: a zero date (and, for a ``timestamp``, the epoch,
    which CURRENT_TIMESTAMP becomes) is no default in a nullable column, the epoch in a NOT NULL
    one; so is a literal that does not parse. A ``timestamp``'s literal is read in the JVM's
    zone (UTC on the oracle's worker)."""
    kind = column.data_type
    if not quoted and _NOW.match(text):
        text = _EPOCH_TEXT
    zero = text == "0" or _ZERO.match(text) is not None or (kind == "timestamp" and text == _EPOCH_TEXT)
    fallback = None if column.nullable else (_EPOCH.date() if kind == "date" else _EPOCH)
    if zero:
        return fallback
    try:
        if kind == "date":
            return dt.date.fromisoformat(text[:10])
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return fallback


def _timedelta(text: str) -> dt.timedelta | None:
    match = _TIME.match(text)
    if match is None:
        return None
    sign, hours, minutes, seconds, fraction = match.groups()
    delta = dt.timedelta(
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds or 0),
        microseconds=int((fraction or "0")[:6].ljust(6, "0")),
    )
    return -delta if sign else delta
