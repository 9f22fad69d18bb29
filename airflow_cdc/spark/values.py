"""Debezium's JSON values -> what a SQL target's driver accepts, by the target column's type.

The inverse of the engine's forward conversions (``airflow_cdc/engine/sources/postgres/types.py``
and its neighbours ``numeric``, ``temporal``, ``bits``, ``hstore``, ``geometry``), which are
Debezium's. A value arrives as *JSON text* (the latest frame's ``after``: a JSON string without
its quotes, a number or boolean as its JSON text, an object or array as JSON text, null as
None), and its encoding depends on the connector's value-handling modes (:class:`Modes`) and on
the *source* column's type. The target column's type stands in for the source's: give the
target the source's types (numeric scales and temporal precisions included: a ``timestamp(3)``
arrives in milliseconds, a ``timestamp(6)`` in microseconds, and nothing in the value tells).

PostgreSQL targets get PostgreSQL's *text input form* (a ``str`` psycopg sends untyped, so the
server parses it as the column's type) wherever a Python value would lose something: BC dates,
years past 9999, infinities, arrays of any element type, geometry, hstore. Values whose JSON
text already is that form (integers, floats, booleans, strings, ``timetz``, ISO intervals) pass
through untouched; ``bytea`` becomes ``bytes``. MySQL/MariaDB targets get ``int``, ``Decimal``,
``float``, ``bytes`` and ``str`` (temporal values as their text: the connection's time zone
should be UTC).

:func:`decoder_for` builds one function per column, once; calling it is the hot path. A value
that cannot be decoded raises :class:`DecodeError`, naming the column, the value and the
setting to check.

What Debezium's encodings lose stays lost: ``numeric`` NaN and infinities in ``precise`` mode
(null), digits beyond a double's in ``double`` mode, microseconds under
``time.precision.mode=connect``, an interval's months in ``numeric`` interval mode (30.4375-day
months: decoded as days and time), a ``timetz``'s offset (UTC), a ``varbit``'s leading zeros, a
polygon whose text repeats its first point at the end (the repeat is dropped).

Pure Python: no pyspark, no Airflow, not even the engine's package (its import is heavy); it
runs on Spark executors.
"""

from __future__ import annotations

import binascii
import datetime as dt
import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.sources.postgres.temporal import civil_from_days

__all__ = [
    "ColumnType",
    "DecodeError",
    "Decoder",
    "Modes",
    "decoder_for",
    "json_text",
    "pass_through",
]

Decoder = Callable[[str | None], Any]
_Convert = Callable[[str], Any]

DECIMAL_MODES = ("precise", "double", "string")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")
TIME_PRECISION_MODES = ("adaptive", "adaptive_time_microseconds", "connect")
INTERVAL_MODES = ("numeric", "string")
HSTORE_MODES = ("json", "map")

#: Modes attribute -> the connector setting it mirrors (for messages).
SETTINGS = {
    "decimal": "decimal.handling.mode",
    "binary": "binary.handling.mode",
    "time_precision": "time.precision.mode",
    "interval": "interval.handling.mode",
    "hstore": "hstore.handling.mode",
    "money_fraction_digits": "money.fraction.digits",
    "include_unknown": "include.unknown.datatypes",
}


@dataclass(frozen=True)
class Modes:
    """The connector's value-handling settings, Debezium's defaults (PostgreSQL's: note that
    Debezium's MySQL connector defaults ``time.precision.mode`` to adaptive_time_microseconds)."""

    decimal: str = "precise"
    binary: str = "bytes"
    time_precision: str = "adaptive"
    interval: str = "numeric"
    hstore: str = "json"
    money_fraction_digits: int = 2
    include_unknown: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None) -> Modes:
        """From an engine or Debezium connector config (other keys are ignored)."""
        config = config or {}
        return cls(
            decimal=_choice(config, "decimal", DECIMAL_MODES, cls.decimal),
            binary=_choice(config, "binary", BINARY_MODES, cls.binary),
            time_precision=_choice(config, "time_precision", TIME_PRECISION_MODES, cls.time_precision),
            interval=_choice(config, "interval", INTERVAL_MODES, cls.interval),
            hstore=_choice(config, "hstore", HSTORE_MODES, cls.hstore),
            money_fraction_digits=int(config.get(SETTINGS["money_fraction_digits"], cls.money_fraction_digits)),
            include_unknown=str(config.get(SETTINGS["include_unknown"], "false")).strip().lower() == "true",
        )


