"""The binlog's value formats, one reader per column: ``read(data, pos) -> (value, next pos)``.

MySQL's own definitions are the reference (``sql/log_event.cc``, ``mysys/my_time.cc``,
``strings/decimal.cc``); the values are those mysql-replication yields with full row metadata,
except where it misreads the format (a negative ``time`` with a fraction, a ``timestamp`` past
2038 on MariaDB 11.5+, a negative pre-5.6 ``time``): here they are read as the server wrote them.
"""

from __future__ import annotations

import codecs
import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from pymysql.charset import charset_by_name

from airflow_cdc.engine.sources.mysql.temporal import ZERO_DATE
from airflow_cdc.engine.sources.mysql.types import MySqlColumn

Read = Callable[[bytes, int], tuple[Any, int]]


class T:
    """The binlog's column types (MySQL's ``enum_field_types``)."""

    DECIMAL, TINY, SHORT, LONG, FLOAT, DOUBLE, NULL, TIMESTAMP, LONGLONG, INT24 = range(10)
    DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT, TIMESTAMP2, DATETIME2, TIME2 = range(10, 20)
    JSON, NEWDECIMAL, ENUM, SET, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, VAR_STRING, STRING, GEOMETRY = range(245, 256)


_TYPE_NAMES = {value: name.lower() for name, value in vars(T).items() if name.isupper()}

GEOMETRY_TYPES = (
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
    "geometrycollection", "geomcollection",
)  # fmt: skip


def type_name(binlog_type: int) -> str:
    return _TYPE_NAMES.get(binlog_type, f"type {binlog_type}")


# --- text ----------------------------------------------------------------------------------------

#: The codec of MySQL's and MariaDB's latin1: cp1252, with its five undefined bytes (0x81, 0x8D,
#: 0x8F, 0x90, 0x9D) mapped to the C1 controls of the same number, as the server converts them
#: (``SELECT CONVERT(x'81' USING utf8mb4)`` is U+0081): the stream reads what a SELECT reads,
#: where Python's strict cp1252 raised UnicodeDecodeError on those bytes.
MYSQL_LATIN1 = "airflow_cdc_mysql_latin1"


def _latin1_table() -> str:
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(byte))
    return "".join(chars)


_LATIN1_DECODING = _latin1_table()
_LATIN1_ENCODING = codecs.charmap_build(_LATIN1_DECODING)


def _find_latin1(name: str) -> codecs.CodecInfo | None:
    if name != MYSQL_LATIN1:
        return None
    return codecs.CodecInfo(
        name=MYSQL_LATIN1,
        encode=lambda text, errors="strict": codecs.charmap_encode(text, errors, _LATIN1_ENCODING),
        decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, _LATIN1_DECODING),
    )


codecs.register(_find_latin1)

#: MySQL character sets whose Python codec is not pymysql's name for them (the UCS-2 and UTF-16/32
#: families are big-endian in MySQL; latin1 is cp1252 with the server's five extra bytes).
_CODECS = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "ascii": "ascii", "binary": None,
    "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be",
}  # fmt: skip


def codec(charset: str | None) -> str | None:
    """The Python codec of a MySQL character set; None for ``binary`` and for a character set
    Python has no codec for (its values stay bytes)."""
    name = (charset or "utf8mb4").lower()
    if name == "latin1":
        return MYSQL_LATIN1
    if name in _CODECS:
        return _CODECS[name]
    known = charset_by_name(name)
    candidate = known.encoding if known is not None else name
    try:
        return codecs.lookup(candidate).name
    except LookupError:
        return None


# --- numbers -------------------------------------------------------------------------------------

