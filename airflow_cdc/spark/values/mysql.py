"""MySQL/MariaDB targets: Debezium's values -> ``int``, ``Decimal``, ``float``, ``bytes`` and
``str`` (temporal values as their text, in UTC: the connection's time zone should be UTC).

MySQL stores no NaN, no infinity and no year outside 0001..9999: such values are refused (a
:class:`~airflow_cdc.spark.values.DecodeError`), not clamped."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

from airflow_cdc.engine.sources.postgres.temporal import US_PER_DAY
from airflow_cdc.spark.values.columns import Built, ColumnType, Convert, Modes, pass_through
from airflow_cdc.spark.values.semantic_types import (
    BINARY,
    EPOCH_ORDINAL,
    FIRST_ISO_DAY,
    LAST_ISO_DAY,
    bits_value,
    clock,
    precise,
    uses_micros,
)

# ---------------------------------------------------------------------------------------------
# Numbers

_BOOL_INT = {"true": 1, "false": 0}


def _int(text: str) -> int:
    value = _BOOL_INT.get(text)
    return int(text) if value is None else value


def _bit(text: str) -> int:
    value = _BOOL_INT.get(text)
    return bits_value(text) if value is None else value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("MySQL cannot store NaN or an infinity")
    return value


def _finite_decimal(text: str) -> Decimal:
    value = Decimal(text)
    if not value.is_finite():
        raise ValueError("MySQL cannot store NaN or an infinity")
    return value


def _decimal(modes: Modes, scale: int | None) -> Convert:
    if modes.decimal == "precise":
        precise_text = precise(scale)
        return lambda text: _finite_decimal(precise_text(text))
    return _finite_decimal  # double and string: the number's text (specials: 'NaN', 'NAN', ...)


# ---------------------------------------------------------------------------------------------
# Dates, times, timestamps


def _date(text: str) -> str:
    if not text.lstrip("-").isdigit():  # a date as text ('2024-02-29'): as it is
        return text
    days = int(text)
    if not FIRST_ISO_DAY <= days <= LAST_ISO_DAY:
        raise ValueError("outside 0001-01-01..9999-12-31")
    return dt.date.fromordinal(days + EPOCH_ORDINAL).isoformat()


def _datetime(multiplier: int) -> Convert:
    """Epoch milli/microseconds (timestamp, datetime) or ISO-8601 in UTC (timestamptz,
    MySQL's timestamp) -> 'YYYY-MM-DD HH:MM:SS[.ffffff]' in UTC."""

    def convert(text: str) -> str:
        if not text.lstrip("-").isdigit():
            if not text.endswith("Z") or text[:1] in "+-":
                raise ValueError("neither epoch time nor ISO-8601 in UTC within years 0001..9999")
            return text[:-1].replace("T", " ")
        days, time = divmod(int(text) * multiplier, US_PER_DAY)
        if not FIRST_ISO_DAY <= days <= LAST_ISO_DAY:
            raise ValueError("outside years 0001..9999")
        return f"{dt.date.fromordinal(days + EPOCH_ORDINAL).isoformat()} {clock(time)}"

    return convert


def _time(multiplier: int) -> Convert:
    """Micro/milliseconds (a duration in MySQL, so maybe negative or past 24h) or ISO time."""

    def convert(text: str) -> str:
        if not text.lstrip("-").isdigit():
            return text.removesuffix("Z")
        micros = int(text) * multiplier
        return ("-" if micros < 0 else "") + clock(abs(micros))

    return convert


def _temporal(column: ColumnType, modes: Modes) -> Built | None:
    name = column.type_name
    if name == "date":
        return _date, None
    if name in ("datetime", "timestamp"):
        return _datetime(1 if uses_micros(column, modes, is_time=False) else 1000), "time_precision"
    if name == "time":
        return _time(1 if uses_micros(column, modes, is_time=True) else 1000), "time_precision"
    return None


# ---------------------------------------------------------------------------------------------
# By type

_INTS = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"))
_BINARY_TYPES = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))


def mysql_converter(column: ColumnType, modes: Modes) -> Built:
    """A MySQL/MariaDB target column's converter."""
    name = column.type_name
    if name in _INTS:
        return _int, None
    if name in ("decimal", "numeric", "fixed"):
        return _decimal(modes, column.scale), "decimal"
    if name in ("float", "double", "real", "double precision"):
        return _finite_float, None
    if name == "bit":
        return _bit, None
    if name in _BINARY_TYPES:
        return BINARY[modes.binary], "binary"
    temporal = _temporal(column, modes)
    if temporal is not None:
        return temporal
    return pass_through, None  # char, varchar, text, enum, set, json: the text
