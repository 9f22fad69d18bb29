"""airflow_cdc.spark.values decodes what the engine's forward conversions encode (Debezium's values) back into
what a SQL target accepts, in every value-handling mode; undecodable values name what to fix."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import pytest

from airflow_cdc.engine.sources.postgres import hstore, temporal
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes, converter_for
from airflow_cdc.spark import values
from airflow_cdc.spark.values import ColumnType, DecodeError, Modes, decoder_for, json_text

# --- helpers ---------------------------------------------------------------------------------

_ENGINE_MODES = {
    "decimal.handling.mode": "decimal",
    "binary.handling.mode": "binary",
    "time.precision.mode": "time_precision",
    "interval.handling.mode": "interval",
    "hstore.handling.mode": "hstore",
}


def engine_modes(config: dict[str, str]) -> ValueModes:
    modes = {_ENGINE_MODES[k]: v for k, v in config.items() if k in _ENGINE_MODES}
    return ValueModes(include_unknown=config.get("include.unknown.datatypes") == "true", **modes)


def encode(type_name: str, text: str, typmod: int = -1, config: dict[str, str] | None = None, array: bool = False):
    """The engine's value for PostgreSQL text ``text`` of a column of ``type_name``, as it
    travels: serialized to JSON and read back."""
    element = TypeInfo(1, type_name, "X", "b")
    types = {1: element, 2: TypeInfo(2, "_" + type_name, "A", "b", element_oid=1)}
    convert = converter_for(2 if array else 1, typmod, engine_modes(config or {}), types.__getitem__)
    assert convert is not None, f"the engine leaves {type_name} out"
    return json.loads(json.dumps(convert(text)))


def decode(type_name: str, value: Any, config: dict[str, str] | None = None, **column: Any) -> Any:
    """The latest frame's JSON text of ``value``, through the column's decoder."""
    decoder = decoder_for(ColumnType("public.t", "c", type_name, **column), Modes.from_config(config))
    return decoder(json_text(value))


def roundtrip(type_name: str, text: str, typmod: int = -1, config: dict[str, str] | None = None, **column: Any):
    encoded = encode(type_name, text, typmod, config, array=column.get("is_array", False))
    return decode(type_name, encoded, config, **column)


def numeric_typmod(precision: int, scale: int) -> int:
    return ((precision << 16) | scale) + 4


STRING_HEX_MICRO = {
    "decimal.handling.mode": "string",
    "binary.handling.mode": "hex",
    "time.precision.mode": "adaptive_time_microseconds",
    "interval.handling.mode": "string",
}
DOUBLE_URLSAFE_CONNECT = {
    "decimal.handling.mode": "double",
    "binary.handling.mode": "base64-url-safe",
    "time.precision.mode": "connect",
}


# --- modes and helpers -----------------------------------------------------------------------


def test_modes_default_to_debeziums_and_read_connector_keys():
    assert Modes.from_config({}) == Modes()
    modes = Modes.from_config(
        {**STRING_HEX_MICRO, "hstore.handling.mode": "MAP", "include.unknown.datatypes": "true", "other": "x"}
    )
    assert (modes.decimal, modes.binary, modes.time_precision, modes.interval, modes.hstore) == (
        "string",
        "hex",
        "adaptive_time_microseconds",
        "string",
        "map",
    )
    assert modes.include_unknown


def test_an_unknown_mode_names_the_key_and_the_choices():
    with pytest.raises(ValueError, match=r"decimal.handling.mode='exact' is not one of precise, double, string"):
        Modes.from_config({"decimal.handling.mode": "exact"})


@pytest.mark.parametrize("precision", [3, 6])
def test_every_one_of_debeziums_infinite_timestamps_is_infinite_in_either_unit(precision):
    """The decoders take Debezium's stand-ins from the engine's calendar (not a copy): each
    stand-in is far outside the other unit's range, so both units' are read as infinities."""
    for name, expected in (
        ("POSITIVE_INFINITY_US", "infinity"),
        ("POSITIVE_INFINITY_MICRO_TIMESTAMP", "infinity"),
        ("NEGATIVE_INFINITY_US", "-infinity"),
        ("NEGATIVE_INFINITY_MICRO_TIMESTAMP", "-infinity"),
    ):
        assert decode("timestamp", getattr(temporal, name), precision=precision) == expected, name
    for name, expected in (
        ("POSITIVE_INFINITY_DAYS", "infinity"),
        ("SNAPSHOT_POSITIVE_INFINITY_DAYS", "infinity"),
        ("NEGATIVE_INFINITY_DAYS", "-infinity"),
        ("SNAPSHOT_NEGATIVE_INFINITY_DAYS", "-infinity"),
    ):
        assert decode("date", getattr(temporal, name)) == expected, name


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        ("x", "x"),
        (True, "true"),
        (False, "false"),
        (12, "12"),
        (-1.5, "-1.5"),
        (1e308, "1e+308"),
        (Decimal("1.50"), "1.50"),
        ({"a": [1, "ü"]}, '{"a":[1,"ü"]}'),
        ([1, None], "[1,null]"),
    ],
)
def test_json_text_is_the_latest_frames_form(value, text):
    assert json_text(value) == text


def test_pass_through_types_get_no_per_value_work():
    for name in ("int4", "int8", "float8", "bool", "text", "varchar", "jsonb", "uuid", "inet", "timetz", "tsrange"):
        decoder = decoder_for(ColumnType("t", "c", name), Modes())
        assert decoder("x") == "x" and decoder(None) is None
        assert decoder is values.pass_through  # the target skips it


def test_null_is_null_for_every_decoder():
    for name in ("numeric", "date", "timestamp", "bytea", "point", "hstore", "interval", "bit", "money"):
        assert decoder_for(ColumnType("t", "c", name, scale=2), Modes())(None) is None
    assert decoder_for(ColumnType("t", "c", "int4", is_array=True), Modes())(None) is None


# --- PostgreSQL: numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "typmod", "scale", "config", "expected"),
    [
        ("12345.678", numeric_typmod(10, 3), 3, {}, "12345.678"),
        ("-0.001", numeric_typmod(10, 3), 3, {}, "-0.001"),
        ("-999999999999", numeric_typmod(12, 0), 0, {}, "-999999999999"),
        ("1234567890123456789012345678.0123456789", numeric_typmod(38, 10), 10, {}, None),
        ("-0.0000000001", numeric_typmod(38, 10), 10, {}, None),
        ("3.14159265358979", -1, None, {}, None),
        ("1.500", -1, None, {}, "1.5"),  # VariableScaleDecimal strips trailing zeros
        ("100", -1, None, {}, "100"),
        ("0.000", -1, None, {}, "0"),
        ("-0.00000000000000000001", -1, None, {}, None),
        ("NaN", numeric_typmod(10, 3), 3, {}, "-"),  # precise mode: null
        ("Infinity", -1, None, {}, "-"),
        ("12345.678", numeric_typmod(10, 3), 3, STRING_HEX_MICRO, "12345.678"),
        ("NaN", -1, None, STRING_HEX_MICRO, "NaN"),
        ("-Infinity", -1, None, STRING_HEX_MICRO, "-Infinity"),
        ("12345.678", numeric_typmod(10, 3), 3, DOUBLE_URLSAFE_CONNECT, "12345.678"),
        ("NaN", -1, None, DOUBLE_URLSAFE_CONNECT, "NaN"),
    ],
)
def test_numeric_in_every_decimal_mode(text, typmod, scale, config, expected):
    decoded = roundtrip("numeric", text, typmod, config, scale=scale)
    if expected == "-":
        assert decoded is None
    else:
        assert decoded == (text if expected is None else expected)


def test_numeric_precise_values_decode_to_the_exact_digits():
    for unscaled in (0, 1, -1, 127, 128, -128, -129, 255, 256, 10**38 - 1, -(10**38) + 1):
        raw = base64.b64encode(unscaled.to_bytes(17, "big", signed=True)).decode()  # padded: still the value
        assert Decimal(decode("numeric", raw, scale=4)) == Decimal(f"{unscaled}e-4")
        variable = {"scale": 3, "value": raw}
        assert Decimal(decode("numeric", variable, scale=None)) == Decimal(f"{unscaled}e-3")


@pytest.mark.parametrize(
    ("text", "config", "expected"),
    [
        ("$12.34", {}, "12.34"),
        ("-$92,233,720,368,547,758.08", {}, "-92233720368547758.08"),
        ("($1,234.50)", {}, "-1234.50"),
        ("$12.34", STRING_HEX_MICRO, "12.34"),
        ("$12.34", DOUBLE_URLSAFE_CONNECT, "12.34"),
    ],
)
def test_money(text, config, expected):
    assert roundtrip("money", text, config=config) == expected


def test_money_as_a_double_never_has_an_exponent():
    assert decode("money", 1.5e16, DOUBLE_URLSAFE_CONNECT) == "15000000000000000"


@pytest.mark.parametrize(
    ("type_name", "text", "expected"),
    [
        ("int2", "-32768", "-32768"),
        ("int8", "9223372036854775807", "9223372036854775807"),
        ("oid", "4000000000", "4000000000"),
        ("float4", "1.5", "1.5"),
        ("float8", "NaN", "NaN"),
        ("float8", "-Infinity", "-Infinity"),
        ("float8", "1e+308", "1e+308"),
        ("bool", "t", "true"),
        ("bool", "f", "false"),
    ],
)
def test_numbers_and_booleans_are_postgresql_input_as_they_are(type_name, text, expected):
    assert roundtrip(type_name, text) == expected


# --- PostgreSQL: bits and bytes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "typmod", "text", "expected"),
    [
        ("bit", 1, "1", "1"),
        ("bit", 1, "0", "0"),
        ("varbit", 1, "1", "1"),
        ("bit", 3, "101", "101"),
        ("bit", 3, "001", "001"),
        ("bit", 3, "000", "000"),
        ("bit", 12, "101010101010", "101010101010"),
        ("bit", 64, "1" + "0" * 62 + "1", "1" + "0" * 62 + "1"),
        ("bit", 64, "1" * 64, "1" * 64),
        ("varbit", -1, "1011", "1011"),
        ("varbit", 20, "11111111111", "11111111111"),
        ("varbit", -1, "0011", "11"),  # Debezium's Bits keeps no leading zeros
        ("varbit", -1, "", "0"),
    ],
)
def test_bit_strings(type_name, typmod, text, expected):
    length = None if typmod < 0 else typmod
    assert roundtrip(type_name, text, typmod, length=length) == expected


@pytest.mark.parametrize("mode", ["bytes", "base64", "base64-url-safe", "hex"])
def test_bytea_in_every_binary_mode(mode):
    config = {"binary.handling.mode": mode}
    for text, raw in (
        ("\\x00ff10", b"\x00\xff\x10"),
        ("\\x", b""),
        ("\\x" + "fbff" * 100, bytes.fromhex("fbff" * 100)),
    ):
        assert roundtrip("bytea", text, config=config) == raw


def test_bits_are_base64_whatever_the_binary_mode():
    assert roundtrip("bit", "101", 3, {"binary.handling.mode": "hex"}, length=3) == "101"


# --- PostgreSQL: temporal ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-02-29", "2024-02-29"),
        ("1970-01-01", "1970-01-01"),
        ("0001-01-01", "0001-01-01"),
        ("0044-03-15 BC", "0044-03-15 BC"),
        ("0001-12-31 BC", "0001-12-31 BC"),
        ("4713-11-24 BC", "4713-11-24 BC"),
        ("10000-01-01", "10000-01-01"),
        ("5874897-12-31", "5874897-12-31"),
        ("infinity", "infinity"),
        ("-infinity", "-infinity"),
    ],
)
def test_dates(text, expected):
    assert roundtrip("date", text) == expected


def test_the_snapshots_infinite_dates_are_infinite():
    assert decode("date", temporal.SNAPSHOT_POSITIVE_INFINITY_DAYS) == "infinity"
    assert decode("date", temporal.SNAPSHOT_NEGATIVE_INFINITY_DAYS) == "-infinity"


@pytest.mark.parametrize(
    ("text", "precision", "config", "expected"),
    [
        ("13:37:03.123456", 6, {}, "13:37:03.123456"),
        ("13:37:03.5", None, {}, "13:37:03.500000"),
        ("13:37:03.123", 3, {}, "13:37:03.123000"),
        ("13:37:03", 0, {}, "13:37:03"),
        ("24:00:00", 6, {}, "24:00:00"),
        ("00:00:00", 6, {}, "00:00:00"),
        ("13:37:03.123", 3, STRING_HEX_MICRO, "13:37:03.123000"),
        ("13:37:03.123456", 6, DOUBLE_URLSAFE_CONNECT, "13:37:03.123000"),  # connect: milliseconds
    ],
)
def test_times(text, precision, config, expected):
    typmod = -1 if precision is None else precision
    assert roundtrip("time", text, typmod, config, precision=precision) == expected


@pytest.mark.parametrize(
    ("text", "precision", "config", "expected"),
    [
        ("2024-02-29 13:37:03.123456", 6, {}, "2024-02-29 13:37:03.123456"),
        ("2024-02-29 13:37:03.5", None, {}, "2024-02-29 13:37:03.500000"),
        ("2024-02-29 13:37:03.124", 3, {}, "2024-02-29 13:37:03.124000"),
        ("1900-01-01 00:00:00", 0, {}, "1900-01-01 00:00:00"),
        ("1969-12-31 23:59:59.999999", 6, {}, "1969-12-31 23:59:59.999999"),
        ("9999-12-31 23:59:59", 0, {}, "9999-12-31 23:59:59"),
        ("10000-06-01 00:00:00", 6, {}, "10000-06-01 00:00:00"),
        ("0044-03-15 13:37:03 BC", 6, {}, "0044-03-15 13:37:03 BC"),
        ("0001-12-31 23:59:59.5 BC", 6, {}, "0001-12-31 23:59:59.500000 BC"),
        ("infinity", 6, {}, "infinity"),
        ("-infinity", 6, {}, "-infinity"),
        ("infinity", 3, {}, "infinity"),
        ("-infinity", 3, DOUBLE_URLSAFE_CONNECT, "-infinity"),
        ("2024-02-29 13:37:03.123456", 6, DOUBLE_URLSAFE_CONNECT, "2024-02-29 13:37:03.123000"),
        ("2024-02-29 13:37:03.124", 3, STRING_HEX_MICRO, "2024-02-29 13:37:03.124000"),
    ],
)
def test_timestamps(text, precision, config, expected):
    typmod = -1 if precision is None else precision
    assert roundtrip("timestamp", text, typmod, config, precision=precision) == expected


@pytest.mark.parametrize(
    ("text", "typmod", "expected"),
    [
        ("2024-02-29 13:37:03.5+02", -1, "2024-02-29T11:37:03.500000Z"),
        ("2024-02-29 13:37:03+02", 0, "2024-02-29T11:37:03Z"),
        ("10000-06-01 00:00:00+00", -1, "10000-06-01T00:00:00.000000Z"),
        ("0044-03-15 13:37:03+00 BC", -1, "0044-03-15 13:37:03.000000+00 BC"),
        ("0001-12-31 23:59:59.5+00 BC", 1, "0001-12-31 23:59:59.5+00 BC"),
        ("infinity", -1, "infinity"),
        ("-infinity", -1, "-infinity"),
    ],
)
def test_timestamptz(text, typmod, expected):
    assert roundtrip("timestamptz", text, typmod) == expected


def test_timetz_is_iso_in_utc():
    assert roundtrip("timetz", "13:37:03.5+02") == "11:37:03.5Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("P1Y2M3DT4H5M6.5S", "429 days 07:05:06.500000"),  # months as 30.4375 days, as Debezium
        ("PT12.3456S", "0 days 00:00:12.345600"),
        ("P-3DT-1S", "-3 days -00:00:01"),
        ("PT0S", "0 days 00:00:00"),
    ],
)
def test_intervals_in_numeric_mode(text, expected):
    assert roundtrip("interval", text) == expected
    # ... which the engine encodes back to the same microseconds
    assert encode("interval", _iso_interval(expected)) == encode("interval", text)


def _iso_interval(text: str) -> str:
    """'-3 days -00:00:01' -> 'P-3DT-1S' (what PostgreSQL would print under iso_8601)."""
    negative = text.startswith("-")
    days, _, clock = text.lstrip("-").partition(" days ")
    hours, minutes, seconds = clock.lstrip("-").split(":")
    sign = "-" if negative else ""
    return f"P{sign}{days}DT{sign}{int(hours)}H{sign}{int(minutes)}M{sign}{float(seconds)}S"


@pytest.mark.parametrize("fields", ["YEAR TO MONTH", "YEAR", "MONTH"])
def test_year_to_month_intervals_get_their_months_back(fields):
    typmod = -1  # the engine's value does not depend on the fields
    assert roundtrip("interval", "P1Y2M", typmod, interval_fields=fields) == "14 mons"
    assert roundtrip("interval", "P-1Y", typmod, interval_fields=fields) == "-12 mons"


def test_intervals_in_string_mode_are_postgresql_input():
    assert roundtrip("interval", "P1Y2M3DT4H5M6.5S", config=STRING_HEX_MICRO) == "P1Y2M3DT4H5M6.5S"
    assert roundtrip("interval", "P-1Y-2M3DT-4H-5M-6.789S", config=STRING_HEX_MICRO) == "P-1Y-2M3DT-4H-5M-6.789S"


# --- PostgreSQL: strings, hstore, geometry -----------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "text"),
    [
        ("text", "text ü ✓"),
        ("varchar", ""),
        ("bpchar", "ab "),
        ("char", "x"),
        ("name", "name"),
        ("citext", "CiText"),
        ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ("json", '{"a": [1, 2.50]}'),
        ("jsonb", '{"a": 1, "b": null}'),
        ("xml", '<a x="1">t</a>'),
        ("inet", "192.168.0.1/24"),
        ("cidr", "2001:db8::/32"),
        ("macaddr", "08:00:2b:01:02:03"),
        ("macaddr8", "08:00:2b:01:02:03:04:05"),
        ("int4range", "[1,10)"),
        ("tstzrange", '["2024-01-01 00:00:00+00","2024-01-31 22:00:00+00")'),
        ("tsvector", "'a' 'cat' 'fat'"),
        ("ltree", "top.science"),
    ],
)
def test_string_types_are_their_text(type_name, text):
    assert roundtrip(type_name, text) == text


def test_enums_are_their_label():
    assert decode("mood", "ok 'quoted'", is_enum=True) == "ok 'quoted'"


@pytest.mark.parametrize("mode", ["json", "map"])
def test_hstore_in_both_modes(mode):
    text = '"a"=>"1", "b c"=>NULL, "q\\"uote"=>"back\\\\slash", ""=>"empty key", "ü"=>"tab\tnew\nline"'
    decoded = roundtrip("hstore", text, config={"hstore.handling.mode": mode})
    assert dict(hstore.parse(decoded)) == dict(hstore.parse(text))  # json mode: in HashMap order
    assert roundtrip("hstore", "", config={"hstore.handling.mode": mode}) == ""


@pytest.mark.parametrize(
    ("type_name", "text", "expected"),
    [
        ("point", "(1.5,-2)", "(1.5,-2.0)"),
        ("point", "(NaN,Infinity)", "(NaN,Infinity)"),
        ("point", "(-0,1e-300)", "(-0.0,1e-300)"),
        ("box", "(1,2),(0,0)", "(1.0,2.0),(0.0,0.0)"),
        ("box", "(4,3),(1,2)", "(4.0,3.0),(1.0,2.0)"),
        ("lseg", "[(0,0),(1,1)]", "[(0.0,0.0),(1.0,1.0)]"),
        ("path", "[(0,0),(1,1),(2,0)]", "[(0.0,0.0),(1.0,1.0),(2.0,0.0)]"),
        ("path", "((0,0),(1,1),(2,0))", "((0.0,0.0),(1.0,1.0),(2.0,0.0))"),
        ("polygon", "((0,0),(0,1),(1,0))", "((0.0,0.0),(0.0,1.0),(1.0,0.0))"),
        ("polygon", "((1e10,-1e-10))", "((10000000000.0,-1e-10))"),
        ("polygon", "((5,5),(6,6))", "((5.0,5.0),(6.0,6.0))"),
        ("circle", "<(0.5,-1e-05),1e+20>", "<(0.5,-1e-05),1e+20>"),
        ("line", "{1,-1,0}", "{1.0,-1.0,0.0}"),
    ],
)
def test_geometry(type_name, text, expected):
    assert roundtrip(type_name, text) == expected


# --- PostgreSQL: arrays ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "text", "column", "config", "expected"),
    [
        ("int4", "{1,NULL,3}", {}, {}, '{"1",NULL,"3"}'),
        ("int4", "{{1,2},{3,4}}", {}, {}, '{{"1","2"},{"3","4"}}'),
        ("int4", "{}", {}, {}, "{}"),
        ("text", '{"x y",NULL,"","a,b","q\\"t","NULL","back\\\\slash"}', {}, {}, None),
        ("numeric", "{1.5,-2.25}", {"scale": 2, "typmod": numeric_typmod(6, 2)}, {}, '{"1.50","-2.25"}'),
        ("numeric", "{1,2.50,-0.001,100}", {}, {}, '{"1","2.5","-0.001","100"}'),
        ("numeric", "{1,2.5,NaN}", {}, {}, "-"),  # Debezium: null
        ("bool", "{t,f}", {}, {}, '{"true","false"}'),
        ("date", '{2024-02-29,"0044-03-15 BC"}', {}, {}, '{"2024-02-29","0044-03-15 BC"}'),
        ("timestamptz", '{"2024-02-29 13:37:03.5+02"}', {}, {}, '{"2024-02-29T11:37:03.500000Z"}'),
        ("float8", "{1.5,Infinity,NaN}", {}, {}, '{"1.5","Infinity","NaN"}'),
        ("bytea", '{"\\\\x00ff"}', {}, {}, '{"\\\\x00ff"}'),
        ("bytea", '{"\\\\x00ff"}', {}, {"binary.handling.mode": "hex"}, '{"\\\\x00ff"}'),
        ("box", "{(1,2),(0,0);(3,3),(2,2)}", {}, {}, '{"(1.0,2.0),(0.0,0.0)";"(3.0,3.0),(2.0,2.0)"}'),
        ("hstore", '{"\\"a\\"=>\\"1\\""}', {}, {"hstore.handling.mode": "map"}, '{"\\"a\\"=>\\"1\\""}'),
        ("uuid", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", {}, {}, None),
        ("inet", "{192.168.0.1/24}", {}, {}, None),
        ("time", "{13:37:03.5}", {"precision": 6}, {}, '{"13:37:03.500000"}'),
        ("mood", "{sad,happy}", {"is_enum": True}, {}, '{"sad","happy"}'),
    ],
)
def test_arrays_are_postgresql_array_input(type_name, text, column, config, expected):
    column = dict(column)
    typmod = column.pop("typmod", -1)
    if type_name == "mood":
        decoded = decode("mood", ["sad", "happy"], is_array=True, **column)
    else:
        decoded = roundtrip(type_name, text, typmod, config, is_array=True, **column)
    if expected == "-":
        assert decoded is None
    else:
        assert decoded == (expected or _quoted_array(text)), decoded


def _quoted_array(text: str) -> str:
    """PostgreSQL's array text with every element quoted (what the decoder writes)."""
    from airflow_cdc.engine.sources.postgres.types import parse_array

    def quote(item: Any) -> str:
        if item is None:
            return "NULL"
        if isinstance(item, list):
            return "{" + ",".join(quote(i) for i in item) + "}"
        return '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return quote(parse_array(text))


