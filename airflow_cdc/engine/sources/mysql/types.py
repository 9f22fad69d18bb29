"""MySQL/MariaDB column values -> the JSON values of Debezium's MySQL/MariaDB connector.

One converter per column, chosen when a table is first seen (:func:`binlog_converter`,
:func:`snapshot_converter`); the per-value work is one call. Converters never see None (a NULL
is null).
A converter raises ``ValueError``, ``TypeError`` or ``ArithmeticError`` for a value it cannot
convert, nothing else; the caller's ``event.processing.failure.handling.mode`` decides.

Binlog values are what ``row_decoder.py`` yields (mysql-replication's values, as it reads
them with full row metadata; a zero date is ``temporal.ZERO_DATE``). Snapshot values are what
PyMySQL's default conversions return for a plain ``SELECT col`` (no column needs an
expression of its own) on a connection opened with ``charset='utf8mb4'`` (text of every
charset arrives decoded) and ``SET time_zone='+00:00'`` (``timestamp`` values in UTC).

Debezium's snapshot reads through JDBC, its stream through its binlog client, and the two give
some values different JSON; each converter gives its reader's (``tests/compat``, the oracle,
shows them): a ``float`` in a snapshot is MariaDB's 6-digit text of it, a ``double(M,D)`` its
rounded text, a ``timestamp(n)``'s fraction loses its trailing zeros, a zero ``timestamp`` in a
NOT NULL column becomes the column's default, and an enum option holding a comma streams as
``x\\,y``.

Modes are Debezium's (:class:`ValueModes`, ``value_modes.py``). A type Debezium has no schema
for gets no converter: the column is left out of the events, as Debezium leaves it out (logged once).
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import re
from binascii import b2a_base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_cdc.engine.sources.mysql import temporal
from airflow_cdc.engine.sources.mysql.java_floats import float32, widened_float32
from airflow_cdc.engine.sources.mysql.structured import (
    GEOMETRY_TYPES,
    as_text,
    bit1_from_binlog,
    bit1_from_snapshot,
    bit_length,
    bits,
    geometry,
    mysql_json,
    plain_string,
    point,
    raw_bytes,
    uuid_from_binlog,
)
from airflow_cdc.engine.sources.mysql.value_modes import ValueModes

__all__ = [
    "Converter",
    "MySqlColumn",
    "ValueModes",
    "binlog_converter",
    "default_literal",
    "enum_options",
    "snapshot_converter",
    "unscaled_base64",
]

log = logging.getLogger(__name__)

Converter = Callable[[Any], Any]


@dataclass(frozen=True)
class MySqlColumn:
    """A column as ``information_schema.COLUMNS`` describes it."""

    name: str
    #: DATA_TYPE, lower case: "int", "varchar", "decimal", "enum", "json", ...; "boolean" for a
    #: column a streamed DDL statement declares BOOL/BOOLEAN (Debezium's schema is then a boolean,
    #: where information_schema, and Debezium's snapshot, see tinyint(1), an int)
    data_type: str
    column_type: str  # COLUMN_TYPE: "int(10) unsigned", "enum('a','b')", "decimal(10,2)", "bit(3)"
    nullable: bool = True
    charset: str | None = None  # CHARACTER_SET_NAME
    length: int | None = None  # CHARACTER_MAXIMUM_LENGTH
    precision: int | None = None  # NUMERIC_PRECISION
    scale: int | None = None  # NUMERIC_SCALE
    fsp: int | None = None  # DATETIME_PRECISION
    unsigned: bool = False
    #: COLUMN_DEFAULT as the server gives it (MariaDB quotes literals: "'2001-02-03'", and says
    #: NULL; MySQL does neither): Debezium emits it for a zero date in a NOT NULL column.
    default: str | None = None
    #: COLUMN_COMMENT (None when empty): Debezium's schema gives it as the field's ``doc``.
    comment: str | None = None
    #: The type's name as a streamed statement spells it (Debezium's ``typeName``: ``INTEGER``,
    #: ``BOOLEAN``); None for a column read from the server (SHOW CREATE TABLE's spelling).
    source_type: str | None = None

    @classmethod
    def from_information_schema(cls, row: Mapping[str, Any]) -> MySqlColumn:
        """A ``COLUMNS`` row, keys as information_schema names them (any case)."""
        get = {str(k).upper(): v for k, v in row.items()}.get
        column_type = as_text(get("COLUMN_TYPE")).lower()
        return cls(
            name=as_text(get("COLUMN_NAME")),
            data_type=as_text(get("DATA_TYPE")).lower(),
            column_type=column_type,
            nullable=as_text(get("IS_NULLABLE") or "YES").upper() == "YES",
            charset=_optional_text(get("CHARACTER_SET_NAME")),
            length=_optional_int(get("CHARACTER_MAXIMUM_LENGTH")),
            precision=_optional_int(get("NUMERIC_PRECISION")),
            scale=_optional_int(get("NUMERIC_SCALE")),
            fsp=_optional_int(get("DATETIME_PRECISION")),
            unsigned=" unsigned" in column_type or " zerofill" in column_type,
            default=_optional_text(get("COLUMN_DEFAULT")),
            comment=_optional_text(get("COLUMN_COMMENT")) or None,
        )


def _optional_text(value: Any) -> str | None:
    return None if value is None else as_text(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


# --- numbers -------------------------------------------------------------------------------


def unscaled_base64(unscaled: int) -> str:
    """Kafka Connect's Decimal in JSON: base64 of ``BigInteger.toByteArray()`` of the unscaled
    value (the fewest big-endian two's-complement bytes with room for the sign)."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return b2a_base64(unscaled.to_bytes(length, "big", signed=True), newline=False).decode("ascii")


def _precise(scale: int) -> Converter:
    """decimal(p, s) in ``precise`` mode. Both readers give a Decimal with exactly ``s``
    fraction digits, whose text without the point is the unscaled value (the fast path; a
    Decimal printed with an exponent, 0E-30, takes the exact one)."""

    def convert(value: Decimal) -> str:
        text = str(value)
        whole, _, fraction = text.partition(".")
        if len(fraction) == scale and "E" not in text:
            return unscaled_base64(int(whole + fraction))
        return unscaled_base64(_unscaled(value, scale))

    return convert


def _unscaled(value: Decimal, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale``, exactly (a decimal context would round
    a decimal(65,30) to 28 digits)."""
    sign, digits, exponent = Decimal.as_tuple(value)
    if not isinstance(exponent, int):
        raise ValueError(f"not a finite decimal: {value}")
    unscaled: int = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        unscaled *= 10**shift
    else:  # more fraction digits than the column has: BigDecimal.setScale would refuse them too
        unscaled, rest = divmod(unscaled, 10**-shift)
        if rest:
            raise ValueError(f"{value} has more than {scale} fraction digits")
    return -unscaled if sign else unscaled


def _decimal(mode: str, scale: int) -> Converter:
    if mode == "double":
        return float
    if mode == "string":
        return plain_string
    return _precise(scale)


_INT64 = 1 << 64


def _wrapped_int64(value: int) -> int:
    """bigint unsigned in ``long`` mode: the Java long of the same 64 bits."""
    value = int(value)
    return value - _INT64 if value >= 1 << 63 else value


# --- bytes and text ------------------------------------------------------------------------

_BINARY_ENCODERS: dict[str, Callable[[bytes], str]] = {
    "bytes": lambda raw: base64.b64encode(raw).decode("ascii"),  # JSON has no bytes: base64
    "base64": lambda raw: base64.b64encode(raw).decode("ascii"),
    "base64-url-safe": lambda raw: base64.urlsafe_b64encode(raw).decode("ascii"),
    "hex": lambda raw: raw.hex(),
}


def _binary(mode: str, pad_to: int | None) -> Converter:
    """binary/varbinary/blob in ``binary.handling.mode``; a ``binary(n)`` arrives from the
    binlog without its trailing zero bytes, which Debezium puts back (DBZ-254)."""
    encode = _BINARY_ENCODERS[mode]
    if pad_to:
        width = pad_to
        return lambda value: encode(raw_bytes(value).ljust(width, b"\0"))
    return lambda value: encode(raw_bytes(value))


#: Python codecs of MySQL charsets whose name Python does not know (MySQL's latin1 is cp1252).
_CODECS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "cp1252", "binary": "latin-1"}


def _string(charset: str | None) -> Converter:
    """Text arrives decoded; mysql-replication yields bytes for a charset Python has no codec
    for, decoded here (what does not decode is replaced)."""
    codec = _CODECS.get(charset or "utf8mb4", charset or "utf-8")

    def convert(value: Any) -> str:
        if isinstance(value, str):
            return value
        try:
            return raw_bytes(value).decode(codec, "replace")
        except LookupError:
            return raw_bytes(value).decode("utf-8", "replace")

    return convert


_OPTION = re.compile(r"'((?:[^']|'')*)'")


def enum_options(column_type: str) -> list[str]:
    """The options of ``enum('a','b')`` / ``set('a','b')``, in definition order."""
    inside = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return [option.replace("''", "'") for option in _OPTION.findall(inside)]


def _enum_from_binlog(column: MySqlColumn) -> Converter:
    """Debezium's binlog reader takes the options from the DDL it parsed, where it escapes an
    option's comma (MariaDbAntlrDdlParser.escapeOption): 'x,y' streams as 'x\\\\,y'."""
    text = _string(column.charset)
    if any("," in option for option in enum_options(column.column_type)):
        return lambda value: text(value).replace(",", "\\,")
    return text


def _set_from_binlog(column: MySqlColumn) -> Converter:
    """The binlog's SET is a Python set of its members; Debezium joins them with ',' in
    definition order."""
    options = enum_options(column.column_type)
    return lambda members: ",".join(option for option in options if option in members)


# --- choosing a converter ------------------------------------------------------------------


def _boolean(value: int) -> bool:
    """A column declared BOOL/BOOLEAN in a DDL statement Debezium streamed: its schema is that
    statement's, a boolean (information_schema and SHOW CREATE TABLE say tinyint(1), an int)."""
    return int(value) != 0


_INTEGERS = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint"))
_TEXTS = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"))
_BINARIES = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))
_TEMPORAL = frozenset(("date", "time", "datetime", "timestamp"))