#: Bytes of a decimal's leftover digits (MySQL's ``dig2bytes``).
_DIGIT_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_layout(precision: int, scale: int) -> tuple[int, int, int, int, int]:
    """(leftover integral digits' bytes, full integral groups, full fraction groups, leftover
    fraction digits, their bytes) of decimal(precision, scale)'s binary form."""
    integral = precision - scale
    return (_DIGIT_BYTES[integral % 9], integral // 9, scale // 9, scale % 9, _DIGIT_BYTES[scale % 9])


def decimal(data: bytes, pos: int, layout: tuple[int, int, int, int, int]) -> tuple[Decimal, int]:
    """MySQL's binary decimal: groups of 9 digits in 4 big-endian bytes, the leftover digits in
    fewer; the first bit is the sign (set: positive), a negative value has every bit inverted.
    The text is built as mysql-replication builds it, so the Decimal is the same (``-0.00``)."""
    head, integral_groups, fraction_groups, tail_digits, tail = layout
    size = head + 4 * (integral_groups + fraction_groups) + tail
    raw = bytearray(data[pos : pos + size])
    if len(raw) != size or not size:
        raise IndexError("a decimal runs past the event's end")
    negative = not raw[0] & 0x80
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(byte ^ 0xFF for byte in raw)
    parts = ["-"] if negative else []
    at = 0
    if head:
        parts.append(str(int.from_bytes(raw[:head], "big")))
        at = head
    for _ in range(integral_groups):
        parts.append(f"{int.from_bytes(raw[at : at + 4], 'big'):09d}")
        at += 4
    parts.append(".")
    for _ in range(fraction_groups):
        parts.append(f"{int.from_bytes(raw[at : at + 4], 'big'):09d}")
        at += 4
    if tail:
        parts.append(f"{int.from_bytes(raw[at : at + tail], 'big'):0{tail_digits}d}")
    return Decimal("".join(parts)), pos + size


def _int24(signed: bool) -> Read:
    def read(data: bytes, pos: int) -> tuple[int, int]:
        _need(data, pos + 3)
        return int.from_bytes(data[pos : pos + 3], "little", signed=signed), pos + 3

    return read


def _year(data: bytes, pos: int) -> tuple[int, int]:
    return data[pos] + 1900, pos + 1  # 0 (the year 0000) reads as 1900, as both libraries read it


def _bit(bits: int) -> Read:
    """bit(n): ``(n + 7) // 8`` big-endian bytes, as '0'/'1' text of n digits."""
    size, mask = (bits + 7) // 8, (1 << bits) - 1

    def read(data: bytes, pos: int) -> tuple[str, int]:
        _need(data, pos + size)
        return format(int.from_bytes(data[pos : pos + size], "big") & mask, f"0{bits}b"), pos + size

    return read


def enum_reader(size: int, options: Sequence[str]) -> Read:
    """ENUM: its member's number (1-based; 0 is the error value '') in ``size`` bytes."""
    members = ("", *options)

    def read(data: bytes, pos: int) -> tuple[str, int]:
        _need(data, pos + size)
        number = int.from_bytes(data[pos : pos + size], "little")
        if number >= len(members):
            raise ValueError(f"ENUM member {number} is not in the definition ({len(options)} members)")
        return members[number], pos + size

    return read


def set_reader(size: int, options: Sequence[str]) -> Read:
    """SET: a bit per member, in ``size`` bytes; the members as a Python set (empty for '')."""

    def read(data: bytes, pos: int) -> tuple[set[str], int]:
        _need(data, pos + size)
        bits = int.from_bytes(data[pos : pos + size], "little")
        if bits >> len(options):
            raise ValueError(f"SET bits {bits:b} name members the definition lacks ({len(options)} members)")
        return {option for index, option in enumerate(options) if bits >> index & 1}, pos + size

    return read


def _length_prefixed(prefix: int) -> Read:
    def read(data: bytes, pos: int) -> tuple[bytes, int]:
        length = int.from_bytes(data[pos : pos + prefix], "little")
        end = pos + prefix + length
        _need(data, end)
        return data[pos + prefix : end], end

    return read


def _json(prefix: int) -> Read:
    """MySQL's binary JSON (MariaDB's json is text), parsed by mysql-replication's parser: the
    converter writes it as Debezium does. An empty value is None, as the library gives it."""
    from pymysqlreplication.json_binary import parse_json

    raw = _length_prefixed(prefix)

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        value, pos = raw(data, pos)
        return (parse_json(value[0], value[1:]) if value else None), pos

    return read


# --- dates and times -----------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)


def _fraction(data: bytes, pos: int, fsp: int) -> tuple[int, int]:
    """Microseconds of a temporal2 value's fraction: ``(fsp + 1) // 2`` big-endian bytes."""
    size = (fsp + 1) // 2
    if not size:
        return 0, pos
    _need(data, pos + size)
    raw = int.from_bytes(data[pos : pos + size], "big")
    return raw * (10_000, 100, 1)[size - 1], pos + size


def _date_of(year: int, month: int, day: int) -> dt.date | object:
    if not (year and month and day):
        return ZERO_DATE
    return dt.date(year, month, day)


def _date(data: bytes, pos: int) -> tuple[Any, int]:
    """date: 15 bits year, 4 month, 5 day, little-endian."""
    _need(data, pos + 3)
    packed = int.from_bytes(data[pos : pos + 3], "little")
    try:
        return _date_of(packed >> 9, (packed >> 5) & 0xF, packed & 0x1F), pos + 3
    except ValueError:  # an invalid date (2021-02-30 with ALLOW_INVALID_DATES): the server's too
        return ZERO_DATE, pos + 3


def _datetime_of(year: int, month: int, day: int, hour: int, minute: int, second: int, micros: int) -> Any:
    if not (year and month and day):
        return ZERO_DATE
    try:
        return dt.datetime(year, month, day, hour, minute, second, micros)
    except ValueError:
        return ZERO_DATE


def _datetime2(fsp: int) -> Read:
    """datetime(n): 40 bits offset by 2^39 (17 bits year*13+month, 5 day, 5 hour, 6 minute, 6
    second), then the fraction."""

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        _need(data, pos + 5)
        packed = int.from_bytes(data[pos : pos + 5], "big") - 0x8000000000
        micros, end = _fraction(data, pos + 5, fsp)
        ymd, hms = packed >> 17, packed % (1 << 17)
        year_month = ymd >> 5
        value = _datetime_of(year_month // 13, year_month % 13, ymd % 32, hms >> 12, (hms >> 6) % 64, hms % 64, micros)
        return value, end

    return read


def _timestamp2(fsp: int) -> Read:
    """timestamp(n): seconds since the epoch, 4 big-endian unsigned bytes, then the fraction; a
    naive datetime in UTC (0 is the zero timestamp, which reads as the epoch)."""

    def read(data: bytes, pos: int) -> tuple[dt.datetime, int]:
        _need(data, pos + 4)
        seconds = int.from_bytes(data[pos : pos + 4], "big")
        micros, end = _fraction(data, pos + 4, fsp)
        return _EPOCH + dt.timedelta(seconds=seconds, microseconds=micros), end

    return read


def _time2(fsp: int) -> Read:
    """time(n): MySQL's packed time (``my_time_packed_from_binary``): 24 bits offset by 2^23
    (1 sign, 1 unused, 10 hour, 6 minute, 6 second) and the fraction, one signed number."""
    size = (fsp + 1) // 2

    def read(data: bytes, pos: int) -> tuple[dt.timedelta, int]:
        _need(data, pos + 3 + size)
        if size == 3:
            packed = int.from_bytes(data[pos : pos + 6], "big") - 0x800000000000
        else:
            whole = int.from_bytes(data[pos : pos + 3], "big") - 0x800000
            fraction = int.from_bytes(data[pos + 3 : pos + 3 + size], "big") if size else 0
            if whole < 0 and fraction:
                whole, fraction = whole + 1, fraction - (1 << (8 * size))
            packed = (whole << 24) + fraction * (10_000, 100)[size - 1] if size else whole << 24
        negative, packed = packed < 0, abs(packed)
        hms, micros = packed >> 24, packed % (1 << 24)
        value = dt.timedelta(hours=(hms >> 12) % 1024, minutes=(hms >> 6) % 64, seconds=hms % 64, microseconds=micros)
        return (-value if negative else value), pos + 3 + size

    return read


def _old_time(data: bytes, pos: int) -> tuple[dt.timedelta, int]:
    """The pre-5.6 time: a signed 3-byte integer, HHMMSS in decimal digits."""
    _need(data, pos + 3)
    number = int.from_bytes(data[pos : pos + 3], "little", signed=True)
    negative, number = number < 0, abs(number)
    value = dt.timedelta(hours=number // 10000, minutes=number // 100 % 100, seconds=number % 100)
    return (-value if negative else value), pos + 3


def _old_datetime(data: bytes, pos: int) -> tuple[Any, int]:
    """The pre-5.6 datetime: an 8-byte integer, YYYYMMDDhhmmss in decimal digits."""
    _need(data, pos + 8)
    number = int.from_bytes(data[pos : pos + 8], "little")
    day, time = divmod(number, 1_000_000)
    value = _datetime_of(day // 10000, day // 100 % 100, day % 100, time // 10000, time // 100 % 100, time % 100, 0)
    return value, pos + 8


def _old_timestamp(data: bytes, pos: int) -> tuple[dt.datetime, int]:
    _need(data, pos + 4)
    return _EPOCH + dt.timedelta(seconds=int.from_bytes(data[pos : pos + 4], "little")), pos + 4


def reader(binlog: Any, column: MySqlColumn) -> Read:
    """The reader of a column of a rarer binlog type; ValueError for a type the binlog does not
    write for a column."""
    kind = binlog.type
    simple: dict[int, Read] = {
        T.YEAR: _year,
        T.DATE: _date,
        T.NEWDATE: _date,
        T.TIME: _old_time,
        T.DATETIME: _old_datetime,
        T.TIMESTAMP: _old_timestamp,
    }
    if kind in simple:
        return simple[kind]
    if kind == T.INT24:
        return _int24(not column.unsigned)
    if kind == T.DATETIME2:
        return _datetime2(binlog.fsp)
    if kind == T.TIMESTAMP2:
        return _timestamp2(binlog.fsp)
    if kind == T.TIME2:
        return _time2(binlog.fsp)
    if kind == T.BIT:
        return _bit(binlog.bits)
    if kind == T.GEOMETRY:
        return _length_prefixed(binlog.length_size)
    if kind == T.JSON:
        return _json(binlog.length_size)
    raise ValueError(f"the binlog type {type_name(kind)} is not one a row event can hold")


def _need(data: bytes, end: int) -> None:
    if end > len(data):
        raise IndexError("a value runs past the event's end")