# --- PostgreSQL: types Debezium does not know --------------------------------------------------------


def test_unknown_types_with_include_unknown_datatypes_are_their_text():
    config = {"include.unknown.datatypes": "true", "binary.handling.mode": "hex"}
    assert roundtrip("pg_lsn", "16/B374D848", config=config) == "16/B374D848"
    assert roundtrip("tsquery", "'fat' & 'cat'", config=config) == "'fat' & 'cat'"
    assert roundtrip("pg_lsn", "{0/1}", config=config, is_array=True) == '{"0/1"}'
    assert decode("pg_lsn", "16/B374D848") == "16/B374D848"  # without: the text as it is


# --- errors --------------------------------------------------------------------------------------


def test_a_value_in_another_decimal_mode_names_the_setting():
    with pytest.raises(DecodeError) as caught:
        decode("numeric", "12.5", scale=2)  # string mode's value, precise mode's decoder
    message = str(caught.value)
    assert "column c of public.t" in message and "'12.5'" in message
    assert "Set decimal.handling.mode the same as the connector's (here it is 'precise')" in message
    assert (caught.value.table, caught.value.column, caught.value.value) == ("public.t", "c", "12.5")


def test_a_fixed_scale_decimal_for_a_numeric_without_scale_says_to_declare_the_scale():
    with pytest.raises(DecodeError, match=r"declare the target column with the source's numeric\(p,s\)"):
        decode("numeric", "AMg=", scale=None)


