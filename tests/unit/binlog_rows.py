"""Row events' bytes for the decoder tests: MySQL's value formats written from Python values (the
inverse of ``binlog_values.py``, written from MySQL's definitions), and mysql-replication's own
decoding of the same bytes, with its table map as ``binlog_row_metadata=FULL`` would give it."""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from airflow_cdc.engine.sources.mysql.binlog_values import T
from airflow_cdc.engine.sources.mysql.temporal import ZERO_DATE
from airflow_cdc.engine.sources.mysql.types import MySqlColumn

_DIGIT_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
TABLE_ID = 77


def decimal_bytes(value: Decimal, precision: int, scale: int) -> bytes:
    """MySQL's ``decimal2bin``: 9-digit groups in 4 big-endian bytes, the leftover digits in
    fewer, the first bit set for a positive value, every bit inverted for a negative one."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)) + "0" * max(0, exponent + scale)
    if exponent + scale < 0:
        text = text[: exponent + scale] or "0"
    unscaled = text.rjust(precision, "0")
    integral, fraction = unscaled[: precision - scale], unscaled[precision - scale :]
    out = bytearray()
    head = len(integral) % 9
    if head:
        out += int(integral[:head]).to_bytes(_DIGIT_BYTES[head], "big")
    for at in range(head, len(integral), 9):
        out += int(integral[at : at + 9]).to_bytes(4, "big")
    full = len(fraction) // 9 * 9
    for at in range(0, full, 9):
        out += int(fraction[at : at + 9]).to_bytes(4, "big")
    if len(fraction) % 9:
        out += int(fraction[full:]).to_bytes(_DIGIT_BYTES[len(fraction) % 9], "big")
    out[0] ^= 0x80
    if sign and any(digits):
        out = bytearray(byte ^ 0xFF for byte in out)
    return bytes(out)


def _fraction_bytes(micros: int, fsp: int) -> bytes:
    size = (fsp + 1) // 2
    if not size:
        return b""
    stored = micros // (10_000, 100, 1)[size - 1]
    return stored.to_bytes(size, "big", signed=True)


def date_bytes(year: int, month: int, day: int) -> bytes:
    return (year << 9 | month << 5 | day).to_bytes(3, "little")


def datetime2_bytes(value: dt.datetime | None, fsp: int) -> bytes:
    """None: the zero datetime."""
    if value is None:
        return (0x8000000000).to_bytes(5, "big") + _fraction_bytes(0, fsp)
    ymd = ((value.year * 13 + value.month) << 5) | value.day
    hms = (value.hour << 12) | (value.minute << 6) | value.second
    packed = (ymd << 17 | hms) + 0x8000000000
    micros = value.microsecond // 10 ** (6 - fsp) * 10 ** (6 - fsp) if fsp else 0
    return packed.to_bytes(5, "big") + _fraction_bytes(micros, fsp)


def timestamp2_bytes(seconds: int, micros: int, fsp: int) -> bytes:
    micros = micros // 10 ** (6 - fsp) * 10 ** (6 - fsp) if fsp else 0
    return seconds.to_bytes(4, "big") + _fraction_bytes(micros, fsp)


def time2_bytes(value: dt.timedelta, fsp: int) -> bytes:
    """MySQL's ``my_time_packed_to_binary`` of a time (-838:59:59.999999..838:59:59.999999), with
    C's arithmetic: the integral part by an arithmetic shift (floor), the fraction by ``%``
    (truncating toward zero), then stored in as many bytes as the precision needs."""
    micros = value // dt.timedelta(microseconds=1)
    unit = 10 ** (6 - fsp)
    magnitude = abs(micros) // unit * unit
    seconds, fraction = divmod(magnitude, 1_000_000)
    hms = (seconds // 3600) << 12 | (seconds // 60 % 60) << 6 | seconds % 60
    packed = (hms << 24 | fraction) * (-1 if micros < 0 else 1)
    size = (fsp + 1) // 2
    if size == 3:
        return (packed + 0x800000000000).to_bytes(6, "big")
    whole = packed >> 24
    out = (whole + 0x800000).to_bytes(3, "big")
    if not size:
        return out
    frac = abs(packed) % (1 << 24) * (-1 if packed < 0 else 1)
    divisor = (10_000, 100)[size - 1]
    stored = abs(frac) // divisor * (-1 if frac < 0 else 1)
    return out + (stored & ((1 << (8 * size)) - 1)).to_bytes(size, "big")


# --- mysql-replication's decoding ------------------------------------------------------------


def library_column(**attributes: Any) -> Any:
    """mysql-replication's ``Column`` as a FULL-metadata table map makes it (``type`` and the
    type's metadata, as the library names them)."""
    from pymysqlreplication.column import Column

    base = {
        "name": None,
        "unsigned": False,
        "is_primary": False,
        "charset_id": None,
        "character_set_name": None,
        "collation_name": None,
        "enum_values": None,
        "set_values": None,
        "visibility": False,
    }
    return Column(**{**base, **attributes})


