"""PostgreSQL column values -> Debezium's JSON representation.

Values arrive as PostgreSQL text (pgoutput's tuple data, or COPY text in snapshots), produced
under the session settings in :data:`SESSION_OPTIONS`. One converter is chosen per column when
a table is first seen, so the per-value work is a single call.

Modes are Debezium's: ``decimal.handling.mode`` (precise | double | string),
``time.precision.mode`` (adaptive | adaptive_time_microseconds | connect),
``binary.handling.mode`` (bytes | base64 | base64-url-safe | hex) and
``interval.handling.mode`` (numeric | string).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from binascii import b2a_base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.sources.postgres import temporal

#: Set on every connection the source opens, so that text output parses the same everywhere.
SESSION_OPTIONS = (
    "-c DateStyle=ISO,MDY -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=3 "
    "-c bytea_output=hex -c lc_monetary=C"
)
UNAVAILABLE_VALUE = "__debezium_unavailable_value"

Converter = Callable[[str], Any]


@dataclass(frozen=True)
class TypeInfo:
    """What pg_type says about a type (``category`` is typcategory, ``kind`` typtype)."""

    oid: int
    name: str
    category: str
    kind: str
    element_oid: int = 0
    base_oid: int = 0


@dataclass(frozen=True)
class ValueModes:
    decimal: str = "precise"
    time_precision: str = "adaptive"
    binary: str = "bytes"
    interval: str = "numeric"
    money_fraction_digits: int = 2


def _precise_decimal(scale: int | None) -> Converter:
    if scale is not None:
        return _fixed_scale_decimal(scale)

    def variable_scale(text: str) -> Any:  # Debezium's VariableScaleDecimal
        value = decimal.Decimal(text)
        if not value.is_finite():
            return None  # NaN and infinities have no Decimal representation in Connect
        exponent = value.as_tuple().exponent
        own_scale = max(0, -int(exponent)) if isinstance(exponent, int) else 0
        return {"scale": own_scale, "value": _unscaled_b64(value, own_scale)}

    return variable_scale


def _fixed_scale_decimal(scale: int) -> Converter:
    """numeric(p, s): PostgreSQL prints exactly ``s`` fraction digits, so the unscaled integer is
    the digits without the point - no Decimal arithmetic needed."""
    slow = _precise_decimal_slow(scale)

    def convert(text: str) -> Any:
        whole, point, fraction = text.partition(".")
        if len(fraction) != scale or (scale and not point):
            return slow(text)
        try:
            unscaled = int(whole + fraction)
        except ValueError:  # NaN, Infinity
            return slow(text)
        length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1  # as unscaled_bytes, inlined
        return b2a_base64(unscaled.to_bytes(length, "big", signed=True), newline=False).decode("ascii")

    return convert


def _precise_decimal_slow(scale: int) -> Converter:
    def convert(text: str) -> Any:
        value = decimal.Decimal(text)
        return _unscaled_b64(value, scale) if value.is_finite() else None

    return convert


def _unscaled_b64(value: decimal.Decimal, scale: int) -> str:
    unscaled = int(value.scaleb(scale).to_integral_value(rounding=decimal.ROUND_HALF_UP))
    return base64.b64encode(unscaled_bytes(unscaled)).decode("ascii")


def unscaled_bytes(unscaled: int) -> bytes:
    """Kafka Connect's Decimal: Java's ``BigInteger.toByteArray()``, the fewest big-endian
    two's-complement bytes with room for the sign bit (-128 is b'\\x80', 128 is b'\\x00\\x80')."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def _decimal(mode: str, scale: int | None) -> Converter:
    if mode == "double":
        return float
    if mode == "string":
        return lambda text: str(decimal.Decimal(text))
    return _precise_decimal(scale)


def numeric_scale(type_modifier: int) -> int | None:
    """numeric(p, s)'s scale, or None for a plain ``numeric`` (variable scale)."""
    if type_modifier < 4:
        return None
    return (type_modifier - 4) & 0xFFFF