def test_binary_in_another_mode_names_the_setting():
    with pytest.raises(DecodeError, match=r"Set binary.handling.mode the same as the connector's \(here it is 'hex'\)"):
        decode("bytea", "AP8Q", {"binary.handling.mode": "hex"})
    with pytest.raises(DecodeError, match=r"binary\.handling\.mode"):
        decode("bytea", "00ff10", {"binary.handling.mode": "base64"})


def test_a_value_of_another_type_says_the_types_must_match():
    with pytest.raises(DecodeError, match=r"column c of public.t \(date\), value '2024-02-29'.*must match"):
        decode("date", "2024-02-29")
    with pytest.raises(DecodeError, match="8 bits for a bit\\(3\\)"):
        decode("bit", base64.b64encode(b"\xff").decode(), length=3)


def test_long_values_are_cut_in_the_message():
    with pytest.raises(DecodeError) as caught:
        decode("numeric", "x" * 501, scale=2)
    assert "x" * 60 + "..." in str(caught.value) and "x" * 61 not in str(caught.value)


def test_an_undecodable_array_element_fails_the_column():
    with pytest.raises(DecodeError, match=r"int4\[\]|numeric\[\]"):
        decode("numeric", ["not base64!"], is_array=True, scale=2)


# --- MySQL / MariaDB targets ---------------------------------------------------------------------