def _choice(config: Mapping[str, Any], attribute: str, allowed: tuple[str, ...], default: str) -> str:
    key = SETTINGS[attribute]
    value = str(config.get(key, default)).strip().lower()
    if value not in allowed:
        raise ValueError(f"{key}={config.get(key)!r} is not one of {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class ColumnType:
    """A target column's type, as the target's catalog describes it.

    ``type_name``: PostgreSQL's ``pg_type.typname`` of the column's type with domains resolved
    to their base type (an array's *element* type, ``is_array`` set; an enum's own name,
    ``is_enum`` set); MySQL's ``DATA_TYPE``. ``scale``: the numeric scale (None: a numeric
    without one). ``precision``: fractional-second digits of a temporal type (None: 6).
    ``length``: a bit string's length (None: unbounded), MySQL's display width (``tinyint(1)``).
    ``sql_type``: the declared type (``format_type``, ``COLUMN_TYPE``), for messages.
    ``interval_fields``: a PostgreSQL interval's field restriction (``YEAR TO MONTH``, ...).
    """

    table: str
    column: str
    type_name: str
    sql_type: str = ""
    scale: int | None = None
    precision: int | None = None
    length: int | None = None
    is_array: bool = False
    is_enum: bool = False
    dialect: str = "postgresql"
    interval_fields: str | None = None

    @classmethod
    def mysql(
        cls,
        table: str,
        column: str,
        data_type: str,
        column_type: str,
        numeric_scale: int | None = None,
        datetime_precision: int | None = None,
    ) -> ColumnType:
        """From ``information_schema.COLUMNS``."""
        width = re.search(r"\((\d+)\)", column_type)
        return cls(
            table,
            column,
            data_type.lower(),
            column_type,
            scale=numeric_scale,
            precision=datetime_precision,
            length=int(width.group(1)) if width else None,
            dialect="mysql",
        )

    @property
    def described(self) -> str:
        return self.sql_type or (self.type_name + ("[]" if self.is_array else ""))


class DecodeError(CdcError, ValueError):
    """A value its column's decoder cannot read; the message names the column, the value and
    what to check."""

    def __init__(self, column: ColumnType, value: str, reason: str, fix: str) -> None:
        self.table, self.column, self.value = column.table, column.column, value
        shown = value if len(value) <= 60 else value[:60] + "..."
        super().__init__(
            f"Cannot decode column {column.column} of {column.table} ({column.described}), value {shown!r}: "
            f"{reason}. {fix}"
        )


_TYPE_HINT = (
    "The target column's type must match the source column's (Debezium encodes a value by the source's type: "
    "numeric scale, temporal precision and bit length included)"
)


def _fix(modes: Modes, setting: str | None) -> str:
    if setting is None:
        return _TYPE_HINT
    return (
        f"Set {SETTINGS[setting]} the same as the connector's (here it is {getattr(modes, setting)!r}); "
        f"otherwise the target column's type must match the source column's"
    )


# ---------------------------------------------------------------------------------------------
# Entry points


def decoder_for(column: ColumnType, modes: Modes) -> Decoder:
    """The function turning one JSON-text value of ``column`` (or None) into the driver's value.

    Build it once per column: the returned function does the per-value work only."""
    build = _mysql if column.dialect == "mysql" else _postgres
    convert, setting = build(column, modes)
    if convert is pass_through:
        return pass_through
    return _guarded(convert, column, modes, setting)


def json_text(value: Any) -> str | None:
    """A ``json.loads`` value in the latest frame's JSON-text form (for key columns, which come
    from the record key, and array elements): a string as itself, null as None, anything else
    as its compact JSON."""
    if value is None or isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, struct.error)


def _guarded(convert: _Convert, column: ColumnType, modes: Modes, setting: str | None) -> Decoder:
    def decode(text: str | None) -> Any:
        if text is None:
            return None
        try:
            return convert(text)
        except _DECODE_ERRORS as exc:
            reason = _reason(exc)
            raise DecodeError(column, str(text), reason, _fix(modes, setting)) from exc

    return decode


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, ArithmeticError) and text.startswith("[<class"):  # decimal's InvalidOperation
        return "not a decimal number"
    return text or type(exc).__name__


def pass_through(text: Any) -> Any:
    """The decoder of a column whose JSON text is already the driver's value."""
    return text


