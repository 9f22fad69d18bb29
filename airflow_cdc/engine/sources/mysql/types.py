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

Modes are Debezium's (:class:`ValueModes`). A type Debezium has no schema for gets no
converter: the column is left out of the events, as Debezium leaves it out (logged once).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import logging
import math
import re
import struct
import uuid
from binascii import b2a_base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_cdc.engine.sources.mysql import temporal

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

    @classmethod
    def from_information_schema(cls, row: Mapping[str, Any]) -> MySqlColumn:
        """A ``COLUMNS`` row, keys as information_schema names them (any case)."""
        get = {str(k).upper(): v for k, v in row.items()}.get
        column_type = _text(get("COLUMN_TYPE")).lower()
        return cls(
            name=_text(get("COLUMN_NAME")),
            data_type=_text(get("DATA_TYPE")).lower(),
            column_type=column_type,
            nullable=_text(get("IS_NULLABLE") or "YES").upper() == "YES",
            charset=_optional_text(get("CHARACTER_SET_NAME")),
            length=_optional_int(get("CHARACTER_MAXIMUM_LENGTH")),
            precision=_optional_int(get("NUMERIC_PRECISION")),
            scale=_optional_int(get("NUMERIC_SCALE")),
            fsp=_optional_int(get("DATETIME_PRECISION")),
            unsigned=" unsigned" in column_type or " zerofill" in column_type,
            default=_optional_text(get("COLUMN_DEFAULT")),
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


DECIMAL_MODES = ("precise", "double", "string")
TIME_PRECISION_MODES = ("adaptive_time_microseconds", "connect")
BIGINT_UNSIGNED_MODES = ("long", "precise")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")


@dataclass(frozen=True)
class ValueModes:
    """Debezium's MySQL connector options, with its defaults. ValueError for a value this
    module does not implement (Debezium refuses ``adaptive``; its newer ``microseconds``,
    ``nanoseconds`` and ``isostring`` precision modes are not implemented here)."""

    decimal: str = "precise"  # decimal.handling.mode
    time_precision: str = "adaptive_time_microseconds"  # time.precision.mode
    bigint_unsigned: str = "long"  # bigint.unsigned.handling.mode
    binary: str = "bytes"  # binary.handling.mode

    def __post_init__(self) -> None:
        for value, allowed, key in (
            (self.decimal, DECIMAL_MODES, "decimal.handling.mode"),
            (self.time_precision, TIME_PRECISION_MODES, "time.precision.mode"),
            (self.bigint_unsigned, BIGINT_UNSIGNED_MODES, "bigint.unsigned.handling.mode"),
            (self.binary, BINARY_MODES, "binary.handling.mode"),
        ):
            if value not in allowed:
                raise ValueError(f"{key} must be one of {', '.join(allowed)}, not {value!r}")

    @classmethod
    def from_config(cls, settings: Mapping[str, Any]) -> ValueModes:
        """From Debezium's keys (case-insensitive values); an absent key takes the default."""
        default = cls()

        def mode(key: str, fallback: str) -> str:
            value = settings.get(key)
            return fallback if value is None else str(value).strip().lower()

        return cls(
            decimal=mode("decimal.handling.mode", default.decimal),
            time_precision=mode("time.precision.mode", default.time_precision),
            bigint_unsigned=mode("bigint.unsigned.handling.mode", default.bigint_unsigned),
            binary=mode("binary.handling.mode", default.binary),
        )


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


def _plain_string(value: Decimal) -> str:
    """``BigDecimal.toPlainString()``: no exponent, and no negative zero."""
    return format(value if value else abs(value), "f")


def _decimal(mode: str, scale: int) -> Converter:
    if mode == "double":
        return float
    if mode == "string":
        return _plain_string
    return _precise(scale)


_INT64 = 1 << 64


def _wrapped_int64(value: int) -> int:
    """bigint unsigned in ``long`` mode: the Java long of the same 64 bits."""
    value = int(value)
    return value - _INT64 if value >= 1 << 63 else value


_FLOAT = struct.Struct("<f")
_FLOAT_BITS = struct.Struct("<I")
_DOUBLE_BITS = struct.Struct("<Q")


def float32(value: float) -> float:
    """A ``float`` column's value as Debezium emits it: a Java float, which Kafka Connect's JSON
    converter writes with ``Float.toString``. On the JVM the oracle runs (17; Java 19 changed
    it, JDK-4511638) that gives FloatingDecimal's digits, not always the shortest that read
    back as the float: 1.17549435E-38 and 2.2856919E9, not 1.1754944E-38 and 2.285692E9 (about
    one value in ten of those written with an exponent). The result is the double those
    digits read as, which is what a consumer of the JSON sees."""
    packed = _FLOAT.pack(float(value))  # float(): a ValueError for text, not a struct.error
    single: float = _FLOAT.unpack(packed)[0]
    if not single or not math.isfinite(single):
        return single
    return _java_float(_FLOAT_BITS.unpack(packed)[0])


@functools.lru_cache(maxsize=4096)  # keyed by the bits: 0.0 and -0.0 are equal floats
def _java_float(bits: int) -> float:
    fraction, exponent = bits & 0x7FFFFF, (bits >> 23) & 0xFF
    if exponent:
        digits, decimal_exponent = _java_digits(exponent - 127, (fraction | 1 << 23) << 29, 24)
    else:  # subnormal: normalised as FloatingDecimal does
        shift = 32 - fraction.bit_length() - 8
        digits, decimal_exponent = _java_digits(1 - shift - 127, fraction << shift << 29, fraction.bit_length())
    return float(f"{'-' if bits >> 31 else ''}0.{digits}e{decimal_exponent}")


def widened_float32(value: float) -> float:
    """``float(M,D)`` in a snapshot: its text read as a Java float, widened to double."""
    return float(_FLOAT.unpack(_FLOAT.pack(float(value)))[0])


def java_double_string(value: float) -> str:
    """``Double.toString`` as Java 17 writes it (FloatingDecimal's digits)."""
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if not value:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    bits = _DOUBLE_BITS.unpack(struct.pack("<d", value))[0]
    fraction, exponent = bits & ((1 << 52) - 1), (bits >> 52) & 0x7FF
    if exponent:
        digits, decimal_exponent = _java_digits(exponent - 1023, fraction | 1 << 52, 53)
    else:  # subnormal
        shift = 64 - fraction.bit_length() - 11
        digits, decimal_exponent = _java_digits(1 - shift - 1023, fraction << shift, fraction.bit_length())
    return ("-" if value < 0 else "") + _java_layout(digits, decimal_exponent)


def _java_layout(digits: str, exponent: int) -> str:
    """FloatingDecimal.getChars: plain for 1e-3 <= |x| < 1e7, else d.dddE±n."""
    if 0 < exponent < 8:
        whole, fraction = digits[:exponent].ljust(exponent, "0"), digits[exponent:]
        return f"{whole}.{fraction or '0'}"
    if -3 < exponent <= 0:
        return "0." + "0" * -exponent + digits
    return f"{digits[0]}.{digits[1:] or '0'}E{exponent - 1}"


# jdk.internal.math.FloatingDecimal.BinaryToASCIIBuffer.dtoa (JDK 8-18), on Python integers:
# the value is 0.<digits> * 10**exponent. Its int and long branches overflow as Java does.
_N_5_BITS = (0, 3, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33, 35, 38, 40, 42, 45, 47, 49, 52, 54, 56, 59, 61)
_INSIGNIFICANT_FOR_POW2 = (
    0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 9, 10, 10,
    10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19,
)  # fmt: skip


def _java_digits(bin_exp: int, fract_bits: int, n_significant: int) -> tuple[str, int]:
    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = 53 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)
    if n_tiny_bits == 0 and -21 <= bin_exp <= 62:  # an integer that fits a long
        p2 = bin_exp - n_significant - 1
        insignificant = _INSIGNIFICANT_FOR_POW2[p2] if 1 < p2 < len(_INSIGNIFICANT_FOR_POW2) else 0
        whole = fract_bits << (bin_exp - 52) if bin_exp >= 52 else fract_bits >> (52 - bin_exp)
        return _long_digits(whole, insignificant)
    # estimateDecExp: log10 from the mantissa's first-order series, in the same double arithmetic
    mantissa = (fract_bits & ((1 << 52) - 1)) / (1 << 52) + 1.0
    dec_exp = math.floor((mantissa - 1.5) * 0.289529654 + 0.176091259 + bin_exp * 0.301029995663981)
    b5, s5 = max(0, -dec_exp), max(0, dec_exp)
    b2, s2 = b5 + n_tiny_bits + bin_exp - (n_fract_bits - 1), s5 + n_tiny_bits
    m2 = b5 + n_tiny_bits + bin_exp - n_significant
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common - (n_fract_bits == 1)
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    b_bits = n_fract_bits + b2 + (_N_5_BITS[b5] if b5 < len(_N_5_BITS) else b5 * 3)
    ten_s_bits = s2 + 1 + (_N_5_BITS[s5 + 1] if s5 + 1 < len(_N_5_BITS) else (s5 + 1) * 3)
    width = (32 if b_bits < 32 and ten_s_bits < 32 else 64) if b_bits < 64 and ten_s_bits < 64 else 0
    b, s, m = (fract_bits >> tail_zeros) * 5**b5 << b2, 5**s5 << s2, 5**b5 << m2
    return _generate_digits(b, s, m, dec_exp, width)


