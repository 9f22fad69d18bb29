"""PostgreSQL targets: Debezium's values -> PostgreSQL's text input form (or the JSON text as it
is, where that already is the input form; ``bytes`` for ``bytea``).

The inverse of the engine's ``airflow_cdc/engine/sources/postgres/types.py`` and its neighbours
(``numeric``, ``temporal``, ``bits``, ``hstore``; ``geometry``'s inverse is
:mod:`.postgres_geometry`). Debezium's stand-ins for infinite dates and timestamps, and its
average month, are the engine's constants."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from airflow_cdc.engine.sources.postgres.numeric import SPECIAL_STRINGS
from airflow_cdc.engine.sources.postgres.temporal import (
    DAYS_PER_MONTH_AVG,
    NEGATIVE_INFINITY_DAYS,
    NEGATIVE_INFINITY_MICRO_TIMESTAMP,
    NEGATIVE_INFINITY_US,
    POSITIVE_INFINITY_DAYS,
    POSITIVE_INFINITY_MICRO_TIMESTAMP,
    POSITIVE_INFINITY_US,
    SNAPSHOT_NEGATIVE_INFINITY_DAYS,
    SNAPSHOT_POSITIVE_INFINITY_DAYS,
    US_PER_DAY,
    civil_from_days,
)
from airflow_cdc.spark.values import postgres_geometry as geometry
from airflow_cdc.spark.values.columns import Built, ColumnType, Convert, Modes, json_text, pass_through
from airflow_cdc.spark.values.semantic_types import (
    BINARY,
    EPOCH_ORDINAL,
    FIRST_ISO_DAY,
    LAST_ISO_DAY,
    bits_value,
    clock,
    json_object,
    precise,
    uses_micros,
)

# ---------------------------------------------------------------------------------------------
# Dates, times, timestamps and intervals: PostgreSQL's ISO text, BC dates and infinities included

_DATE_INFINITIES = {
    POSITIVE_INFINITY_DAYS: "infinity",
    SNAPSHOT_POSITIVE_INFINITY_DAYS: "infinity",
    NEGATIVE_INFINITY_DAYS: "-infinity",
    SNAPSHOT_NEGATIVE_INFINITY_DAYS: "-infinity",
}
#: Debezium's infinite timestamps, in either unit (each is far outside the other unit's range).
_TIMESTAMP_INFINITIES = {
    POSITIVE_INFINITY_US: "infinity",
    POSITIVE_INFINITY_MICRO_TIMESTAMP: "infinity",
    NEGATIVE_INFINITY_US: "-infinity",
    NEGATIVE_INFINITY_MICRO_TIMESTAMP: "-infinity",
}


def _date_text(days: int) -> str:
    """PostgreSQL's ISO date text: '2024-02-29', '0044-03-15 BC', '10000-01-01'."""
    if FIRST_ISO_DAY <= days <= LAST_ISO_DAY:
        return dt.date.fromordinal(days + EPOCH_ORDINAL).isoformat()
    year, month, day = civil_from_days(days)
    if year > 0:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return f"{1 - year:04d}-{month:02d}-{day:02d} BC"


_DAY_TEXTS: dict[int, str] = {}  # the ISO texts of recent days: timestamps share few days


def _timestamp_text(micros: int) -> str:
    days, time = divmod(micros, US_PER_DAY)
    day = _DAY_TEXTS.get(days)
    if day is None:
        day = _date_text(days)
        if day.endswith(" BC"):
            return f"{day[:-3]} {clock(time)} BC"
        if len(_DAY_TEXTS) >= 4096:
            _DAY_TEXTS.clear()
        _DAY_TEXTS[days] = day
    return f"{day} {clock(time)}"


def _date(text: str) -> str:
    days = int(text)
    special = _DATE_INFINITIES.get(days)
    return special if special is not None else _date_text(days)


def _timestamp(multiplier: int) -> Convert:
    def convert(text: str) -> str:
        value = int(text)
        special = _TIMESTAMP_INFINITIES.get(value)
        return special if special is not None else _timestamp_text(value * multiplier)

    return convert