# ---------------------------------------------------------------------------------------------
# Calendar (as airflow_cdc.engine.sources.postgres.temporal; a unit test keeps them equal)

US_PER_DAY = 86_400_000_000
POSITIVE_INFINITY_US = 9_223_372_036_825_200_000
NEGATIVE_INFINITY_US = -9_223_372_036_832_400_000
POSITIVE_INFINITY_MICRO_TIMESTAMP = 2**63 - 1
NEGATIVE_INFINITY_MICRO_TIMESTAMP = -(2**63)
POSITIVE_INFINITY_DAYS = 2_146_033_979
NEGATIVE_INFINITY_DAYS = -2_147_472_691
SNAPSHOT_POSITIVE_INFINITY_DAYS = -622_191_234
SNAPSHOT_NEGATIVE_INFINITY_DAYS = -625_821_272

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
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_FIRST_ISO_DAY = dt.date.min.toordinal() - _EPOCH_ORDINAL  # 0001-01-01
_LAST_ISO_DAY = dt.date.max.toordinal() - _EPOCH_ORDINAL  # 9999-12-31


def _clock(micros: int) -> str:
    """'HH:MM:SS[.ffffff]' of microseconds since midnight (hours may pass 23)."""
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    if fraction:
        return f"{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}"
    return f"{hour:02d}:{minute:02d}:{second:02d}"


def _date_text(days: int) -> str:
    """PostgreSQL's ISO date text: '2024-02-29', '0044-03-15 BC', '10000-01-01'."""
    if _FIRST_ISO_DAY <= days <= _LAST_ISO_DAY:
        return dt.date.fromordinal(days + _EPOCH_ORDINAL).isoformat()
    year, month, day = civil_from_days(days)
    if year > 0:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return f"{1 - year:04d}-{month:02d}-{day:02d} BC"


_DAY_TEXTS: dict[int, str] = {}  # the ISO texts of recent days: timestamps share few days


def _timestamp_text(micros: int) -> str:
    days, clock = divmod(micros, US_PER_DAY)
    day = _DAY_TEXTS.get(days)
    if day is None:
        day = _date_text(days)
        if day.endswith(" BC"):
            return f"{day[:-3]} {_clock(clock)} BC"
        if len(_DAY_TEXTS) >= 4096:
            _DAY_TEXTS.clear()
        _DAY_TEXTS[days] = day
    return f"{day} {_clock(clock)}"


def _uses_micros(column: ColumnType, modes: Modes, is_time: bool) -> bool:
    """As the engine picks the unit: precision above 3, or any ``time`` under
    adaptive_time_microseconds; milliseconds everywhere under connect."""
    if modes.time_precision == "connect":
        return False
    precision = 6 if column.precision is None else column.precision
    return precision > 3 or (is_time and modes.time_precision == "adaptive_time_microseconds")


def _date(text: str) -> str:
    days = int(text)
    special = _DATE_INFINITIES.get(days)
    return special if special is not None else _date_text(days)


def _timestamp(multiplier: int) -> _Convert:
    def convert(text: str) -> str:
        value = int(text)
        special = _TIMESTAMP_INFINITIES.get(value)
        return special if special is not None else _timestamp_text(value * multiplier)

    return convert


def _time(multiplier: int) -> _Convert:
    def convert(text: str) -> str:
        micros = int(text) * multiplier
        if not 0 <= micros <= US_PER_DAY:
            raise ValueError("outside 00:00:00..24:00:00")
        return _clock(micros)

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
_US_PER_MONTH = Decimal(US_PER_DAY) * Decimal("30.4375")


def _interval_months(text: str) -> str:
    """MicroDuration of an interval holding only years and months: whole 30.4375-day months."""
    return f"{int((Decimal(int(text)) / _US_PER_MONTH).to_integral_value())} mons"


def _interval_micros(text: str) -> str:
    """MicroDuration: months were 30.4375 days, which nothing can undo: days and a time (an
    interval YEAR TO MONTH column gets its months back: :func:`_interval_months`)."""
    micros = int(text)
    days, clock = divmod(abs(micros), US_PER_DAY)
    if micros < 0:
        return f"-{days} days -{_clock(clock)}"
    return f"{days} days {_clock(clock)}"


# ---------------------------------------------------------------------------------------------
# Numbers


_DECIMAL_SPECIALS = {"NAN": "NaN", "POSITIVE_INFINITY": "Infinity", "NEGATIVE_INFINITY": "-Infinity"}