def _long_digits(value: int, insignificant: int) -> tuple[str, int]:
    if insignificant:
        value, residue = divmod(value, 10**insignificant)
        value += residue >= 10**insignificant >> 1
    text = str(value)
    return text.rstrip("0"), len(text) + insignificant


def _wrap(value: int, width: int) -> int:
    """Java's int (32) or long (64) arithmetic; 0: FDBigInteger's, which does not overflow."""
    if not width:
        return value
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def _generate_digits(b: int, s: int, m: int, dec_exp: int, width: int) -> tuple[str, int]:
    tens = s * 10
    digits: list[int] = []
    first = True
    while True:
        q, b = divmod(b, s)
        b *= 10
        m = _wrap(m * 10, width)
        if width and not first and m <= 0:  # "m might overflow": stop
            low = high = True
        else:  # FDBigInteger's test is >=, the int and long branches' >
            low, high = b < m, (b + m >= tens) if not width else _wrap(b + m, width) > tens
        if first and q == 0 and not high:
            dec_exp -= 1  # the estimate was one too high: drop the leading zero
        else:
            digits.append(q)
        if first and (dec_exp < -3 or dec_exp >= 8):
            low = high = False  # E-form: at least two digits
        first = False
        if low or high:
            break
    difference = _wrap((b << 1) - tens, width) if width or (high and low) else 0
    if high and (not low or difference > 0 or (difference == 0 and digits[-1] & 1)):
        return _rounded_up(digits, dec_exp + 1)
    return "".join(map(str, digits)), dec_exp + 1