#: Types whose converter takes no column detail nor mode, the same for both readers.
_FIXED: dict[str, Converter] = {
    "double": float,
    "real": float,
    "year": int,
    "boolean": _boolean,
    "bool": _boolean,
    "point": point,
    **dict.fromkeys(GEOMETRY_TYPES, geometry),
}


def _common(column: MySqlColumn, modes: ValueModes) -> Converter | None:
    """The converters that are the same for binlog and snapshot values."""
    kind = column.data_type
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed
    if kind in _INTEGERS:
        if kind == "bigint" and column.unsigned:
            return _wrapped_int64 if modes.bigint_unsigned == "long" else lambda value: unscaled_base64(int(value))
        return int
    if kind == "decimal" or kind == "numeric":
        return _decimal(modes.decimal, column.scale or 0)
    if kind in _TEXTS:
        return _string(column.charset)
    if kind in _BINARIES:
        return _binary(modes.binary, column.length if kind == "binary" else None)
    return None


def binlog_converter(column: MySqlColumn, modes: ValueModes) -> Converter | None:
    """The converter of ``column``'s values as mysql-replication 1.0.x's row events yield them,
    or None for a column Debezium leaves out (a type it has no schema for: inet4, inet6,
    vector, ...)."""
    kind = column.data_type
    if kind in _TEMPORAL:
        return _temporal(column, modes, snapshot=False)
    if kind == "float":
        return float32 if "," not in column.column_type else float  # float(M,D) is a double
    if kind == "enum":
        return _enum_from_binlog(column)
    if kind == "set":
        return _set_from_binlog(column)
    if kind == "bit":
        length = bit_length(column.column_type, column.precision)
        return bit1_from_binlog if length == 1 else bits(length, from_text=True)
    if kind == "json":
        return mysql_json
    if kind == "uuid":
        return uuid_from_binlog
    return _common(column, modes) or _left_out(column)