def _scaled_text(unscaled: int, scale: int) -> str:
    """-12345, 3 -> '-12.345'."""
    if scale <= 0:
        return str(unscaled * 10**-scale)
    whole, fraction = divmod(-unscaled if unscaled < 0 else unscaled, 10**scale)
    return f"{'-' if unscaled < 0 else ''}{whole}.{fraction:0{scale}d}"


def _unscaled(encoded: str, scale: int) -> str:
    """Connect's Decimal: base64 of the unscaled value's big-endian two's-complement bytes."""
    return _scaled_text(int.from_bytes(binascii.a2b_base64(encoded, strict_mode=True), "big", signed=True), scale)


def _variable_scale(text: str) -> str:
    """VariableScaleDecimal: {"scale": 3, "value": "<base64>"}."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a {scale, value} object")
    return _unscaled(value["value"], int(value["scale"]))


def _precise(scale: int | None) -> _Convert:
    def convert(text: str) -> str:
        if text[:1] == "{":
            return _variable_scale(text)
        if scale is None:
            raise ValueError(
                "a fixed-scale Decimal for a numeric column without a scale: declare the target column with the "
                "source's numeric(p,s)"
            )
        return _unscaled(text, scale)

    return convert


def _decimal_string(text: str) -> str:
    return _DECIMAL_SPECIALS.get(text, text)


_MONEY_MIN, _MONEY_MAX = Decimal("-92233720368547758.08"), Decimal("92233720368547758.07")


def _money_double(text: str) -> str:
    """money as a double: its text without an exponent (money reads no '1.5E3'), and a double
    rounded past money's range (its extremes have no exact double) back to the extreme."""
    return f"{min(max(Decimal(text), _MONEY_MIN), _MONEY_MAX):f}"


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


def _mysql_decimal(modes: Modes, scale: int | None) -> _Convert:
    if modes.decimal == "precise":
        precise = _precise(scale)
        return lambda text: _finite_decimal(precise(text))
    return _finite_decimal  # double and string: the number's text (specials: 'NaN', 'NAN', ...)


# ---------------------------------------------------------------------------------------------
# Binary


_URL_SAFE = str.maketrans("-_", "+/")


def _base64(text: str) -> bytes:
    return binascii.a2b_base64(text, strict_mode=True)


def _base64_url_safe(text: str) -> bytes:
    return binascii.a2b_base64(text.translate(_URL_SAFE), strict_mode=True)


_BINARY: dict[str, _Convert] = {
    "bytes": _base64,  # JSON has no bytes: base64
    "base64": _base64,
    "base64-url-safe": _base64_url_safe,
    "hex": bytes.fromhex,
}


def _unknown_text(mode: str) -> _Convert:
    """include.unknown.datatypes: the value's text's UTF-8 bytes, in the binary mode."""
    binary = _BINARY[mode]
    return lambda text: binary(text).decode()


_ONE_BIT = {"true": "1", "false": "0"}


def _bits_value(text: str) -> int:
    """io.debezium.data.Bits: BitSet.toByteArray(), little-endian, always base64."""
    return int.from_bytes(_base64(text), "little")


def _bits(length: int | None) -> _Convert:
    if length == 1:
        return _ONE_BIT.__getitem__

    def convert(text: str) -> str:
        bits = format(_bits_value(text), "b")
        if length is None:
            return bits
        if len(bits) > length:
            raise ValueError(f"{len(bits)} bits for a bit({length})")
        return bits.zfill(length)

    return convert


# ---------------------------------------------------------------------------------------------
# Geometry, hstore, arrays (PostgreSQL)


def _coordinate(value: Any) -> str:
    """A Java double as JSON (number, or 'NaN' / 'Infinity' / '-Infinity') -> float8 input."""
    if isinstance(value, str):
        if value in ("NaN", "Infinity", "-Infinity"):
            return value
        raise ValueError(f"not a coordinate: {value!r}")
    return _float_text(float(value))