def temporal_precision(type_modifier: int) -> int:
    return 6 if type_modifier < 0 else type_modifier


def _binary(mode: str) -> Converter:
    encoders: dict[str, Callable[[bytes], str]] = {
        "bytes": lambda raw: base64.b64encode(raw).decode("ascii"),  # JSON has no bytes: base64
        "base64": lambda raw: base64.b64encode(raw).decode("ascii"),
        "base64-url-safe": lambda raw: base64.urlsafe_b64encode(raw).decode("ascii"),
        "hex": lambda raw: raw.hex(),
    }
    encode = encoders[mode]

    def convert(text: str) -> str:
        if not text.startswith("\\x"):
            raise ValueError(f"bytea not in hex output format: {text[:20]!r}")
        return encode(bytes.fromhex(text[2:]))

    return convert


_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def _date(text: str) -> int:
    if len(text) == 10:  # YYYY-MM-DD: the C parser
        return dt.date.fromisoformat(text).toordinal() - _EPOCH_ORDINAL
    if text == "infinity":
        return temporal.POSITIVE_INFINITY_DAYS
    if text == "-infinity":
        return temporal.NEGATIVE_INFINITY_DAYS
    return temporal.parse_date(text)


def _timestamp(divisor: int) -> Converter:
    positive, negative = temporal.POSITIVE_INFINITY_US // divisor, temporal.NEGATIVE_INFINITY_US // divisor

    def convert(text: str) -> int:
        if text == "infinity":
            return positive
        if text == "-infinity":
            return negative
        return temporal.parse_timestamp_us(text) // divisor

    return convert


def _timestamptz(text: str) -> str:
    # The session's TimeZone is UTC: '2024-02-29 13:37:03.5+00' is the common case, and
    # PostgreSQL already drops trailing fraction zeros.
    if text.endswith("+00") and len(text) >= 22 and text[4] == "-":
        return f"{text[:10]}T{text[11:-3]}Z"
    if text in ("infinity", "-infinity"):
        return text
    return temporal.format_iso_utc(temporal.parse_timestamp_us(text))


def _time(divisor: int) -> Converter:
    return lambda text: temporal.parse_time_us(text) // divisor


def _timetz(text: str) -> str:
    time, offset = temporal.split_offset(text)
    micros = (temporal.parse_time_us(time) - offset * 1_000_000) % temporal.US_PER_DAY
    return temporal.format_time(micros) + "Z"


def _money(mode: str, digits: int) -> Converter:
    inner = _decimal(mode, digits)

    def convert(text: str) -> Any:
        negative = text.startswith("-") or text.startswith("(")
        cleaned = "".join(ch for ch in text if ch.isdigit() or ch == ".")
        return inner(("-" if negative else "") + cleaned)

    return convert


def _bool(text: str) -> bool:
    return text == "t"


def _float(text: str) -> float:
    return float(text)  # 'NaN', 'Infinity' parse; orjson writes them as null


_FIXED: dict[str, Converter] = {
    **dict.fromkeys(("int2", "int4", "int8", "oid", "xid"), int),
    "float4": _float,
    "float8": _float,
    "bool": _bool,
    "date": _date,
    "timestamptz": _timestamptz,
    "timetz": _timetz,
}


def _temporal(name: str, type_modifier: int, modes: ValueModes) -> Converter:
    # adaptive_time_microseconds differs from adaptive for time only: a timestamp(0..3) stays in
    # milliseconds there (JdbcValueConverters' Types.TIMESTAMP branch is the same for both).
    micro = modes.time_precision != "connect" and (
        temporal_precision(type_modifier) > 3
        or (name == "time" and modes.time_precision == "adaptive_time_microseconds")
    )
    divisor = 1 if micro else 1000
    return _timestamp(divisor) if name == "timestamp" else _time(divisor)