def _time(multiplier: int) -> Convert:
    def convert(text: str) -> str:
        micros = int(text) * multiplier
        if not 0 <= micros <= US_PER_DAY:
            raise ValueError("outside 00:00:00..24:00:00")
        return clock(micros)

    return convert


def _timestamptz(text: str) -> str:
    """ZonedTimestamp ('2024-02-29T11:37:03.5Z') is PostgreSQL input as it is, except for the
    years Java prints signed ('+10000-...', '-0043-...' = 44 BC) or as '0000' (1 BC)."""
    if text[:1].isdigit() and not text.startswith("0000"):
        return text
    if text in ("infinity", "-infinity"):
        return text
    dash = text.index("-", 1)
    year = int(text[:dash])  # int() reads the sign
    rest = text[dash:]
    if year > 0:
        return f"{year}{rest}"
    return f"{1 - year:04d}{rest.replace('T', ' ').replace('Z', '+00')} BC"


_MONTH_FIELDS = frozenset(("YEAR", "MONTH", "YEAR TO MONTH"))
# DAYS_PER_MONTH_AVG (30.4375) is exact as a float, so this Decimal is exact too.
_US_PER_MONTH = Decimal(US_PER_DAY) * Decimal(DAYS_PER_MONTH_AVG)


def _interval_months(text: str) -> str:
    """MicroDuration of an interval holding only years and months: whole 30.4375-day months."""
    return f"{int((Decimal(int(text)) / _US_PER_MONTH).to_integral_value())} mons"


def _interval_micros(text: str) -> str:
    """MicroDuration: months were 30.4375 days, which nothing can undo: days and a time (an
    interval YEAR TO MONTH column gets its months back: :func:`_interval_months`)."""
    micros = int(text)
    days, time = divmod(abs(micros), US_PER_DAY)
    if micros < 0:
        return f"-{days} days -{clock(time)}"
    return f"{days} days {clock(time)}"


# ---------------------------------------------------------------------------------------------
# Numbers, bits, unknown types


#: SpecialValueDecimal's names (decimal.handling.mode=string) -> PostgreSQL's numeric input.
_DECIMAL_SPECIALS = {name: text for text, name in SPECIAL_STRINGS.items()}


def _decimal_string(text: str) -> str:
    return _DECIMAL_SPECIALS.get(text, text)


_MONEY_MIN, _MONEY_MAX = Decimal("-92233720368547758.08"), Decimal("92233720368547758.07")


def _money_double(text: str) -> str:
    """money as a double: its text without an exponent (money reads no '1.5E3'), and a double
    rounded past money's range (its extremes have no exact double) back to the extreme."""
    return f"{min(max(Decimal(text), _MONEY_MIN), _MONEY_MAX):f}"


_ONE_BIT = {"true": "1", "false": "0"}


def _bits(length: int | None) -> Convert:
    if length == 1:
        return _ONE_BIT.__getitem__

    def convert(text: str) -> str:
        bits = format(bits_value(text), "b")
        if length is None:
            return bits
        if len(bits) > length:
            raise ValueError(f"{len(bits)} bits for a bit({length})")
        return bits.zfill(length)

    return convert


def _unknown_text(mode: str) -> Convert:
    """include.unknown.datatypes: the value's text's UTF-8 bytes, in the binary mode."""
    binary = BINARY[mode]
    return lambda text: binary(text).decode()


# ---------------------------------------------------------------------------------------------
# hstore and arrays


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _hstore(text: str) -> str:
    """A JSON object (``map`` mode) or its JSON text (``json`` mode, the same text here) -> hstore
    input."""
    pairs = json_object(text)
    return ", ".join(
        f"{_quoted(key)}=>{'NULL' if value is None else _quoted(json_text(value) or '')}"
        for key, value in pairs.items()
    )