def snapshot_converter(column: MySqlColumn, modes: ValueModes) -> Converter | None:
    """The converter of ``column``'s values as PyMySQL returns them from a plain SELECT (the
    connection: see the module docstring), or None for a column Debezium leaves out."""
    kind = column.data_type
    if kind in _TEMPORAL:
        return _temporal(column, modes, snapshot=True)
    if kind == "float":
        return float32 if "," not in column.column_type else widened_float32
    if kind in ("enum", "set", "json", "uuid"):
        return _string(column.charset)
    if kind == "bit":
        length = bit_length(column.column_type, column.precision)
        return bit1_from_snapshot if length == 1 else bits(length, from_text=False)
    return _common(column, modes) or _left_out(column)


# --- dates and times -----------------------------------------------------------------------


def _temporal_converter(column: MySqlColumn, modes: ValueModes, snapshot: bool) -> Converter:
    kind, connect = column.data_type, modes.time_precision == "connect"
    if kind == "date":
        return temporal.epoch_days
    if kind == "datetime":
        return temporal.epoch_millis if connect or (column.fsp or 0) <= 3 else temporal.epoch_micros
    if kind == "timestamp":
        return temporal.iso_offset_timestamp if snapshot else temporal.zoned_timestamp(column.fsp or 0)
    if connect:
        return lambda value: temporal.connect_time_millis(temporal.time_micros(value))
    return temporal.time_micros


