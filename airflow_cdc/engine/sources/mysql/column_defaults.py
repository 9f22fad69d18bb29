"""A MySQL/MariaDB column's default as Debezium's schema carries it (``connect_schema.py``):
BinlogDefaultValueConverter parses the DDL's literal into the column's Java value and converts it
with the column's value converter; here the literal becomes the value PyMySQL would return for
the column and ``types.snapshot_converter`` converts it. ``CURRENT_TIMESTAMP`` (and its synonyms)
is the epoch, as Debezium's parser reads it; an expression it cannot read gives no default.
The literal is COLUMN_DEFAULT's text: MariaDB quotes a literal, MySQL does not.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from airflow_cdc.engine.sources.mysql.structured import bit_length
from airflow_cdc.engine.sources.mysql.types import MySqlColumn, ValueModes, snapshot_converter

_TEXTS = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"))
_BINARIES = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))
_BIT_LITERAL = re.compile(r"^b'([01]*)'$", re.I)
_HEX_LITERAL = re.compile(r"^x'([0-9a-f]*)'$", re.I)

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
    # Debezium's parser strips the quotes and keeps a doubled quote doubled ('q''s' is q''s).
    literal = raw[1:-1] if quoted else raw
    try:
        value = _python_value(column, literal, quoted)
    except (ValueError, InvalidOperation, ArithmeticError):
        return None
    if value is None:
        return None
    if column.data_type == "binary" and column.source_type is not None:
        # A streamed statement's binary(n) default is its literal's bytes, unpadded (the
        # snapshot's SHOW CREATE TABLE writes the padded value).
        column = dataclasses.replace(column, data_type="varbinary")
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
    if kind == "bit":
        return _bits(literal.strip(), quoted, column)
    if kind in _BINARIES:
        return _bytes(literal, quoted, column.source_type is not None)
    return None  # json, geometry, blobs of an expression: no default


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


def _bits(text: str, quoted: bool, column: MySqlColumn) -> bytes | None:
    """A bit column's default as PyMySQL returns its value (big-endian bytes): b'101', or a
    number."""
    match = _BIT_LITERAL.match(text)
    if match:
        number = int(match.group(1) or "0", 2)
    elif not quoted and text.isdigit():
        number = int(text)
    else:
        return None
    length = bit_length(column.column_type, column.precision)
    return number.to_bytes((length + 7) // 8, "big")


def _bytes(literal: str, quoted: bool, streamed: bool) -> bytes | None:
    """A binary column's default: a string literal's bytes, or x'...' - which Debezium's parser
    reads only from SHOW CREATE TABLE, where the server writes it as a string; a streamed
    statement's x'...' gives no default."""
    match = _HEX_LITERAL.match(literal.strip())
    if match:
        return None if streamed else bytes.fromhex(match.group(1))
    return literal.encode("utf-8") if quoted else None


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