def _float_text(value: float) -> str:
    if math.isfinite(value):
        return repr(value)
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _wkb_points(encoded: str) -> list[str]:
    """A WKB line string's or single-ring polygon's points, as '(x,y)' texts."""
    raw = _base64(encoded)
    order = "<" if raw[0] == 1 else ">"
    kind, offset = struct.unpack_from(order + "I", raw, 1)[0], 5
    if kind == 3:
        (rings,) = struct.unpack_from(order + "I", raw, offset)
        if rings != 1:
            raise ValueError(f"a WKB polygon of {rings} rings")
        offset += 4
    elif kind != 2:
        raise ValueError(f"WKB geometry type {kind}, not a line string or polygon")
    (count,) = struct.unpack_from(order + "I", raw, offset)
    values = struct.unpack_from(f"{order}{2 * count}d", raw, offset + 4)
    return [f"({_float_text(x)},{_float_text(y)})" for x, y in zip(values[0::2], values[1::2], strict=True)]


def _object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _point(text: str) -> str:
    value = _object(text)
    return f"({_coordinate(value['x'])},{_coordinate(value['y'])})"


def _box(text: str) -> str:
    ring = _wkb_points(_object(text)["wkb"])  # (x1,y1), (x1,y2), (x2,y2), (x2,y1), (x1,y1)
    return f"{ring[0]},{ring[2]}"


def _lseg(text: str) -> str:
    return "[" + ",".join(_wkb_points(_object(text)["wkb"])) + "]"


def _path(text: str) -> str:
    value = _object(text)
    points = ",".join(_wkb_points(value["wkb"]))
    closed = (value.get("extensions") or {}).get("closed") == "true"
    return f"({points})" if closed else f"[{points}]"


def _polygon(text: str) -> str:
    """Debezium closes the ring (appends the first point): drop that repeat."""
    ring = _wkb_points(_object(text)["wkb"])
    if len(ring) >= 3 and ring[0] == ring[-1]:
        ring.pop()
    return "(" + ",".join(ring) + ")"


def _circle(text: str) -> str:
    value = _object(text)
    center = value["center"]
    return f"<({_coordinate(center['x'])},{_coordinate(center['y'])}),{_coordinate(value['radius'])}>"


def _line(text: str) -> str:
    value = _object(text)
    return "{" + ",".join(_coordinate(value[k]) for k in ("a", "b", "c")) + "}"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _hstore(text: str) -> str:
    """A JSON object (``map`` mode) or its JSON text (``json`` mode, the same text here) -> hstore
    input."""
    pairs = _object(text)
    return ", ".join(
        f"{_quoted(key)}=>{'NULL' if value is None else _quoted(json_text(value) or '')}"
        for key, value in pairs.items()
    )


def _array(element: _Convert, delimiter: str) -> _Convert:
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
# PostgreSQL targets

#: Types whose JSON text is PostgreSQL's input for the type as it is.
_PG_SAME = frozenset(
    (
        "int2", "int4", "int8", "oid", "float4", "float8", "bool", "timetz",
        "text", "varchar", "bpchar", "char", "name", "xml", "json", "jsonb", "uuid", "inet", "cidr",
        "macaddr", "macaddr8", "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
        "tsvector", "citext", "ltree", "isbn", "geometry", "geography", "vector", "halfvec", "sparsevec",
    )
)  # fmt: skip

_Built = tuple[_Convert, str | None]  # the converter, and the Modes attribute it depends on

_PG_FIXED: dict[str, _Built] = {
    "date": (_date, None),
    "timestamptz": (_timestamptz, None),
    "hstore": (_hstore, "hstore"),
    "point": (_point, None),
    "box": (_box, None),
    "lseg": (_lseg, None),
    "path": (_path, None),
    "polygon": (_polygon, None),
    "circle": (_circle, None),
    "line": (_line, None),
}


def _pg_numeric(column: ColumnType, modes: Modes) -> _Built:
    if modes.decimal == "precise":
        return _precise(column.scale), "decimal"
    return (pass_through if modes.decimal == "double" else _decimal_string), "decimal"


def _pg_money(column: ColumnType, modes: Modes) -> _Built:
    if modes.decimal == "precise":
        return _precise(modes.money_fraction_digits), "decimal"
    return (_money_double if modes.decimal == "double" else pass_through), "decimal"


def _pg_timestamp(column: ColumnType, modes: Modes) -> _Built:
    return _timestamp(1 if _uses_micros(column, modes, is_time=False) else 1000), "time_precision"


def _pg_time(column: ColumnType, modes: Modes) -> _Built:
    return _time(1 if _uses_micros(column, modes, is_time=True) else 1000), "time_precision"


