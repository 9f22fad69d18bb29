"""PostgreSQL column values -> Debezium's JSON representation.

Values arrive as PostgreSQL text (pgoutput's tuple data, or COPY text in snapshots), produced
under the session settings in :data:`SESSION_OPTIONS`. One converter is chosen per column when
a table is first seen, so the per-value work is a single call.

Modes are Debezium's: ``decimal.handling.mode`` (precise | double | string),
``time.precision.mode`` (adaptive | adaptive_time_microseconds | connect),
``binary.handling.mode`` (bytes | base64 | base64-url-safe | hex),
``interval.handling.mode`` (numeric | string), ``hstore.handling.mode`` (json | map) and
``include.unknown.datatypes``.

A type Debezium has no schema for gets no converter (:func:`converter_for` returns None): such a
column is left out of the events, as Debezium leaves it out, unless ``include.unknown.datatypes``
is on; then its value is its text's bytes, in the binary mode.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.sources.postgres import bits, geometry, hstore, numeric, temporal
from airflow_cdc.engine.sources.postgres.numeric import numeric_scale, unscaled_bytes

__all__ = ["numeric_scale", "unscaled_bytes"]  # re-exported: their home used to be here

log = logging.getLogger(__name__)

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
    hstore: str = "json"
    include_unknown: bool = False


def temporal_precision(type_modifier: int) -> int:
    return 6 if type_modifier < 0 else type_modifier


_BINARY_ENCODERS: dict[str, Callable[[bytes], str]] = {
    "bytes": lambda raw: base64.b64encode(raw).decode("ascii"),  # JSON has no bytes: base64
    "base64": lambda raw: base64.b64encode(raw).decode("ascii"),
    "base64-url-safe": lambda raw: base64.urlsafe_b64encode(raw).decode("ascii"),
    "hex": lambda raw: raw.hex(),
}


def binary_encoder(mode: str) -> Callable[[bytes], str]:
    """Bytes as ``binary.handling.mode`` writes them in JSON (bytea, message contents)."""
    return _BINARY_ENCODERS[mode]


def _binary(mode: str) -> Converter:
    encode = _BINARY_ENCODERS[mode]

    def convert(text: str) -> str:
        if not text.startswith("\\x"):
            raise ValueError(f"bytea not in hex output format: {text[:20]!r}")
        return encode(bytes.fromhex(text[2:]))

    return convert


def _text_bytes(mode: str) -> Converter:
    """A type Debezium does not know, with include.unknown.datatypes: its text's UTF-8 bytes."""
    encode = _BINARY_ENCODERS[mode]
    return lambda text: encode(text.encode())


_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_DATE_INFINITIES = {"infinity": temporal.POSITIVE_INFINITY_DAYS, "-infinity": temporal.NEGATIVE_INFINITY_DAYS}


def _date(text: str) -> int:
    if len(text) == 10:  # YYYY-MM-DD: the C parser
        return dt.date.fromisoformat(text).toordinal() - _EPOCH_ORDINAL
    infinity = _DATE_INFINITIES.get(text)
    return infinity if infinity is not None else temporal.parse_date(text)


def _timestamp(micro: bool) -> Converter:
    if micro:
        divisor = 1
        positive, negative = temporal.POSITIVE_INFINITY_MICRO_TIMESTAMP, temporal.NEGATIVE_INFINITY_MICRO_TIMESTAMP
    else:
        divisor = 1000
        positive, negative = temporal.POSITIVE_INFINITY_US, temporal.NEGATIVE_INFINITY_US

    def convert(text: str) -> int:
        if text == "infinity":
            return positive
        if text == "-infinity":
            return negative
        return temporal.parse_timestamp_us(text) // divisor

    return convert


def _timestamptz(type_modifier: int) -> Converter:
    """ZonedTimestamp with the fraction padded to the column's precision (none for 0)."""
    digits = temporal_precision(type_modifier)
    width = 9 + digits  # 'HH:MM:SS.' and the digits

    def convert(text: str) -> str:
        # The session's TimeZone is UTC: '2024-02-29 13:37:03.5+00' is the common case, and
        # PostgreSQL drops trailing fraction zeros, which the precision brings back.
        if text.endswith("+00") and len(text) >= 22 and text[4] == "-":
            clock = text[11:-3]
            if not digits:
                return f"{text[:10]}T{clock}Z"
            if len(clock) == 8:
                clock += "."
            return f"{text[:10]}T{clock}{'0' * (width - len(clock))}Z"
        if text in ("infinity", "-infinity"):
            return text
        return temporal.format_iso_utc(temporal.parse_timestamp_us(text), digits)

    return convert