def _temporal(column: MySqlColumn, modes: ValueModes, snapshot: bool) -> Converter:
    convert = _temporal_converter(column, modes, snapshot)
    if column.data_type == "time":
        return convert
    zero = _zero_date(column, modes, snapshot=snapshot)
    if snapshot:

        def convert_or_zero(value: Any) -> Any:
            # PyMySQL returns a date it cannot represent ('0000-00-00', '2020-00-15') as its text.
            return zero if isinstance(value, str) else convert(value)

        return convert_or_zero
    return lambda value: zero if value is temporal.ZERO_DATE else convert(value)


def _zero_date(column: MySqlColumn, modes: ValueModes, snapshot: bool) -> Any:
    """Debezium reads a zero date as null; in a NOT NULL column its schema's default replaces
    the null (the column's default, converted), else its fallback, the epoch."""
    if column.nullable:
        return None
    literal = default_literal(column.default)
    if literal is not None:
        try:
            value = dt.date.fromisoformat(literal) if column.data_type == "date" else dt.datetime.fromisoformat(literal)
        except ValueError:  # an expression (current_timestamp()) or a zero date itself
            pass
        else:
            return _temporal_converter(column, modes, snapshot)(value)
    return "1970-01-01T00:00:00Z" if column.data_type == "timestamp" else 0


def default_literal(default: str | None) -> str | None:
    """A COLUMN_DEFAULT's literal text: MariaDB quotes literals and writes NULL for none; MySQL
    writes the bare literal. None for no default or NULL."""
    if default is None or default.upper() == "NULL":
        return None
    if len(default) >= 2 and default[0] == default[-1] == "'":
        return default[1:-1].replace("''", "'")
    return default


_LEFT_OUT_LOGGED: set[tuple[str, str]] = set()


def _left_out(column: MySqlColumn) -> Converter | None:
    """None (logged once per column and type): Debezium has no schema for the type."""
    if (column.name, column.column_type) not in _LEFT_OUT_LOGGED:
        _LEFT_OUT_LOGGED.add((column.name, column.column_type))
        log.info(
            "Column %s of type %s is left out of the change events, as Debezium leaves it out",
            column.name,
            column.column_type,
        )
    return None
