import base64
import datetime as dt

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.engine.sources.postgres import temporal
from airflow_cdc.engine.sources.postgres.types import (
    UNAVAILABLE_VALUE,
    TypeInfo,
    ValueModes,
    converter_for,
    parse_array,
    unavailable_value,
)

TYPES = {
    16: TypeInfo(16, "bool", "B", "b"),
    17: TypeInfo(17, "bytea", "U", "b"),
    20: TypeInfo(20, "int8", "N", "b"),
    23: TypeInfo(23, "int4", "N", "b"),
    25: TypeInfo(25, "text", "S", "b"),
    701: TypeInfo(701, "float8", "N", "b"),
    1007: TypeInfo(1007, "_int4", "A", "b", element_oid=23),
    1009: TypeInfo(1009, "_text", "A", "b", element_oid=25),
    1082: TypeInfo(1082, "date", "D", "b"),
    1083: TypeInfo(1083, "time", "D", "b"),
    1114: TypeInfo(1114, "timestamp", "D", "b"),
    1184: TypeInfo(1184, "timestamptz", "D", "b"),
    1266: TypeInfo(1266, "timetz", "D", "b"),
    1186: TypeInfo(1186, "interval", "T", "b"),
    1700: TypeInfo(1700, "numeric", "N", "b"),
    790: TypeInfo(790, "money", "N", "b"),
    90000: TypeInfo(90000, "mood", "E", "e"),
    90001: TypeInfo(90001, "positive", "N", "d", base_oid=23),
}


def convert(oid, text, typmod=-1, **modes):
    return converter_for(oid, typmod, ValueModes(**modes), TYPES.__getitem__)(text)


@given(st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31)))
def test_calendar_arithmetic_matches_datetime(day):
    days = temporal.days_from_civil(day.year, day.month, day.day)
    assert days == (day - dt.date(1970, 1, 1)).days
    assert temporal.civil_from_days(days) == (day.year, day.month, day.day)


@given(st.dates(), st.integers(min_value=1, max_value=15_000))
def test_calendar_arithmetic_before_year_1(day, eras_back):
    """The proleptic Gregorian calendar repeats every 400 years (146097 days), so a BC date is an
    AD date that ``datetime`` knows, moved back whole eras."""
    days = (day - dt.date(1970, 1, 1)).days - eras_back * 146_097
    year = day.year - eras_back * 400
    assert temporal.days_from_civil(year, day.month, day.day) == days
    assert temporal.civil_from_days(days) == (year, day.month, day.day)


def test_numbers_and_booleans():
    assert convert(23, "42") == 42 and convert(20, "-9223372036854775808") == -(2**63)
    assert convert(701, "1.5") == 1.5 and convert(16, "t") is True and convert(16, "f") is False
    assert convert(90001, "7") == 7  # a domain over int4
    assert convert(90000, "happy") == "happy"  # an enum


@pytest.mark.parametrize(
    ("text", "typmod", "mode", "expected"),
    [
        ("1.23", (5 << 16 | 2) + 4, "precise", base64.b64encode(bytes([123])).decode()),
        ("-1.00", (5 << 16 | 2) + 4, "precise", base64.b64encode((-100).to_bytes(1, "big", signed=True)).decode()),
        ("12.5", -1, "precise", {"scale": 1, "value": base64.b64encode(bytes([125])).decode()}),
        ("NaN", -1, "precise", None),
        ("1.23", -1, "double", 1.23),
        ("1.230", -1, "string", "1.230"),
    ],
)
def test_decimal_handling_modes(text, typmod, mode, expected):
    assert convert(1700, text, typmod, decimal=mode) == expected


NUMERIC_18_0 = (18 << 16 | 0) + 4
NUMERIC_18_2 = (18 << 16 | 2) + 4

