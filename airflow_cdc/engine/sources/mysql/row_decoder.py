"""A faster decoder of row events, for tables of common column types; mysql-replication decodes
the rest.

Why: decoding rows is most of what streaming costs, and mysql-replication decodes each value
through several method calls on a packet wrapper (about 20k rows/s of a five-column table here).
This decoder reads the event's bytes directly, one precompiled reader list per table (about
3-4 times faster), and yields exactly the values the library yields, in column order.

Sans-IO: :func:`compile_columns` turns a table map's columns into a :class:`RowDecoder` (None
when a column is of a type this module does not decode), and :meth:`RowDecoder.decode` turns an
event's row bytes into value tuples (None when a value is one the library would give with a
``none_sources`` reason other than NULL - a zero date - or when the bytes do not decode). None
always means "let the library decode this event": it then yields its values or raises its error,
as it would have without this module.

Types decoded: the integers (signed and unsigned), float, double, year, decimal, char and
varchar (decoded with the codec the library would use), date, datetime(n), timestamp(n). Every
other type (text and blob, json, enum, set, bit, time, geometry, the pre-5.6 temporal types)
leaves its table to the library.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

#: Bytes of a decimal's leftover digits (MySQL's ``dig2bytes``).
_DIGIT_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_EPOCH = dt.datetime(1970, 1, 1)
_SECOND = dt.timedelta(seconds=1)

# Column kinds: _FIXED is a struct (the integers but int24, float, double).
_FIXED, _STR, _DEC, _TS2, _DT2, _DATE, _INT24, _YEAR = range(8)

_LITTLE = {
    (FIELD_TYPE.TINY, False): struct.Struct("<b"),
    (FIELD_TYPE.TINY, True): struct.Struct("<B"),
    (FIELD_TYPE.SHORT, False): struct.Struct("<h"),
    (FIELD_TYPE.SHORT, True): struct.Struct("<H"),
    (FIELD_TYPE.LONG, False): struct.Struct("<i"),
    (FIELD_TYPE.LONG, True): struct.Struct("<I"),
    (FIELD_TYPE.LONGLONG, False): struct.Struct("<q"),
    (FIELD_TYPE.LONGLONG, True): struct.Struct("<Q"),
}
_FLOATS = {FIELD_TYPE.FLOAT: struct.Struct("<f"), FIELD_TYPE.DOUBLE: struct.Struct("<d")}


class _Undecodable(Exception):
    """This event's values are the library's to give (a zero date, bytes that do not decode)."""


#: One column's reader: (kind, struct or None, size or codec, extra).
_Reader = tuple[int, Any, Any, Any]


class EventRows:
    """The rows of mysql-replication's row events, decoded here where :class:`RowDecoder` can:
    ``rows(event)`` is ``(column names, rows)``, or None to let the library decode the event.

    Reads the library's event without consuming it (so that its own decoding still works): the
    bytes after the column bitmaps are the rest of the event's packet, ``event_size -
    packet.read_bytes`` of them (the bound of the library's own row loop). Only the plain case
    is taken: a complete event with every column present (``binlog_row_image=FULL``), every
    column named in the table map (``binlog_row_metadata=FULL``), and no partial JSON update.
    """

    def __init__(self, row_event_module: Any) -> None:
        self._charset_to_encoding = row_event_module.RowsEvent.charset_to_encoding
        self._update = row_event_module.UpdateRowsEvent
        #: Per table id: the table map's column list (the library makes a new one per table map
        #: event) and its decoder.
        self._decoders: dict[int, tuple[Any, RowDecoder | None]] = {}

    def rows(self, event: Any) -> tuple[tuple[str, ...], list[tuple[tuple[Any, ...], ...]]] | None:
        decoder = self._decoder(event)
        if decoder is None or not event.complete or event.event_type == _PARTIAL_UPDATE_ROWS_EVENT:
            return None
        update = type(event) is self._update
        # Every column present, no padding bit set (the library sizes the null bitmaps by the
        # bits set): exactly the bitmap of all the table map's columns.
        full = decoder.full_bitmap
        if event.number_of_columns != len(decoder.names) or event.columns_present_bitmap != full:
            return None
        if update and event.columns_present_bitmap2 != full:
            return None
        data = _rest_of_event(event)
        if data is None:
            return None
        rows = decoder.decode(data, 2 if update else 1)
        return None if rows is None else (decoder.names, rows)

    def _decoder(self, event: Any) -> RowDecoder | None:
        columns = event.columns
        cached = self._decoders.get(event.table_id)
        if cached is None or cached[0] is not columns:
            if len(self._decoders) > 1024:  # table ids come and go over months of streaming
                self._decoders.clear()
            cached = self._decoders[event.table_id] = (columns, compile_columns(columns, self._charset_to_encoding))
        return cached[1]


#: mysql-replication's ``BINLOG.PARTIAL_UPDATE_ROWS_EVENT`` (MySQL 8's partial JSON updates).
_PARTIAL_UPDATE_ROWS_EVENT = 0x27


def _rest_of_event(event: Any) -> bytes | None:
    wrapper = event.packet  # the library's BinLogPacketWrapper over PyMySQL's packet
    if getattr(wrapper, "_BinLogPacketWrapper__data_buffer", b"?"):  # bytes pushed back: not plain
        return None
    packet = wrapper.packet
    data, start = getattr(packet, "_data", None), getattr(packet, "_position", None)
    if not isinstance(data, bytes) or not isinstance(start, int):
        return None
    size = event.event_size - wrapper.read_bytes
    rest = data[start : start + size]
    return rest if len(rest) == size else None


class RowDecoder:
    """The rows of one table's row events (its columns as one table map describes them)."""

    def __init__(self, readers: Sequence[_Reader], names: Sequence[str] = ()) -> None:
        self._readers = tuple(readers)
        self._null_bytes = (len(self._readers) + 7) // 8
        self.names = tuple(names)
        #: The columns-present bitmap of an event that has every column.
        self.full_bitmap = ((1 << len(self._readers)) - 1).to_bytes(self._null_bytes, "little")

    def decode(self, data: bytes, images: int) -> list[tuple[tuple[Any, ...], ...]] | None:
        """Every row of ``data`` (the event's bytes after its column bitmaps): ``images`` value
        tuples each (1 for a write or delete, 2 - before, after - for an update). None: leave
        the event to the library."""
        try:
            return self._decode(data, images)
        except (_Undecodable, ValueError, IndexError, UnicodeDecodeError, struct.error):
            return None

    def _decode(self, data: bytes, images: int) -> list[tuple[tuple[Any, ...], ...]]:
        rows: list[tuple[tuple[Any, ...], ...]] = []
        pos, end, nulls_size = 0, len(data), self._null_bytes
        while pos < end:
            row = []
            for _ in range(images):
                nulls = data[pos : pos + nulls_size]
                pos += nulls_size
                values, pos = self._values(data, pos, nulls)
                row.append(values)
            rows.append(tuple(row))
        if pos != end:
            raise _Undecodable
        return rows

    def _values(self, data: bytes, pos: int, nulls: bytes) -> tuple[tuple[Any, ...], int]:
        # The common kinds inline (this loop is the stream's hottest), the others by a call.
        values: list[Any] = []
        append = values.append
        for index, (kind, unpack, size, extra) in enumerate(self._readers):
            if nulls[index >> 3] & (1 << (index & 7)):
                append(None)
            elif kind == _FIXED:
                append(unpack(data, pos)[0])
                pos += size
            elif kind == _STR:
                if size == 1:
                    length = data[pos]
                    pos += 1
                else:
                    length = data[pos] | data[pos + 1] << 8
                    pos += 2
                append(data[pos : pos + length].decode(extra))
                pos += length
            elif kind == _DEC:
                number, pos = _decimal(data, pos, extra)
                append(number)
            else:
                value, pos = _temporal_or_rare(kind, data, pos, size, extra)
                append(value)
        return tuple(values), pos


def _temporal_or_rare(kind: int, data: bytes, pos: int, size: int, extra: Any) -> tuple[Any, int]:
    if kind == _TS2:
        stamp = _EPOCH + int.from_bytes(data[pos : pos + 4], "big", signed=True) * _SECOND
        return _with_fraction(stamp, data, pos + 4, size)
    if kind == _DT2:
        return _datetime2(data, pos, size)
    if kind == _DATE:
        return _date(data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16), pos + 3
    if kind == _INT24:
        return int.from_bytes(data[pos : pos + 3], "little", signed=extra), pos + 3
    return data[pos] + 1900, pos + 1  # _YEAR


def compile_columns(columns: Sequence[Any], charset_to_encoding: Callable[[str], str]) -> RowDecoder | None:
    """A decoder for a table map's columns (mysql-replication's ``Column`` objects), or None
    when one is of a type this module leaves to the library. ``charset_to_encoding`` is the
    library's (``RowsEvent.charset_to_encoding``): text is decoded with the codec it names."""
    readers = []
    for column in columns:
        reader = _reader(column, charset_to_encoding)
        if reader is None or not column.name:  # unnamed: the library asks information_schema
            return None
        readers.append(reader)
    return RowDecoder(readers, [column.name for column in columns])


def _reader(column: Any, charset_to_encoding: Callable[[str], str]) -> _Reader | None:
    kind, unsigned = column.type, bool(column.unsigned)
    if (kind, unsigned) in _LITTLE:
        unpack = _LITTLE[kind, unsigned]
        return (_FIXED, unpack.unpack_from, unpack.size, None)
    if kind == FIELD_TYPE.INT24:
        return (_INT24, None, 3, not unsigned)
    if kind in _FLOATS:
        unpack = _FLOATS[kind]
        return (_FIXED, unpack.unpack_from, unpack.size, None)
    if kind == FIELD_TYPE.YEAR:
        return (_YEAR, None, 1, None)
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        return _text_reader(column, charset_to_encoding)
    if kind == FIELD_TYPE.NEWDECIMAL:
        return (_DEC, None, None, _decimal_layout(column.precision, column.decimals))
    if kind == FIELD_TYPE.TIMESTAMP2:
        return (_TS2, None, column.fsp, None)
    if kind == FIELD_TYPE.DATETIME2:
        return (_DT2, None, column.fsp, None)
    if kind == FIELD_TYPE.DATE:
        return (_DATE, None, 3, None)
    return None


def _text_reader(column: Any, charset_to_encoding: Callable[[str], str]) -> _Reader | None:
    # The library: the column's charset's codec, strict (a codec Python lacks: the raw bytes,
    # left to the library); no charset in the table map: UTF-8.
    name = column.character_set_name
    codec = "utf-8" if name is None else charset_to_encoding(name)
    try:
        b"".decode(codec)
    except LookupError:
        return None
    return (_STR, None, 2 if column.max_length > 255 else 1, codec)


def _decimal_layout(precision: int, scale: int) -> tuple[int, int, int, int, int]:
    """(leftover integral digits' bytes, full integral groups, full fraction groups, leftover
    fraction digits, their bytes) of decimal(precision, scale)'s binary form."""
    integral = precision - scale
    return (_DIGIT_BYTES[integral % 9], integral // 9, scale // 9, scale % 9, _DIGIT_BYTES[scale % 9])


def _decimal(data: bytes, pos: int, layout: tuple[int, int, int, int, int]) -> tuple[Decimal, int]:
    """MySQL's binary decimal: groups of 9 digits in 4 big-endian bytes, the leftover digits in
    fewer; the first bit is the sign (set: positive), a negative value has every bit inverted.
    The text is built as the library builds it, so the Decimal is the same (``-0.00`` too)."""
    head, integral_groups, fraction_groups, tail_digits, tail = layout
    size = head + 4 * (integral_groups + fraction_groups) + tail
    raw = bytearray(data[pos : pos + size])
    if len(raw) != size:
        raise _Undecodable
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


def _with_fraction(value: dt.datetime, data: bytes, pos: int, fsp: int) -> tuple[dt.datetime, int]:
    """The fractional seconds of a datetime2/timestamp2/time2 (``fsp`` digits in (fsp+1)//2
    big-endian bytes), set as the library sets them."""
    size = (fsp + 1) // 2
    if not size:
        return value, pos
    fraction = int.from_bytes(data[pos : pos + size], "big", signed=True)
    if fsp % 2:
        fraction = int(fraction / 10)
    micros = fraction * 10 ** (6 - fsp)
    return (value.replace(microsecond=micros) if micros > 0 else value), pos + size


def _datetime2(data: bytes, pos: int, fsp: int) -> tuple[dt.datetime, int]:
    """datetime(n): 1 sign bit, 17 bits year*13+month, 5 day, 5 hour, 6 minute, 6 second. A
    value datetime cannot hold (a zero date) is the library's: it gives None with a reason."""
    packed = int.from_bytes(data[pos : pos + 5], "big")
    year_month = (packed >> 22) & 0x1FFFF
    try:
        value = dt.datetime(
            year_month // 13,
            year_month % 13,
            (packed >> 17) & 0x1F,
            (packed >> 12) & 0x1F,
            (packed >> 6) & 0x3F,
            packed & 0x3F,
        )
    except ValueError:
        raise _Undecodable from None
    return _with_fraction(value, data, pos + 5, fsp)


def _date(packed: int) -> dt.date:
    """date: 15 bits year, 4 month, 5 day. A zero date, or one with a zero part, is the
    library's (None with a reason)."""
    year, month, day = packed >> 9, (packed >> 5) & 0xF, packed & 0x1F
    if not (year and month and day):
        raise _Undecodable
    return dt.date(year, month, day)
