"""Values with a structure of their own, as Debezium's MySQL/MariaDB connector emits them: bits,
geometries, MariaDB's uuid, MySQL's binary JSON; and the small conversions ``types.py`` shares."""

from __future__ import annotations

import base64
import datetime as dt
import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from airflow_cdc.engine.sources.mysql import temporal
from airflow_cdc.engine.sources.mysql.java_floats import java_double_string

Converter = Callable[[Any], Any]


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def raw_bytes(value: Any) -> bytes:
    """mysql-replication yields ``''`` (a str) for an empty binary value."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    raise TypeError(f"not bytes: {type(value).__name__}")


def plain_string(value: Decimal) -> str:
    """``BigDecimal.toPlainString()``: no exponent, and no negative zero."""
    return format(value if value else abs(value), "f")


def bit_length(column_type: str, precision: int | None) -> int:
    match = re.search(r"\((\d+)\)", column_type)
    return int(match.group(1)) if match else (precision or 1)


def bits(length: int, from_text: bool) -> Converter:
    """bit(n>1): Debezium's Bits, the value's ``ceil(n/8)`` bytes little-endian (base64 in JSON,
    whatever binary.handling.mode says). mysql-replication yields the bits as '0'/'1' text,
    most significant first; PyMySQL yields the bytes big-endian."""
    size = (length + 7) // 8
    if from_text:
        return lambda text: base64.b64encode(int(text, 2).to_bytes(size, "little")).decode("ascii")
    return lambda raw: base64.b64encode(int.from_bytes(raw, "big").to_bytes(size, "little")).decode("ascii")


def bit1_from_binlog(text: str) -> bool:
    return int(text, 2) != 0


def bit1_from_snapshot(raw: bytes) -> bool:
    return int.from_bytes(raw, "big") != 0


GEOMETRY_TYPES = frozenset(
    ("geometry", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
     "geomcollection")
)  # fmt: skip
_XY = {1: struct.Struct("<dd"), 0: struct.Struct(">dd")}


def geometry(raw: bytes) -> dict[str, Any]:
    """io.debezium.data.geometry.Geometry {wkb, srid} (wkb in base64): MySQL's value is a
    little-endian SRID (0 is none: null) followed by the WKB."""
    raw = raw_bytes(raw)
    srid = int.from_bytes(raw[:4], "little")
    return {"wkb": base64.b64encode(raw[4:]).decode("ascii"), "srid": srid or None}


def point(raw: bytes) -> dict[str, Any]:
    """io.debezium.data.geometry.Point: a Geometry with the point's x and y."""
    value = geometry(raw)
    wkb = raw_bytes(raw)[4:]
    if len(wkb) != 21 or wkb[0] not in _XY:
        raise ValueError(f"not a WKB point: {wkb[:8].hex()}...")
    x, y = _XY[wkb[0]].unpack_from(wkb, 5)
    return {"x": x, "y": y, **value}


def uuid_from_binlog(raw: Any) -> str:
    """MariaDB's uuid: 16 bytes in the binlog, its trailing zero bytes stripped. Debezium reads
    what is left as the whole number and shifts the uuid; we put the zeros back (a deliberate
    deviation, the oracle's allowance table names it)."""
    return str(uuid.UUID(bytes=raw_bytes(raw).ljust(16, b"\0")))


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _json_string(text: str) -> str:
    return '"' + _JSON_ESCAPED.sub(lambda m: _JSON_ESCAPES.get(m[0], f"\\u{ord(m[0]):04X}"), text) + '"'


def mysql_json(value: Any) -> str:
    """MySQL's binary JSON as mysql-replication parses it (dicts with bytes keys, bytes
    strings) -> the text Debezium's binlog reader writes (JsonBinary.parseAsString: no spaces,
    doubles as Java writes them, exponents expanded). MariaDB's json is text: as it is. (Not
    checked against the oracle, which runs MariaDB.)"""
    if isinstance(value, str):
        return value
    return _json_text(value)


def _json_text(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, bytes | str):
        return _json_string(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(as_text(key))}:{_json_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = java_double_string(value)
        return format(Decimal(value), "f") if "E" in text else text
    if isinstance(value, Decimal):
        return plain_string(value)
    if isinstance(value, dt.date | dt.timedelta):
        return _json_string(temporal.json_text(value))
    raise TypeError(f"not a JSON value: {type(value).__name__}")