# Java's BigInteger.toByteArray(), worked out by hand: the fewest two's-complement bytes that
# still carry the sign bit.
JAVA_BYTES = {
    0: b"\x00",
    -1: b"\xff",
    1: b"\x01",
    127: b"\x7f",
    128: b"\x00\x80",
    255: b"\x00\xff",
    256: b"\x01\x00",
    -128: b"\x80",
    -129: b"\xff\x7f",
    -255: b"\xff\x01",
    -256: b"\xff\x00",
    -32768: b"\x80\x00",
    -32769: b"\xff\x7f\xff",
    32767: b"\x7f\xff",
    32768: b"\x00\x80\x00",
    -8388608: b"\x80\x00\x00",
    -(2**63): b"\x80\x00\x00\x00\x00\x00\x00\x00",
    2**63 - 1: b"\x7f\xff\xff\xff\xff\xff\xff\xff",
    2**63: b"\x00\x80\x00\x00\x00\x00\x00\x00\x00",
    10**18 - 1: b"\x0d\xe0\xb6\xb3\xa7\x63\xff\xff",
    -(10**18 - 1): b"\xf2\x1f\x49\x4c\x58\x9c\x00\x01",
}


@pytest.mark.parametrize(("unscaled", "java"), JAVA_BYTES.items(), ids=str)
def test_precise_decimals_are_javas_big_integer_bytes(unscaled, java):
    expected = base64.b64encode(java).decode()
    assert convert(1700, str(unscaled), NUMERIC_18_0) == expected  # the fixed-scale fast path
    whole, cents = divmod(abs(unscaled), 100)
    text = f"{'-' if unscaled < 0 else ''}{whole}.{cents:02d}"  # as PostgreSQL prints numeric(18,2)
    assert convert(1700, text, NUMERIC_18_2) == expected
    assert convert(1700, f"{unscaled}e-2", NUMERIC_18_2) == expected  # the Decimal (slow) path
    assert convert(1700, str(unscaled)) == {"scale": 0, "value": expected}  # variable scale


def test_precise_decimal_examples_in_base64():
    assert convert(1700, "-1.28", NUMERIC_18_2) == "gA=="  # Java: 1 byte; was '/4A=' (2 bytes)
    assert convert(1700, "1.28", NUMERIC_18_2) == "AIA="
    assert convert(1700, "-1.29", NUMERIC_18_2) == "/38="
    assert convert(1700, "0.00", NUMERIC_18_2) == "AA=="


def test_money_parses_the_c_locale_format():
    assert convert(790, "-$1,234.50", decimal="string") == "-1234.50"


def test_temporal_values_follow_time_precision_mode():
    assert convert(1082, "1970-01-02") == 1
    assert convert(1082, "0001-01-01 BC") == temporal.days_from_civil(0, 1, 1) == -719_528
    assert convert(1082, "0044-03-15 BC") == -735_160  # PostgreSQL's count; was -735161
    assert convert(1114, "0044-03-15 12:00:00 BC") == -735_160 * 86_400_000_000 + 43_200_000_000
    assert convert(1114, "2021-07-08 07:27:08.123456") == 1_625_729_228_123_456
    assert convert(1114, "2021-07-08 07:27:08.123", 3) == 1_625_729_228_123
    assert convert(1114, "2021-07-08 07:27:08.123456", time_precision="connect") == 1_625_729_228_123
    assert convert(1083, "01:00:00.5") == 3_600_500_000
    assert convert(1083, "01:00:00.5", 3) == 3_600_500
    assert convert(1083, "01:00:00.5", 3, time_precision="adaptive_time_microseconds") == 3_600_500_000
    assert convert(1114, "2021-07-08 07:27:08.123", 3, time_precision="adaptive_time_microseconds") == 1_625_729_228_123
    assert convert(1184, "2021-07-08 07:27:08.5+00") == "2021-07-08T07:27:08.500000Z"
    assert convert(1184, "2021-07-08 09:27:08+02") == "2021-07-08T07:27:08.000000Z"
    assert convert(1184, "2021-07-08 07:27:08.5+00", 0) == "2021-07-08T07:27:08.5Z"
    # Years past 9999 and before year 1 as Java's ISO formatter prints them (44 BC is year -43).
    assert convert(1184, "12345-01-01 00:00:00+00", 0) == "+12345-01-01T00:00:00Z"
    assert convert(1184, "0044-03-15 12:00:00+00 BC") == "-0043-03-15T12:00:00.000000Z"
    assert convert(1266, "10:00:00+02") == "08:00:00Z"