_BY_MODE: dict[str, Callable[[int, ValueModes], Converter]] = {
    "numeric": lambda typmod, modes: _decimal(modes.decimal, numeric_scale(typmod)),
    "money": lambda typmod, modes: _money(modes.decimal, modes.money_fraction_digits),
    "bytea": lambda typmod, modes: _binary(modes.binary),
    "timestamp": lambda typmod, modes: _temporal("timestamp", typmod, modes),
    "time": lambda typmod, modes: _temporal("time", typmod, modes),
    "interval": lambda typmod, modes: temporal.interval_micros if modes.interval == "numeric" else str,
}


def _scalar(info: TypeInfo, type_modifier: int, modes: ValueModes) -> Converter | None:
    fixed = _FIXED.get(info.name)
    if fixed is not None:
        return fixed
    factory = _BY_MODE.get(info.name)
    return factory(type_modifier, modes) if factory else None


def converter_for(oid: int, type_modifier: int, modes: ValueModes, lookup: Callable[[int], TypeInfo]) -> Converter:
    """The converter of one column. ``lookup`` reads pg_type (domains, enums, arrays)."""
    info = lookup(oid)
    if info.kind == "d" and info.base_oid:  # a domain: its base type decides
        return converter_for(info.base_oid, type_modifier, modes, lookup)
    if info.category == "A" and info.element_oid:
        element = converter_for(info.element_oid, -1, modes, lookup)
        return lambda text: _convert_array(parse_array(text), element)
    return _scalar(info, type_modifier, modes) or str  # text-like, enums, uuid, json, inet, ...


def unavailable_value(oid: int, modes: ValueModes, lookup: Callable[[int], TypeInfo]) -> Any:
    """Debezium's placeholder for an unchanged TOASTed value, in the column's representation."""
    info = lookup(oid)
    if info.category == "A":
        return [UNAVAILABLE_VALUE]
    if info.name == "bytea":
        return _binary(modes.binary)("\\x" + UNAVAILABLE_VALUE.encode().hex())
    return UNAVAILABLE_VALUE


def _convert_array(values: list[Any], element: Converter) -> list[Any]:
    return [None if v is None else _convert_array(v, element) if isinstance(v, list) else element(v) for v in values]


def parse_array(text: str) -> list[Any]:
    """PostgreSQL's array text ``{1,"a b",NULL,{2,3}}`` -> nested lists of str/None."""
    if text.startswith("["):  # explicit bounds: '[0:1]={1,2}'
        text = text[text.index("=") + 1 :]
    value, end = _parse_array_at(text, 0)
    if end != len(text):
        raise ValueError(f"trailing characters after array: {text[end : end + 20]!r}")
    return value


def _parse_array_at(text: str, pos: int) -> tuple[list[Any], int]:
    if pos >= len(text) or text[pos] != "{":
        raise ValueError(f"array must start with '{{' at {pos}: {text[:40]!r}")
    items: list[Any] = []
    pos += 1
    if pos < len(text) and text[pos] == "}":
        return items, pos + 1
    while pos < len(text):
        item, pos = _parse_element(text, pos)
        items.append(item)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            return items, pos + 1
        elif pos < len(text):
            raise ValueError(f"unexpected {text[pos]!r} at {pos} in array {text[:40]!r}")
    raise ValueError(f"unterminated array: {text[:40]!r}")


def _parse_element(text: str, pos: int) -> tuple[Any, int]:
    if text[pos] == "{":
        return _parse_array_at(text, pos)
    if text[pos] == '"':
        chars, pos = [], pos + 1
        while pos < len(text) and text[pos] != '"':
            if text[pos] == "\\":
                pos += 1
            if pos < len(text):
                chars.append(text[pos])
            pos += 1
        return "".join(chars), pos + 1
    end = pos
    while end < len(text) and text[end] not in ",}":
        end += 1
    raw = text[pos:end]
    return (None if raw == "NULL" else raw), end