def _pg_interval(column: ColumnType, modes: Modes) -> _Built:
    if modes.interval != "numeric":
        return pass_through, "interval"
    return (_interval_months if column.interval_fields in _MONTH_FIELDS else _interval_micros), "interval"


_PG_BY_MODE: dict[str, Callable[[ColumnType, Modes], _Built]] = {
    "numeric": _pg_numeric,
    "money": _pg_money,
    "bytea": lambda column, modes: (_BINARY[modes.binary], "binary"),
    "timestamp": _pg_timestamp,
    "time": _pg_time,
    "interval": _pg_interval,
    "bit": lambda column, modes: (_bits(column.length), None),
    # varbit(n)'s n is a maximum: only bit(n) pads with leading zeros (Bits keeps none).
    "varbit": lambda column, modes: (_bits(1 if column.length == 1 else None), None),
}


def _pg_scalar(column: ColumnType, modes: Modes) -> _Built:
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


def _postgres(column: ColumnType, modes: Modes) -> _Built:
    convert, setting = _pg_scalar(column, modes)
    if not column.is_array:
        return convert, setting
    return _array(convert, ";" if column.type_name == "box" else ","), setting


# ---------------------------------------------------------------------------------------------
# MySQL / MariaDB targets

_BOOL_INT = {"true": 1, "false": 0}


def _mysql_int(text: str) -> int:
    value = _BOOL_INT.get(text)
    return int(text) if value is None else value


def _mysql_bit(text: str) -> int:
    value = _BOOL_INT.get(text)
    return _bits_value(text) if value is None else value


def _mysql_date(text: str) -> str:
    if not text.lstrip("-").isdigit():  # a date as text ('2024-02-29'): as it is
        return text
    days = int(text)
    if not _FIRST_ISO_DAY <= days <= _LAST_ISO_DAY:
        raise ValueError("outside 0001-01-01..9999-12-31")
    return dt.date.fromordinal(days + _EPOCH_ORDINAL).isoformat()


def _mysql_datetime(multiplier: int) -> _Convert:
    """Epoch milli/microseconds (timestamp, datetime) or ISO-8601 in UTC (timestamptz,
    MySQL's timestamp) -> 'YYYY-MM-DD HH:MM:SS[.ffffff]' in UTC."""

    def convert(text: str) -> str:
        if not text.lstrip("-").isdigit():
            if not text.endswith("Z") or text[:1] in "+-":
                raise ValueError("neither epoch time nor ISO-8601 in UTC within years 0001..9999")
            return text[:-1].replace("T", " ")
        days, clock = divmod(int(text) * multiplier, US_PER_DAY)
        if not _FIRST_ISO_DAY <= days <= _LAST_ISO_DAY:
            raise ValueError("outside years 0001..9999")
        return f"{dt.date.fromordinal(days + _EPOCH_ORDINAL).isoformat()} {_clock(clock)}"

    return convert


def _mysql_time(multiplier: int) -> _Convert:
    """Micro/milliseconds (a duration in MySQL, so maybe negative or past 24h) or ISO time."""

    def convert(text: str) -> str:
        if not text.lstrip("-").isdigit():
            return text.removesuffix("Z")
        micros = int(text) * multiplier
        return ("-" if micros < 0 else "") + _clock(abs(micros))

    return convert


_MYSQL_INTS = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"))
_MYSQL_BINARY = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))


def _mysql_temporal(column: ColumnType, modes: Modes) -> _Built | None:
    name = column.type_name
    if name == "date":
        return _mysql_date, None
    if name in ("datetime", "timestamp"):
        return _mysql_datetime(1 if _uses_micros(column, modes, is_time=False) else 1000), "time_precision"
    if name == "time":
        return _mysql_time(1 if _uses_micros(column, modes, is_time=True) else 1000), "time_precision"
    return None


def _mysql(column: ColumnType, modes: Modes) -> _Built:
    name = column.type_name
    if name in _MYSQL_INTS:
        return _mysql_int, None
    if name in ("decimal", "numeric", "fixed"):
        return _mysql_decimal(modes, column.scale), "decimal"
    if name in ("float", "double", "real", "double precision"):
        return _finite_float, None
    if name == "bit":
        return _mysql_bit, None
    if name in _MYSQL_BINARY:
        return _BINARY[modes.binary], "binary"
    temporal = _mysql_temporal(column, modes)
    if temporal is not None:
        return temporal
    return pass_through, None  # char, varchar, text, enum, set, json: the text