@pytest.mark.parametrize(
    ("oid", "typmod", "mode", "positive", "negative"),
    [
        # The oracle (Debezium 3.7): MicroTimestamp is Long.MAX_VALUE / MIN_VALUE; in milliseconds
        # (Timestamp, Connect's Timestamp) pgjdbc's DATE_(POSITIVE|NEGATIVE)_INFINITY unchanged.
        (1114, -1, "adaptive", 2**63 - 1, -(2**63)),  # MicroTimestamp
        (1114, 6, "adaptive_time_microseconds", 2**63 - 1, -(2**63)),
        (1114, 3, "adaptive", 9_223_372_036_825_200_000, -9_223_372_036_832_400_000),  # Timestamp (ms)
        (1114, 3, "adaptive_time_microseconds", 9_223_372_036_825_200_000, -9_223_372_036_832_400_000),
        (1114, -1, "connect", 9_223_372_036_825_200_000, -9_223_372_036_832_400_000),
        # Streamed dates: +5877611-06-21 / -5877611-06-22 as epoch days, in every mode.
        (1082, -1, "adaptive", 2_146_033_979, -2_147_472_691),
        (1082, -1, "connect", 2_146_033_979, -2_147_472_691),
        (1184, -1, "adaptive", "infinity", "-infinity"),  # ZonedTimestamp
        (1184, -1, "connect", "infinity", "-infinity"),
    ],
)
def test_infinite_dates_and_timestamps_are_debeziums_and_fit_json(oid, typmod, mode, positive, negative):
    assert convert(oid, "infinity", typmod, time_precision=mode) == positive
    assert convert(oid, "-infinity", typmod, time_precision=mode) == negative
    assert orjson.loads(orjson.dumps([positive, negative])) == [positive, negative]  # was ~9.2e21: TypeError


def test_intervals_numeric_and_string():
    assert convert(1186, "P1DT2H") == (24 + 2) * 3_600_000_000
    assert convert(1186, "P1M") == round(30.4375 * 86_400_000_000)
    assert convert(1186, "PT-1.5S") == -1_500_000
    assert convert(1186, "P1Y2M", interval="string") == "P1Y2M0DT0H0M0S"


def test_bytea_binary_handling_modes():
    assert convert(17, "\\x00ff") == base64.b64encode(b"\x00\xff").decode()
    assert convert(17, "\\x00ff", binary="hex") == "00ff"


def test_arrays_nested_quoted_and_null():
    assert parse_array('{1,NULL,"a,b","q\\"x",{2,3}}') == ["1", None, "a,b", 'q"x', ["2", "3"]]
    assert convert(1007, "{1,2,NULL}") == [1, 2, None]
    assert convert(1009, "{}") == []
    with pytest.raises(ValueError):
        parse_array("{1,2")


def test_unavailable_placeholders():
    modes = ValueModes()
    assert unavailable_value(25, modes, TYPES.__getitem__) == UNAVAILABLE_VALUE
    assert unavailable_value(1009, modes, TYPES.__getitem__) == [UNAVAILABLE_VALUE]
    assert base64.b64decode(unavailable_value(17, modes, TYPES.__getitem__)) == UNAVAILABLE_VALUE.encode()


def test_debeziums_infinite_dates_are_its_local_date_constants():
    assert temporal.days_from_civil(5877611, 6, 21) == temporal.POSITIVE_INFINITY_DAYS
    assert temporal.days_from_civil(-5877611, 6, 22) == temporal.NEGATIVE_INFINITY_DAYS
