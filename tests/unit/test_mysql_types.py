"""MySQL/MariaDB values -> Debezium's, without a JVM.

The golden values were recorded from Debezium's MariaDB connector 3.5.0 on Kafka Connect (Java
17) by ``tests/compat/test_mariadb_types_oracle.py``, next to the input the engine's readers
give for the same row: mysql-replication 1.0.x's row images (binlog) and PyMySQL's SELECT
results (snapshot). Columns are as MariaDB 10.11's information_schema describes them.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pytest

from airflow_cdc.engine.sources.mysql import temporal
from airflow_cdc.engine.sources.mysql.java_floats import float32, java_double_string
from airflow_cdc.engine.sources.mysql.structured import mysql_json
from airflow_cdc.engine.sources.mysql.types import (
    MySqlColumn,
    ValueModes,
    binlog_converter,
    default_literal,
    enum_options,
    snapshot_converter,
)


def col(column_type: str, data_type: str | None = None, **kwargs: Any) -> MySqlColumn:
    data_type = data_type or column_type.split("(")[0].split(" ")[0]
    return MySqlColumn("c", data_type, column_type, unsigned=" unsigned" in column_type, **kwargs)


C = {
    "tinyint": col("tinyint(4)"),
    "tinyint unsigned": col("tinyint(3) unsigned"),
    "tinyint(1)": col("tinyint(1)"),
    "boolean": col("tinyint(1)", "boolean"),  # declared BOOL in a DDL statement Debezium streamed
    "smallint unsigned": col("smallint(5) unsigned"),
    "mediumint unsigned": col("mediumint(8) unsigned"),
    "int unsigned": col("int(10) unsigned"),
    "zerofill": col("int(6) unsigned zerofill", "int"),
    "bigint": col("bigint(20)"),
    "bigint unsigned": col("bigint(20) unsigned"),
    "decimal(10,2)": col("decimal(10,2)", precision=10, scale=2),
    "decimal(5,0)": col("decimal(5,0)", precision=5, scale=0),
    "decimal(65,30)": col("decimal(65,30)", precision=65, scale=30),
    "decimal(8,3) unsigned": col("decimal(8,3) unsigned", precision=8, scale=3),
    "float": col("float", precision=12),
    "float unsigned": col("float unsigned", precision=12),
    "float(10,4)": col("float(10,4)", precision=10, scale=4),
    "double": col("double", precision=22),
    "double(12,3)": col("double(12,3)", precision=12, scale=3),
    "varchar utf8mb4": col("varchar(100)", charset="utf8mb4", length=100),
    "varchar latin1": col("varchar(40)", charset="latin1", length=40),
    "char": col("char(10)", charset="utf8mb4", length=10),
    "longtext": col("longtext", charset="utf8mb4", length=4294967295),
    "binary(4)": col("binary(4)", length=4),
    "binary(1)": col("binary(1)", length=1),
    "varbinary": col("varbinary(16)", length=16),
    "blob": col("blob", length=65535),
    "tinyblob": col("tinyblob", length=255),
    "date": col("date"),
    "date not null": col("date", nullable=False),
    "date not null default": col("date", nullable=False, default="'2001-02-03'"),
    "time": col("time", fsp=0),
    "time(1)": col("time(1)", fsp=1),
    "time(3)": col("time(3)", fsp=3),
    "time(6)": col("time(6)", fsp=6),
    "datetime": col("datetime", fsp=0),
    "datetime(3)": col("datetime(3)", fsp=3),
    "datetime(4)": col("datetime(4)", fsp=4),
    "datetime(6)": col("datetime(6)", fsp=6),
    "datetime not null": col("datetime", fsp=0, nullable=False),
    "datetime(6) not null": col("datetime(6)", fsp=6, nullable=False),
    "timestamp": col("timestamp", fsp=0),
    "timestamp(1)": col("timestamp(1)", fsp=1),
    "timestamp(3)": col("timestamp(3)", fsp=3),
    "timestamp(6)": col("timestamp(6)", fsp=6),
    "timestamp not null default": col("timestamp", fsp=0, nullable=False, default="'2000-01-01 00:00:00'"),
    "year": col("year(4)"),
    "enum": col("enum('a','b','c d','é','x,y')", charset="utf8mb4"),
    "enum not null": col("enum('p','q')", charset="utf8mb4", nullable=False),
    "set": col("set('x','y','z','ü')", charset="utf8mb4"),
    "bit(1)": col("bit(1)", precision=1),
    "bit(3)": col("bit(3)", precision=3),
    "bit(10)": col("bit(10)", precision=10),
    "bit(17)": col("bit(17)", precision=17),
    "bit(64)": col("bit(64)", precision=64),
    "geometry": col("geometry"),
    "point": col("point"),
    "uuid": col("uuid"),
}

POINT_4326 = b"\xe6\x10\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf8\xbf\x00\x00\x00\x00\x00\x00\x02@"
POINT_1_2 = b"\x00\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0?\x00\x00\x00\x00\x00\x00\x00@"
UUID_TEXT = "123e4567-e89b-12d3-a456-426614174000"
TD = dt.timedelta
DT = dt.datetime

#: (column, what mysql-replication yields, Debezium's streamed value) with the default modes.
BINLOG = [
    ("tinyint", -128, -128),
    ("tinyint unsigned", 255, 255),
    ("tinyint(1)", 7, 7),
    ("boolean", 2, True),
    ("boolean", 0, False),
    ("smallint unsigned", 65535, 65535),
    ("mediumint unsigned", 16777215, 16777215),
    ("int unsigned", 4294967295, 4294967295),
    ("zerofill", 123456, 123456),
    ("bigint", -9223372036854775808, -9223372036854775808),
    ("bigint unsigned", 18446744073709551615, -1),
    ("bigint unsigned", 9223372036854775808, -9223372036854775808),
    ("decimal(10,2)", Decimal("-12345678.91"), "tmn9LQ=="),
    ("decimal(10,2)", Decimal("0.01"), "AQ=="),
    ("decimal(5,0)", Decimal("99999"), "AYaf"),
    ("decimal(65,30)", Decimal("-1E-30"), "/w=="),
    ("decimal(65,30)", Decimal("0E-30"), "AA=="),
    (
        "decimal(65,30)",
        Decimal("12345678901234567890123456789012345.123456789012345678901234567891"),
        "HgK8HpeFi9xsuVBY80JNfTp/7HsD4maOPwrT",
    ),
    ("decimal(8,3) unsigned", Decimal("99999.999"), "BfXg/w=="),
    ("float", 3.140000104904175, 3.14),
    ("float", -3.4028234663852886e38, -3.4028235e38),
    ("float", 16777216.0, 16777216.0),
    ("float", 2285691904.0, 2285691900.0),  # Java 17: 2.2856919E9 (shortest: 2.285692E9)
    ("float unsigned", 1.1754943508222875e-38, 1.17549435e-38),  # shortest: 1.1754944E-38
    ("float unsigned", 9.043252069217075e16, 9.0432521e16),
    ("float unsigned", 1.0000000116860974e-07, 1e-07),
    ("float(10,4)", -9.999999747378752e-05, -9.999999747378752e-05),
    ("double", -5e-324, -5e-324),
    ("double(12,3)", -0.0010000000000000009, -0.0010000000000000009),
    ("varchar utf8mb4", "日本語 😀 emoji", "日本語 😀 emoji"),
    ("varchar latin1", "café ñ ü ß", "café ñ ü ß"),
    ("char", "trail", "trail"),
    ("longtext", '{"k": [1, 2]}', '{"k": [1, 2]}'),
    ("binary(4)", b"\x01", "AQAAAA=="),  # trailing zero bytes stripped in the binlog, put back
    ("binary(4)", b"\x00\x01\x02\x03", "AAECAw=="),
    ("binary(1)", "", "AA=="),  # mysql-replication: an empty value is ''
    ("varbinary", "", ""),
    ("varbinary", b"\x00\x00\x00\x00", "AAAAAA=="),
    ("blob", b"\xde\xad\xbe\xef", "3q2+7w=="),
    ("tinyblob", b"\x80", "gA=="),
    ("date", dt.date(1000, 1, 1), -354285),
    ("date", dt.date(1969, 12, 31), -1),
    ("date", dt.date(9999, 12, 31), 2932896),
    ("time", TD(days=-35, seconds=3601), -3020399000000),  # -838:59:59
    ("time", TD(days=34, seconds=82799), 3020399000000),  # 838:59:59
    ("time(1)", TD(days=-1, seconds=86399, microseconds=500000), -500000),  # -00:00:00.5
    ("time(3)", -TD(hours=12, minutes=34, seconds=56, microseconds=789000), -45296789000),  # -12:34:56.789
    ("time(3)", TD(microseconds=-1000), -1000),  # -00:00:00.001
    ("time(3)", TD(days=1, microseconds=1000), 86400001000),  # 24:00:00.001
    ("time(6)", TD(microseconds=-1000001), -1000001),  # -00:00:01.000001
    ("time(6)", TD(microseconds=-1), -1),  # -00:00:00.000001
    ("datetime", DT(1000, 1, 1), -30610224000000),
    ("datetime(3)", DT(1969, 12, 31, 23, 59, 59, 999000), -1),
    ("datetime(4)", DT(1969, 12, 31, 23, 59, 59, 100), -999900),
    ("datetime(6)", DT(9999, 12, 31, 23, 59, 59, 999999), 253402300799999999),
    ("timestamp", DT(2038, 1, 19, 3, 14, 7), "2038-01-19T03:14:07Z"),
    ("timestamp", DT(1970, 1, 1), "1970-01-01T00:00:00Z"),  # a zero timestamp streams as the epoch
    ("timestamp(1)", DT(2024, 2, 29, 13, 37, 3), "2024-02-29T13:37:03.0Z"),
    ("timestamp(3)", DT(2024, 2, 29, 13, 37, 3, 500000), "2024-02-29T13:37:03.500Z"),
    ("timestamp(6)", DT(2024, 2, 29, 13, 37, 3, 50000), "2024-02-29T13:37:03.050000Z"),
    ("timestamp(6)", DT(2001, 2, 3, 4, 5, 6, 7), "2001-02-03T04:05:06.000007Z"),
    ("year", 1900, 1900),  # year 0000: mysql-replication and Debezium both say 1900
    ("year", 2155, 2155),
    ("enum", "c d", "c d"),
    ("enum", "x,y", "x\\,y"),  # Debezium's binlog reader escapes the option's comma
    ("enum not null", "", ""),  # an invalid value: index 0
    ("set", {"ü", "x", "y"}, "x,y,ü"),  # in definition order
    ("set", {"z"}, "z"),
    ("bit(1)", "1", True),
    ("bit(1)", "0", False),
    ("bit(3)", "101", "BQ=="),
    ("bit(10)", "1000000001", "AQI="),  # little-endian
    ("bit(17)", "11111111111111111", "//8B"),
    ("bit(64)", "0000000100000010000000110000010000000101000001100000011100001000", "CAcGBQQDAgE="),
    ("geometry", POINT_1_2, {"wkb": "AQEAAAAAAAAAAADwPwAAAAAAAABA", "srid": None}),
    ("point", POINT_4326, {"x": -1.5, "y": 2.25, "wkb": "AQEAAAAAAAAAAAD4vwAAAAAAAAJA", "srid": 4326}),
    ("uuid", b"\xff" * 16, "ffffffff-ffff-ffff-ffff-ffffffffffff"),
]

#: (column, what PyMySQL returns, Debezium's snapshot value) with the default modes.
SNAPSHOT = [
    ("bigint unsigned", 18446744073709551615, -1),
    ("decimal(10,2)", Decimal("12345678.91"), "SZYC0w=="),
    ("float", 3.14, 3.14),
    ("float", -3.40282e38, -3.40282e38),  # MariaDB's text keeps 6 digits (the stream: -3.4028235E38)
    ("float", 16777200.0, 16777200.0),  # the stream: 1.6777216E7
    ("float", 2285690000.0, 2285690110.0),  # 2.28569011E9 on Java 17
    ("float unsigned", 9.04325e16, 9.0432504e16),
    ("float(10,4)", -0.0001, -9.999999747378752e-05),  # read as a Java float, widened
    ("float(10,4)", 123456.7891, 123456.7890625),
    ("double(12,3)", -0.001, -0.001),  # the stream: -0.0010000000000000009
    ("binary(4)", b"\x01\x00\x00\x00", "AQAAAA=="),
    ("varbinary", b"", ""),
    ("date", dt.date(1000, 1, 1), -354285),
    ("date", "0000-00-00", None),  # PyMySQL: a zero date is its text
    ("date", "2020-00-15", None),
    ("date not null", "0000-00-00", 0),
    ("date not null default", "0000-00-00", 11356),  # 2001-02-03, the column's default
    ("datetime not null", "0000-00-00 00:00:00", 0),
    ("datetime(6) not null", "0000-00-00 00:00:00.000000", 0),
    ("time(3)", TD(days=-1, seconds=41103, microseconds=211000), -45296789000),  # PyMySQL reads it right
    ("time(6)", TD(days=-1, seconds=86398, microseconds=999999), -1000001),
    ("datetime(6)", DT(1000, 1, 1, 0, 0, 0, 1), -30610223999999999),
    ("timestamp", "0000-00-00 00:00:00", None),
    ("timestamp not null default", "0000-00-00 00:00:00", "2000-01-01T00:00:00Z"),  # the stream: the epoch
    ("timestamp(1)", DT(2024, 2, 29, 13, 37, 3), "2024-02-29T13:37:03Z"),  # no fraction (the stream: .0)
    ("timestamp(3)", DT(2024, 2, 29, 13, 37, 3, 500000), "2024-02-29T13:37:03.5Z"),
    ("timestamp(6)", DT(2024, 2, 29, 13, 37, 3, 50000), "2024-02-29T13:37:03.05Z"),
    ("timestamp(6)", DT(2038, 1, 19, 3, 14, 7, 999999), "2038-01-19T03:14:07.999999Z"),
    ("enum", "x,y", "x,y"),
    ("set", "x,y,ü", "x,y,ü"),
    ("set", "", ""),
    ("bit(1)", b"\x01", True),
    ("bit(10)", b"\x02\x01", "AQI="),  # PyMySQL: big-endian
    ("bit(64)", b"\x80\x00\x00\x00\x00\x00\x00\x00", "AAAAAAAAAIA="),
    ("uuid", UUID_TEXT, UUID_TEXT),
    ("point", POINT_4326, {"x": -1.5, "y": 2.25, "wkb": "AQEAAAAAAAAAAAD4vwAAAAAAAAJA", "srid": 4326}),
]

STRING_HEX_PRECISE_CONNECT = ValueModes(
    decimal="string", binary="hex", bigint_unsigned="precise", time_precision="connect"
)
DOUBLE_URL_SAFE = ValueModes(decimal="double", binary="base64-url-safe")

#: (modes, column, binlog value, Debezium's value) for the oracle's non-default variants.
BINLOG_MODES = [
    (STRING_HEX_PRECISE_CONNECT, "decimal(65,30)", Decimal("-1E-30"), "-0.000000000000000000000000000001"),
    (STRING_HEX_PRECISE_CONNECT, "decimal(65,30)", Decimal("0E-30"), "0.000000000000000000000000000000"),
    (STRING_HEX_PRECISE_CONNECT, "decimal(8,3) unsigned", Decimal("0.500"), "0.500"),
    (STRING_HEX_PRECISE_CONNECT, "binary(4)", b"\xff\xff", "ffff0000"),
    (STRING_HEX_PRECISE_CONNECT, "binary(1)", "", "00"),
    (STRING_HEX_PRECISE_CONNECT, "varbinary", b"\x0b\x0c", "0b0c"),
    (STRING_HEX_PRECISE_CONNECT, "bigint unsigned", 18446744073709551615, "AP//////////"),
    (STRING_HEX_PRECISE_CONNECT, "bigint unsigned", 9223372036854775808, "AIAAAAAAAAAA"),
    (STRING_HEX_PRECISE_CONNECT, "bigint unsigned", 7, "Bw=="),
    (STRING_HEX_PRECISE_CONNECT, "time", TD(0), 0),
    (STRING_HEX_PRECISE_CONNECT, "time", TD(days=34, seconds=82799), None),  # past 24h: null
    (STRING_HEX_PRECISE_CONNECT, "time(1)", TD(seconds=86399, microseconds=900000), 86399900),
    (STRING_HEX_PRECISE_CONNECT, "time(3)", TD(days=1, microseconds=1000), None),
    (STRING_HEX_PRECISE_CONNECT, "time(6)", TD(microseconds=-1), None),  # negative: null
    (STRING_HEX_PRECISE_CONNECT, "datetime(4)", DT(1969, 12, 31, 23, 59, 59, 100), -1000),  # floor to ms
    (STRING_HEX_PRECISE_CONNECT, "datetime(6)", DT(1000, 1, 1, 0, 0, 0, 1), -30610224000000),
    (STRING_HEX_PRECISE_CONNECT, "datetime(6)", DT(2020, 1, 2, 3, 4, 5, 500000), 1577934245500),
    (STRING_HEX_PRECISE_CONNECT, "bit(3)", "101", "BQ=="),  # bits ignore binary.handling.mode
    (STRING_HEX_PRECISE_CONNECT, "geometry", POINT_1_2, {"wkb": "AQEAAAAAAAAAAADwPwAAAAAAAABA", "srid": None}),
    (DOUBLE_URL_SAFE, "decimal(65,30)", Decimal("12345678901234567890123456789012345.1"), 1.234567890123457e34),
    (DOUBLE_URL_SAFE, "decimal(10,2)", Decimal("0.01"), 0.01),
    (DOUBLE_URL_SAFE, "decimal(10,2)", Decimal("0.00"), 0.0),
    (DOUBLE_URL_SAFE, "binary(4)", b"\xff\xff", "__8AAA=="),
    (DOUBLE_URL_SAFE, "tinyblob", b"\xff", "_w=="),
    (DOUBLE_URL_SAFE, "bigint unsigned", 18446744073709551615, -1),
]

#: (modes, column, snapshot value, Debezium's value) for the oracle's non-default variants.
SNAPSHOT_MODES = [
    (STRING_HEX_PRECISE_CONNECT, "decimal(10,2)", Decimal("0.00"), "0.00"),
    (STRING_HEX_PRECISE_CONNECT, "binary(4)", b"\xff\xff\x00\x00", "ffff0000"),
    (STRING_HEX_PRECISE_CONNECT, "bigint unsigned", 9223372036854775807, "f/////////8="),
    (STRING_HEX_PRECISE_CONNECT, "time(3)", TD(days=-1, seconds=86399, microseconds=999000), None),
    (STRING_HEX_PRECISE_CONNECT, "time(1)", TD(seconds=43200), 43200000),
    (STRING_HEX_PRECISE_CONNECT, "datetime(6) not null", "0000-00-00 00:00:00.000000", 0),
    (STRING_HEX_PRECISE_CONNECT, "date not null default", "0000-00-00", 11356),
    (DOUBLE_URL_SAFE, "decimal(65,30)", Decimal("-1E-30"), -1e-30),
    (DOUBLE_URL_SAFE, "binary(1)", b"\xff", "_w=="),
]


def _equal(value: Any, expected: Any) -> bool:
    return bool(value == expected and type(value) is type(expected))


@pytest.mark.parametrize(("column", "value", "expected"), BINLOG)
def test_binlog_values_are_debeziums(column: str, value: Any, expected: Any) -> None:
    convert = binlog_converter(C[column], ValueModes())
    assert convert is not None
    assert _equal(convert(value), expected), (convert(value), expected)


@pytest.mark.parametrize(("column", "value", "expected"), SNAPSHOT)
def test_snapshot_values_are_debeziums(column: str, value: Any, expected: Any) -> None:
    convert = snapshot_converter(C[column], ValueModes())
    assert convert is not None
    assert _equal(convert(value), expected), (convert(value), expected)


@pytest.mark.parametrize(("modes", "column", "value", "expected"), BINLOG_MODES)
def test_binlog_values_per_mode(modes: ValueModes, column: str, value: Any, expected: Any) -> None:
    convert = binlog_converter(C[column], modes)
    assert convert is not None
    assert _equal(convert(value), expected), (convert(value), expected)


@pytest.mark.parametrize(("modes", "column", "value", "expected"), SNAPSHOT_MODES)
def test_snapshot_values_per_mode(modes: ValueModes, column: str, value: Any, expected: Any) -> None:
    convert = snapshot_converter(C[column], modes)
    assert convert is not None
    assert _equal(convert(value), expected), (convert(value), expected)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("bytes", "+/8A"), ("base64", "+/8A"), ("base64-url-safe", "-_8A"), ("hex", "fbff00")],
)
def test_binary_modes(mode: str, expected: str) -> None:
    """base64 is java.util.Base64's basic encoder, like the JSON converter's bytes; url-safe its
    URL encoder, with padding; hex lower case (HexConverter)."""
    convert = binlog_converter(C["varbinary"], ValueModes(binary=mode))
    assert convert is not None
    assert convert(b"\xfb\xff\x00") == expected


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        ("date", None),  # nullable: null
        ("date not null", 0),  # NOT NULL: the epoch
        ("date not null default", 11356),  # NOT NULL with a default: the default
        ("datetime not null", 0),
        ("datetime(6) not null", 0),
    ],
)
def test_streamed_zero_dates(column: str, expected: Any) -> None:
    convert = binlog_converter(C[column], ValueModes())
    assert convert is not None
    assert convert(temporal.ZERO_DATE) == expected


def test_zero_dates_take_the_default_in_each_mode() -> None:
    column = col("datetime(6)", fsp=6, nullable=False, default="'2020-01-02 03:04:05.5'")
    for modes, expected in ((ValueModes(), 1577934245500000), (ValueModes(time_precision="connect"), 1577934245500)):
        convert = binlog_converter(column, modes)
        assert convert is not None
        assert convert(temporal.ZERO_DATE) == expected
    expression = col("datetime", fsp=0, nullable=False, default="current_timestamp()")
    convert = binlog_converter(expression, ValueModes())
    assert convert is not None
    assert convert(temporal.ZERO_DATE) == 0


def test_an_empty_set_streams_as_the_empty_string() -> None:
    convert = binlog_converter(C["set"], ValueModes())
    assert convert is not None
    assert convert(set()) == ""


#: Java 17's Float.toString (FloatingDecimal) of these float bits, from the JVM itself.
JAVA17_FLOATS = [
    (0x4048F5C3, "3.14"),
    (0x3DCCCCCD, "0.1"),
    (0x00800000, "1.17549435E-38"),
    (0x4B800000, "1.6777216E7"),
    (0xFF7FFFFF, "-3.4028235E38"),
    (0x33D6BF95, "1.0E-7"),
    (0x47F12065, "123456.79"),
    (0x501502F9, "1.0E10"),
    (0x3A83126F, "0.001"),
    (0x42C80000, "100.0"),
    (0x4B18967F, "9999999.0"),
    (0x4F083CE4, "2.2856919E9"),
    (0x5E688E99, "4.18937487E18"),
    (0x5BA0A3F3, "9.0432521E16"),
    (0x000085C1, "4.7982E-41"),  # subnormal
    (0x00000001, "1.4E-45"),
]


@pytest.mark.parametrize(("bits", "java"), JAVA17_FLOATS)
def test_floats_read_as_java_17_writes_them(bits: int, java: str) -> None:
    value = struct.unpack("<f", struct.pack("<I", bits))[0]
    assert float32(value) == float(java)


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (0.002, "0.002"),
        (1e23, "9.999999999999999E22"),  # FloatingDecimal's best-known excess digits
        (2e23, "1.9999999999999998E23"),
        (1e7, "1.0E7"),
        (9999999.999, "9999999.999"),
        (1e-5, "1.0E-5"),
        (5e-324, "4.9E-324"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (123456789.123, "1.23456789123E8"),
        (-0.0010000000000000009, "-0.0010000000000000009"),
        (100.0, "100.0"),
        (-0.0, "-0.0"),
    ],
)
def test_doubles_are_written_as_java_17_does(value: float, java: str) -> None:
    assert java_double_string(value) == java


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),  # MariaDB's json is text: as it is
        ({b"a": 1, b"b": [True, None, 1.5]}, '{"a":1,"b":[true,null,1.5]}'),
        ([1, b"two", {b"x": None}], '[1,"two",{"x":null}]'),
        ({b"s": b'q"\\\n\x01\xc3\xa9'}, '{"s":"q\\"\\\\\\n\\u0001\xe9"}'),
        (
            [1e20, 1.5e-7, 0.5, -2.0],  # new BigDecimal(1.5e-7).toPlainString(), from Java
            "[100000000000000000000,0.00000014999999999999999321221677388293880284209080855362117290496826171875,0.5,-2.0]",
        ),
        ([Decimal("1.50"), Decimal("-0E-2")], "[1.50,0.00]"),
        ([DT(2024, 2, 29, 13, 37, 3, 500000), dt.date(2024, 2, 29)], '["2024-02-29 13:37:03.5","2024-02-29"]'),
        ([TD(hours=-12, minutes=-34, seconds=-56)], '["-12:34:56"]'),
    ],
)
def test_mysql_binary_json_as_debeziums_binlog_reader_writes_it(value: Any, expected: str) -> None:
    """JsonBinary.parseAsString's JsonStringFormatter (mysql-binlog-connector-java): no spaces,
    a double with an exponent expanded exactly (BigDecimal.toPlainString). MySQL only: not in
    the MariaDB oracle."""
    assert mysql_json(value) == expected


def test_json_columns_on_mysql_and_mariadb() -> None:
    mysql = col("json", charset="utf8mb4")
    binlog, snapshot = binlog_converter(mysql, ValueModes()), snapshot_converter(mysql, ValueModes())
    assert binlog is not None and snapshot is not None
    assert binlog({b"k": 1}) == '{"k":1}'
    assert snapshot('{"k": 1}') == '{"k": 1}'  # the server's text, as JDBC gives it
    mariadb = col("longtext", charset="utf8mb4")  # MariaDB's json is longtext with a check
    assert binlog_converter(mariadb, ValueModes()) is not None


@pytest.mark.parametrize("column_type", ["inet6", "inet4", "vector(3)", "something_new"])
def test_types_without_a_debezium_schema_are_left_out(column_type: str, caplog: pytest.LogCaptureFixture) -> None:
    column = col(column_type)
    assert binlog_converter(column, ValueModes()) is None
    assert snapshot_converter(column, ValueModes()) is None


def test_information_schema_rows() -> None:
    mariadb = {
        "COLUMN_NAME": "tsn",
        "DATA_TYPE": "timestamp",
        "COLUMN_TYPE": "timestamp",
        "IS_NULLABLE": "NO",
        "CHARACTER_SET_NAME": None,
        "CHARACTER_MAXIMUM_LENGTH": None,
        "NUMERIC_PRECISION": None,
        "NUMERIC_SCALE": None,
        "DATETIME_PRECISION": 0,
        "COLUMN_DEFAULT": "'2000-01-01 00:00:00'",
    }
    assert MySqlColumn.from_information_schema(mariadb) == MySqlColumn(
        "tsn", "timestamp", "timestamp", nullable=False, fsp=0, default="'2000-01-01 00:00:00'"
    )
    mysql8 = {  # lower-case keys, bytes for text, as some drivers return them
        "column_name": b"n",
        "data_type": b"DECIMAL",
        "column_type": b"decimal(8,3) unsigned zerofill",
        "is_nullable": b"YES",
        "numeric_precision": 8,
        "numeric_scale": 3,
    }
    column = MySqlColumn.from_information_schema(mysql8)
    assert (column.data_type, column.unsigned, column.scale, column.nullable) == ("decimal", True, 3, True)


@pytest.mark.parametrize(
    ("default", "literal"),
    [(None, None), ("NULL", None), ("'2001-02-03'", "2001-02-03"), ("2001-02-03", "2001-02-03"), ("'it''s'", "it's")],
)
def test_default_literals(default: str | None, literal: str | None) -> None:
    assert default_literal(default) == literal


def test_enum_options_keep_quotes_and_commas() -> None:
    assert enum_options("enum('a','it''s','x,y','')") == ["a", "it's", "x,y", ""]


def test_value_modes_from_debezium_config() -> None:
    assert ValueModes.from_config({}) == ValueModes()
    assert ValueModes.from_config(
        {
            "decimal.handling.mode": "STRING",
            "time.precision.mode": "connect",
            "bigint.unsigned.handling.mode": "precise",
            "binary.handling.mode": "base64-url-safe",
        }
    ) == ValueModes("string", "connect", "precise", "base64-url-safe")
    with pytest.raises(ValueError, match=r"time\.precision\.mode"):
        ValueModes.from_config({"time.precision.mode": "adaptive"})  # Debezium refuses it for MySQL


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("date", "not a date"),
        ("datetime(6)", 12),
        ("timestamp(3)", "2024-01-01"),
        ("time", "12:00"),
        ("decimal(10,2)", 1.5),
        ("decimal(10,2)", Decimal("1.234")),  # more fraction digits than the column
        ("bit(10)", "10x"),
        ("point", b"\x00\x00\x00\x00\x01\x02"),
        ("uuid", b"\x00" * 17),
        ("set", 5),
        ("blob", 5),
        ("varchar utf8mb4", 5),
        ("float", "x"),
        ("tinyint", "x"),
    ],
)
def test_unconvertible_values_raise_what_the_caller_catches(column: str, value: Any) -> None:
    convert = binlog_converter(C[column], ValueModes())
    assert convert is not None
    with pytest.raises((ValueError, TypeError, ArithmeticError)):
        convert(value)