def _time(divisor: int) -> Converter:
    return lambda text: temporal.parse_time_us(text) // divisor


def _timetz(text: str) -> str:
    time, offset = temporal.split_offset(text)
    micros = (temporal.parse_time_us(time) - offset * 1_000_000) % temporal.US_PER_DAY
    return temporal.format_time(micros) + "Z"


def _bool(text: str) -> bool:
    return text == "t"


_FIXED: dict[str, Converter] = {
    **dict.fromkeys(("int2", "int4", "int8", "oid"), int),
    "float4": numeric.java_double,
    "float8": numeric.java_double,
    "bool": _bool,
    "date": _date,
    "timetz": _timetz,
    **geometry.CONVERTERS,
}


def _temporal(name: str, type_modifier: int, modes: ValueModes) -> Converter:
    # adaptive_time_microseconds differs from adaptive for time only: a timestamp(0..3) stays in
    # milliseconds there (JdbcValueConverters' Types.TIMESTAMP branch is the same for both).
    micro = modes.time_precision != "connect" and (
        temporal_precision(type_modifier) > 3
        or (name == "time" and modes.time_precision == "adaptive_time_microseconds")
    )
    return _timestamp(micro) if name == "timestamp" else _time(1 if micro else 1000)


_BY_MODE: dict[str, Callable[[int, ValueModes], Converter]] = {
    "numeric": lambda typmod, modes: numeric.decimal(modes.decimal, numeric_scale(typmod)),
    "money": lambda typmod, modes: numeric.money(modes.decimal, modes.money_fraction_digits),
    "bytea": lambda typmod, modes: _binary(modes.binary),
    "timestamp": lambda typmod, modes: _temporal("timestamp", typmod, modes),
    "time": lambda typmod, modes: _temporal("time", typmod, modes),
    "timestamptz": lambda typmod, modes: _timestamptz(typmod),
    "interval": lambda typmod, modes: (
        temporal.interval_micros if modes.interval == "numeric" else temporal.interval_iso_string
    ),
    "bit": lambda typmod, modes: bits.converter(typmod),
    "varbit": lambda typmod, modes: bits.converter(typmod),
    "hstore": lambda typmod, modes: hstore.converter(modes.hstore),
}

#: Types whose text is Debezium's value (a string schema: text-likes, json, uuid, network
#: addresses, the built-in ranges, tsvector, and the extension types it names). ``name`` is one
#: in snapshots; Debezium's streaming emits null for it, we keep the value (README).
TEXT_TYPES = frozenset(
    (
        "text", "varchar", "bpchar", "char", "name", "xml", "json", "jsonb", "uuid", "inet", "cidr",
        "macaddr", "macaddr8", "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
        "tsvector", "citext", "ltree", "isbn",
        # Known to Debezium with values of their own that are not emulated yet (README): the
        # text is closer than leaving them out.
        "geometry", "geography", "vector", "halfvec", "sparsevec",
    )
)  # fmt: skip

#: Arrays Debezium has no schema for, whatever include.unknown.datatypes says
#: (PostgresValueConverter.schemaBuilder: "These array types still need to be implemented").
_NO_ARRAY_SCHEMA = frozenset(("money", "name", "interval", "varbit", "xml", "point", "refcursor"))


def _scalar(info: TypeInfo, type_modifier: int, modes: ValueModes) -> Converter | None:
    fixed = _FIXED.get(info.name)
    if fixed is not None:
        return fixed
    factory = _BY_MODE.get(info.name)
    if factory is not None:
        return factory(type_modifier, modes)
    if info.name in TEXT_TYPES or info.kind == "e":
        return str
    return None


def converter_for(
    oid: int,
    type_modifier: int,
    modes: ValueModes,
    lookup: Callable[[int], TypeInfo],
    *,
    column: str | None = None,
) -> Converter | None:
    """The converter of one column, or None for a column Debezium leaves out (logged once per
    ``column``, its qualified name). ``lookup`` reads pg_type (domains, enums, arrays)."""
    info = lookup(oid)
    if info.kind == "d" and info.base_oid:  # a domain: its base type decides
        return converter_for(info.base_oid, type_modifier, modes, lookup, column=column)
    if info.category == "A" and info.element_oid:
        converter = _array(lookup(info.element_oid), type_modifier, modes)
    else:
        converter = _scalar(info, type_modifier, modes)
        if converter is None and modes.include_unknown:
            converter = _text_bytes(modes.binary)
    if converter is None:
        _log_left_out(column, info.name)
    return converter