def _rounded_up(digits: list[int], exponent: int) -> tuple[str, int]:
    i = len(digits) - 1
    while i > 0 and digits[i] == 9:
        digits[i] = 0
        i -= 1
    if digits[i] == 9:  # carry out of the first digit
        digits[0] = 1
        exponent += 1
    else:
        digits[i] += 1
    return "".join(map(str, digits)), exponent


# --- bytes and text ------------------------------------------------------------------------

_BINARY_ENCODERS: dict[str, Callable[[bytes], str]] = {
    "bytes": lambda raw: base64.b64encode(raw).decode("ascii"),  # JSON has no bytes: base64
    "base64": lambda raw: base64.b64encode(raw).decode("ascii"),
    "base64-url-safe": lambda raw: base64.urlsafe_b64encode(raw).decode("ascii"),
    "hex": lambda raw: raw.hex(),
}


def _raw(value: Any) -> bytes:
    """mysql-replication yields ``''`` (a str) for an empty binary value."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    raise TypeError(f"not bytes: {type(value).__name__}")


def _binary(mode: str, pad_to: int | None) -> Converter:
    """binary/varbinary/blob in ``binary.handling.mode``; a ``binary(n)`` arrives from the
    binlog without its trailing zero bytes, which Debezium puts back (DBZ-254)."""
    encode = _BINARY_ENCODERS[mode]
    if pad_to:
        width = pad_to
        return lambda value: encode(_raw(value).ljust(width, b"\0"))
    return lambda value: encode(_raw(value))


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
            return _raw(value).decode(codec, "replace")
        except LookupError:
            return _raw(value).decode("utf-8", "replace")

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


# --- bits, geometry, uuid, json ------------------------------------------------------------


def _bit_length(column: MySqlColumn) -> int:
    match = re.search(r"\((\d+)\)", column.column_type)
    return int(match.group(1)) if match else (column.precision or 1)


def _bits(length: int, from_text: bool) -> Converter:
    """bit(n>1): Debezium's Bits, the value's ``ceil(n/8)`` bytes little-endian (base64 in JSON,
    whatever binary.handling.mode says). mysql-replication yields the bits as '0'/'1' text,
    most significant first; PyMySQL yields the bytes big-endian."""
    size = (length + 7) // 8
    if from_text:
        return lambda text: base64.b64encode(int(text, 2).to_bytes(size, "little")).decode("ascii")
    return lambda raw: base64.b64encode(int.from_bytes(raw, "big").to_bytes(size, "little")).decode("ascii")


def _bit1_from_binlog(text: str) -> bool:
    return int(text, 2) != 0


def _bit1_from_snapshot(raw: bytes) -> bool:
    return int.from_bytes(raw, "big") != 0


_GEOMETRY_TYPES = frozenset(
    ("geometry", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
     "geomcollection")
)  # fmt: skip
_XY = {1: struct.Struct("<dd"), 0: struct.Struct(">dd")}


def geometry(raw: bytes) -> dict[str, Any]:
    """io.debezium.data.geometry.Geometry {wkb, srid} (wkb in base64): MySQL's value is a
    little-endian SRID (0 is none: null) followed by the WKB."""
    raw = _raw(raw)
    srid = int.from_bytes(raw[:4], "little")
    return {"wkb": base64.b64encode(raw[4:]).decode("ascii"), "srid": srid or None}


def point(raw: bytes) -> dict[str, Any]:
    """io.debezium.data.geometry.Point: a Geometry with the point's x and y."""
    value = geometry(raw)
    wkb = _raw(raw)[4:]
    if len(wkb) != 21 or wkb[0] not in _XY:
        raise ValueError(f"not a WKB point: {wkb[:8].hex()}...")
    x, y = _XY[wkb[0]].unpack_from(wkb, 5)
    return {"x": x, "y": y, **value}


def _uuid_from_binlog(raw: Any) -> str:
    """MariaDB's uuid: 16 bytes in the binlog, its trailing zero bytes stripped. Debezium reads
    what is left as the whole number and shifts the uuid; we put the zeros back (a deliberate
    deviation, the oracle's allowance table names it)."""
    return str(uuid.UUID(bytes=_raw(raw).ljust(16, b"\0")))


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
        return "{" + ",".join(f"{_json_string(_text(key))}:{_json_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = java_double_string(value)
        return format(Decimal(value), "f") if "E" in text else text
    if isinstance(value, Decimal):
        return _plain_string(value)
    if isinstance(value, dt.date | dt.timedelta):
        return _json_string(temporal.json_text(value))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


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
    **dict.fromkeys(_GEOMETRY_TYPES, geometry),
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
        length = _bit_length(column)
        return _bit1_from_binlog if length == 1 else _bits(length, from_text=True)
    if kind == "json":
        return mysql_json
    if kind == "uuid":
        return _uuid_from_binlog
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
        length = _bit_length(column)
        return _bit1_from_snapshot if length == 1 else _bits(length, from_text=False)
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