def _array(element: Convert, delimiter: str) -> Convert:
    """A JSON array (nested for several dimensions) -> PostgreSQL's array input, every element
    quoted; ``box`` arrays separate elements with ';'."""

    def literal(items: list[Any]) -> str:
        parts = []
        for item in items:
            if item is None:
                parts.append("NULL")
            elif isinstance(item, list):
                parts.append(literal(item))
            else:
                value = element(json_text(item))  # type: ignore[arg-type]
                if value is None:
                    parts.append("NULL")
                else:
                    parts.append(_quoted("\\x" + value.hex() if isinstance(value, bytes) else str(value)))
        return "{" + delimiter.join(parts) + "}"

    def convert(text: str) -> str:
        items = json.loads(text)
        if not isinstance(items, list):
            raise ValueError("not a JSON array")
        return literal(items)

    return convert


# ---------------------------------------------------------------------------------------------
# By type

#: Types whose JSON text is PostgreSQL's input for the type as it is.
_PG_SAME = frozenset(
    (
        "int2", "int4", "int8", "oid", "float4", "float8", "bool", "timetz",
        "text", "varchar", "bpchar", "char", "name", "xml", "json", "jsonb", "uuid", "inet", "cidr",
        "macaddr", "macaddr8", "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
        "tsvector", "citext", "ltree", "isbn", "geometry", "geography", "vector", "halfvec", "sparsevec",
    )
)  # fmt: skip

_PG_FIXED: dict[str, Built] = {
    "date": (_date, None),
    "timestamptz": (_timestamptz, None),
    "hstore": (_hstore, "hstore"),
    "point": (geometry.point, None),
    "box": (geometry.box, None),
    "lseg": (geometry.lseg, None),
    "path": (geometry.path, None),
    "polygon": (geometry.polygon, None),
    "circle": (geometry.circle, None),
    "line": (geometry.line, None),
}


def _pg_numeric(column: ColumnType, modes: Modes) -> Built:
    if modes.decimal == "precise":
        return precise(column.scale), "decimal"
    return (pass_through if modes.decimal == "double" else _decimal_string), "decimal"


def _pg_money(column: ColumnType, modes: Modes) -> Built:
    if modes.decimal == "precise":
        return precise(modes.money_fraction_digits), "decimal"
    return (_money_double if modes.decimal == "double" else pass_through), "decimal"


def _pg_timestamp(column: ColumnType, modes: Modes) -> Built:
    return _timestamp(1 if uses_micros(column, modes, is_time=False) else 1000), "time_precision"


def _pg_time(column: ColumnType, modes: Modes) -> Built:
    return _time(1 if uses_micros(column, modes, is_time=True) else 1000), "time_precision"


def _pg_interval(column: ColumnType, modes: Modes) -> Built:
    if modes.interval != "numeric":
        return pass_through, "interval"
    return (_interval_months if column.interval_fields in _MONTH_FIELDS else _interval_micros), "interval"


_PG_BY_MODE: dict[str, Callable[[ColumnType, Modes], Built]] = {
    "numeric": _pg_numeric,
    "money": _pg_money,
    "bytea": lambda column, modes: (BINARY[modes.binary], "binary"),
    "timestamp": _pg_timestamp,
    "time": _pg_time,
    "interval": _pg_interval,
    "bit": lambda column, modes: (_bits(column.length), None),
    # varbit(n)'s n is a maximum: only bit(n) pads with leading zeros (Bits keeps none).
    "varbit": lambda column, modes: (_bits(1 if column.length == 1 else None), None),
}


def _pg_scalar(column: ColumnType, modes: Modes) -> Built:
    name = column.type_name
    if name in _PG_SAME or column.is_enum:
        return pass_through, None
    fixed = _PG_FIXED.get(name)
    if fixed is not None:
        return fixed
    factory = _PG_BY_MODE.get(name)
    if factory is not None:
        return factory(column, modes)
    # A type Debezium has no schema for: left out of the events, or, with
    # include.unknown.datatypes, its text's bytes.
    return (_unknown_text(modes.binary), "binary") if modes.include_unknown else (pass_through, None)


def postgres_converter(column: ColumnType, modes: Modes) -> Built:
    """A PostgreSQL target column's converter (an array's: its element's, over the array)."""
    convert, setting = _pg_scalar(column, modes)
    if not column.is_array:
        return convert, setting
    return _array(convert, ";" if column.type_name == "box" else ","), setting