def _length_coded(number: int) -> bytes:
    assert number < 251
    return bytes([number])


def library_rows(columns: list[Any], rows: bytes, event_type: int = 0x1E) -> list[dict[str, Any]]:
    """mysql-replication's rows of a row event (a write by default) of ``columns`` holding the
    row bytes ``rows`` (null bitmap and values, row after row)."""
    from pymysql.protocol import MysqlPacket
    from pymysqlreplication.packet import BinLogPacketWrapper
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
    from pymysqlreplication.table import Table as LibraryTable

    bitmap = ((1 << len(columns)) - 1).to_bytes((len(columns) + 7) // 8, "little")
    bitmaps = bitmap * (2 if event_type == 0x1F else 1)
    body = TABLE_ID.to_bytes(6, "little") + struct.pack("<HH", 0, 2) + _length_coded(len(columns)) + bitmaps + rows
    header = b"\x00" + struct.pack("<IBIIIH", 0, event_type, 1, 19 + len(body), 0, 0)
    ctl = SimpleNamespace(charset="utf8mb4", _get_dbms=lambda: "mariadb")
    table_map = {TABLE_ID: LibraryTable(TABLE_ID, "db", "t", columns, primary_key="")}
    wrapper = BinLogPacketWrapper(
        MysqlPacket(header + body, "utf8"),
        table_map,
        ctl,
        (10, 11, 0),
        False,
        frozenset((WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)),
        None,
        None,
        None,
        None,
        False,
        False,
        False,
        True,
        False,
    )
    return list(wrapper.event.rows)


def librarys(column: MySqlColumn, value: Any, reason: str | None) -> Any:
    """The library's value as our decoder gives it: its reason-carrying Nones as values, and what
    it misreads as the server wrote it."""
    if value is None and reason and reason.startswith("out of"):
        return ZERO_DATE
    if value is None and reason == "empty set":
        return set()
    if column.data_type == "time" and isinstance(value, dt.timedelta):
        # mysql-replication 1.0.x negates TIME2's packed integral part alone, then adds the
        # (negative) fraction: a negative time with a fraction arrives as -(S + 1 - F) for -(S + F).
        micros = value // dt.timedelta(microseconds=1)
        seconds, fraction = divmod(micros, 1_000_000)
        if micros < 0 and fraction:
            return dt.timedelta(microseconds=(seconds + 1) * 1_000_000 - fraction)
    if value == "" and column.charset is None and column.data_type not in ("enum", "set"):
        return b""  # b"".decode("binary") looks no codec up: the library gives '' for no bytes
    return value


def same(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float):
        return struct.pack("<d", ours) == struct.pack("<d", theirs) or (math.isnan(ours) and math.isnan(theirs))
    return type(ours) is type(theirs) and ours == theirs


__all__ = [
    "T",
    "date_bytes",
    "datetime2_bytes",
    "decimal_bytes",
    "library_column",
    "library_rows",
    "librarys",
    "same",
    "time2_bytes",
    "timestamp2_bytes",
]