_LEFT_OUT_LOGGED: set[tuple[str | None, str]] = set()


def _log_left_out(column: str | None, type_name: str) -> None:
    if (column, type_name) in _LEFT_OUT_LOGGED:
        return
    _LEFT_OUT_LOGGED.add((column, type_name))
    log.info(
        "%s of type %s is left out of the change events, as Debezium leaves it out: it has no schema for the type%s",
        f"Column {column}" if column else "A column",
        type_name,
        ""
        if type_name.startswith("_") and type_name[1:] in _NO_ARRAY_SCHEMA
        else "; include.unknown.datatypes=true includes it as its text's bytes",
    )


def _array(element: TypeInfo, type_modifier: int, modes: ValueModes) -> Converter | None:
    """An array's elements take the column's typmod (numeric(6,2)[] elements have scale 2)."""
    if element.name in _NO_ARRAY_SCHEMA:
        return None
    if element.name == "bit":
        return _always_null  # Debezium gives bit[] the schema of a bit: every value fails, null
    # A domain element has no schema in Debezium (it cannot resolve the element's type).
    convert = None if element.kind == "d" else _scalar(element, type_modifier, modes)
    if convert is None:  # an element without a schema: the whole column is unknown
        if not modes.include_unknown:
            return None
        convert = _text_bytes(modes.binary)
    delimiter = ";" if element.name == "box" else ","
    if element.name == "numeric":
        return lambda text: _numeric_array(parse_array(text), convert)
    element_convert = convert
    return lambda text: _convert_array(parse_array(text, delimiter), element_convert)


def _numeric_array(values: list[Any], element: Converter) -> list[Any] | None:
    return None if numeric.has_special(values) else _convert_array(values, element)


def _always_null(text: str) -> None:
    return None


def unavailable_value(oid: int, modes: ValueModes, lookup: Callable[[int], TypeInfo]) -> Any:
    """Debezium's placeholder for an unchanged TOASTed value, in the column's representation:
    bytea's is the placeholder's bytes in ``bytes`` mode, its text in ``hex`` mode and null in
    the base64 modes (PostgresValueConverter overrides only the first two)."""
    info = lookup(oid)
    if info.category == "A":
        return [UNAVAILABLE_VALUE]
    if info.name == "bytea":
        if modes.binary == "bytes":
            return _binary(modes.binary)("\\x" + UNAVAILABLE_VALUE.encode().hex())
        return UNAVAILABLE_VALUE if modes.binary == "hex" else None
    return UNAVAILABLE_VALUE


def _convert_array(values: list[Any], element: Converter) -> list[Any]:
    return [None if v is None else _convert_array(v, element) if isinstance(v, list) else element(v) for v in values]


def parse_array(text: str, delimiter: str = ",") -> list[Any]:
    """PostgreSQL's array text ``{1,"a b",NULL,{2,3}}`` -> nested lists of str/None (``box``
    arrays separate their elements with ';')."""
    if text.startswith("["):  # explicit bounds: '[0:1]={1,2}'
        text = text[text.index("=") + 1 :]
    value, end = _parse_array_at(text, 0, delimiter)
    if end != len(text):
        raise ValueError(f"trailing characters after array: {text[end : end + 20]!r}")
    return value


def _parse_array_at(text: str, pos: int, delimiter: str) -> tuple[list[Any], int]:
    if pos >= len(text) or text[pos] != "{":
        raise ValueError(f"array must start with '{{' at {pos}: {text[:40]!r}")
    items: list[Any] = []
    pos += 1
    if pos < len(text) and text[pos] == "}":
        return items, pos + 1
    while pos < len(text):
        item, pos = _parse_element(text, pos, delimiter)
        items.append(item)
        if pos < len(text) and text[pos] == delimiter:
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            return items, pos + 1
        elif pos < len(text):
            raise ValueError(f"unexpected {text[pos]!r} at {pos} in array {text[:40]!r}")
    raise ValueError(f"unterminated array: {text[:40]!r}")


def _parse_element(text: str, pos: int, delimiter: str) -> tuple[Any, int]:
    if text[pos] == "{":
        return _parse_array_at(text, pos, delimiter)
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
    while end < len(text) and text[end] != delimiter and text[end] != "}":
        end += 1
    raw = text[pos:end]
    return (None if raw == "NULL" else raw), end