def mysql(data_type: str, column_type: str, value: Any, config: dict[str, str] | None = None, **kw: Any) -> Any:
    column = ColumnType.mysql("db.t", "c", data_type, column_type, kw.get("scale"), kw.get("precision"))
    return decoder_for(column, Modes.from_config(config))(json_text(value))


def test_mysql_column_type_gives_the_width():
    column = ColumnType.mysql("db.t", "c", "TINYINT", "tinyint(1)", 0, None)
    assert (column.type_name, column.length, column.dialect) == ("tinyint", 1, "mysql")


@pytest.mark.parametrize(
    ("data_type", "column_type", "value", "kw", "config", "expected"),
    [
        ("int", "int(11)", 42, {}, {}, 42),
        ("bigint", "bigint(20) unsigned", 18446744073709551615, {}, {}, 18446744073709551615),
        ("tinyint", "tinyint(1)", True, {}, {}, 1),
        ("tinyint", "tinyint(1)", False, {}, {}, 0),
        ("year", "year(4)", 2024, {}, {}, 2024),
        ("decimal", "decimal(12,3)", "ALxhTg==", {"scale": 3}, {}, Decimal("12345.678")),
        ("decimal", "decimal(12,3)", {"scale": 1, "value": "Dw=="}, {"scale": 3}, {}, Decimal("1.5")),
        ("decimal", "decimal(12,3)", "12345.678", {"scale": 3}, STRING_HEX_MICRO, Decimal("12345.678")),
        ("decimal", "decimal(12,3)", 12345.678, {"scale": 3}, DOUBLE_URLSAFE_CONNECT, Decimal("12345.678")),
        ("double", "double", 2.25, {}, {}, 2.25),
        ("float", "float", 1.5, {}, {}, 1.5),
        ("varchar", "varchar(20)", "text ü", {}, {}, "text ü"),
        ("json", "longtext", '{"a":1}', {}, {}, '{"a":1}'),
        ("enum", "enum('a','b')", "b", {}, {}, "b"),
        ("date", "date", 19782, {}, {}, "2024-02-29"),
        ("date", "date", "2024-02-29", {}, {}, "2024-02-29"),
        ("datetime", "datetime(6)", 1709213823123456, {"precision": 6}, {}, "2024-02-29 13:37:03.123456"),
        ("datetime", "datetime(3)", 1709213823124, {"precision": 3}, {}, "2024-02-29 13:37:03.124000"),
        ("datetime", "datetime", 1709213823000, {"precision": 0}, {}, "2024-02-29 13:37:03"),
        (
            "datetime",
            "datetime(6)",
            1709213823124,
            {"precision": 6},
            DOUBLE_URLSAFE_CONNECT,
            "2024-02-29 13:37:03.124000",
        ),
        (
            "timestamp",
            "timestamp(6)",
            "2024-02-29T11:37:03.500000Z",
            {"precision": 6},
            {},
            "2024-02-29 11:37:03.500000",
        ),
        ("time", "time(6)", 49023500000, {"precision": 6}, {}, "13:37:03.500000"),
        ("time", "time(6)", -3723000000, {"precision": 6}, {}, "-01:02:03"),
        ("time", "time", 90000000, {"precision": 0}, STRING_HEX_MICRO, "00:01:30"),
        ("time", "time(6)", "11:37:03.5Z", {"precision": 6}, {}, "11:37:03.5"),
        ("blob", "blob", "AP8Q", {}, {}, b"\x00\xff\x10"),
        ("varbinary", "varbinary(8)", "00ff10", {}, STRING_HEX_MICRO, b"\x00\xff\x10"),
        ("bit", "bit(1)", True, {}, {}, 1),
        ("bit", "bit(12)", "qgo=", {}, {}, 0b101010101010),
    ],
)
def test_mysql_decoders(data_type, column_type, value, kw, config, expected):
    assert mysql(data_type, column_type, value, config, **kw) == expected


def test_mysql_refuses_what_it_cannot_store():
    with pytest.raises(DecodeError, match="MySQL cannot store NaN or an infinity"):
        mysql("double", "double", "NaN")
    with pytest.raises(DecodeError, match="MySQL cannot store NaN or an infinity"):
        mysql("decimal", "decimal(5,2)", "NAN", STRING_HEX_MICRO, scale=2)
    with pytest.raises(DecodeError, match=r"outside 0001-01-01\.\.9999-12-31"):
        mysql("date", "date", temporal.POSITIVE_INFINITY_DAYS)
    with pytest.raises(DecodeError, match=r"outside years 0001\.\.9999"):
        mysql("datetime", "datetime(6)", temporal.POSITIVE_INFINITY_MICRO_TIMESTAMP, precision=6)
    with pytest.raises(DecodeError, match=r"Set decimal\.handling\.mode"):
        mysql("decimal", "decimal(5,2)", "1.5", scale=2)
