"""The converters against the exact values Debezium 3.7 emitted for the same PostgreSQL text in the
compatibility oracle (tests/compat): bits, hstore, geometry, decimals, floats, intervals,
timestamptz precision, arrays and the types Debezium leaves out."""

from __future__ import annotations

import logging

import pytest

from airflow_cdc.engine.sources.postgres import hstore
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes, converter_for, unavailable_value
from tests.compat.postgres_cases import HSTORE_20, HSTORE_60

TYPES = {
    t.oid: t
    for t in (
        TypeInfo(17, "bytea", "U", "b"),
        TypeInfo(23, "int4", "N", "b"),
        TypeInfo(700, "float4", "N", "b"),
        TypeInfo(701, "float8", "N", "b"),
        TypeInfo(1560, "bit", "V", "b"),
        TypeInfo(1562, "varbit", "V", "b"),
        TypeInfo(1700, "numeric", "N", "b"),
        TypeInfo(1186, "interval", "T", "b"),
        TypeInfo(1184, "timestamptz", "D", "b"),
        TypeInfo(1114, "timestamp", "D", "b"),
        TypeInfo(1082, "date", "D", "b"),
        TypeInfo(790, "money", "N", "b"),
        TypeInfo(19, "name", "S", "b"),
        TypeInfo(28, "xid", "U", "b"),
        TypeInfo(3220, "pg_lsn", "U", "b"),
        TypeInfo(600, "point", "G", "b"),
        TypeInfo(603, "box", "G", "b"),
        TypeInfo(601, "lseg", "G", "b"),
        TypeInfo(602, "path", "G", "b"),
        TypeInfo(604, "polygon", "G", "b"),
        TypeInfo(718, "circle", "G", "b"),
        TypeInfo(628, "line", "G", "b"),
        TypeInfo(90002, "hstore", "U", "b"),
        TypeInfo(90001, "positive", "N", "d", base_oid=23),
        TypeInfo(1231, "_numeric", "A", "b", element_oid=1700),
        TypeInfo(1022, "_float8", "A", "b", element_oid=701),
        TypeInfo(1185, "_timestamptz", "A", "b", element_oid=1184),
        TypeInfo(1115, "_timestamp", "A", "b", element_oid=1114),
        TypeInfo(1561, "_bit", "A", "b", element_oid=1560),
        TypeInfo(791, "_money", "A", "b", element_oid=790),
        TypeInfo(1003, "_name", "A", "b", element_oid=19),
        TypeInfo(1187, "_interval", "A", "b", element_oid=1186),
        TypeInfo(1563, "_varbit", "A", "b", element_oid=1562),
        TypeInfo(1017, "_point", "A", "b", element_oid=600),
        TypeInfo(1020, "_box", "A", "b", element_oid=603),
        TypeInfo(3221, "_pg_lsn", "A", "b", element_oid=3220),
        TypeInfo(90003, "_positive", "A", "b", element_oid=90001),
        TypeInfo(90004, "_hstore", "A", "b", element_oid=90002),
    )
}
NUMERIC_6_2, NUMERIC_5_0 = (6 << 16) + 2 + 4, (5 << 16) + 4


def convert(oid, text, typmod=-1, **modes):
    converter = converter_for(oid, typmod, ValueModes(**modes), TYPES.__getitem__)
    assert converter is not None
    return converter(text)


@pytest.mark.parametrize(
    ("oid", "typmod", "text", "expected"),
    [
        (1560, 1, "1", True),
        (1560, 1, "0", False),
        (1562, 1, "1", True),  # varbit(1) too
        (1560, 3, "101", "BQ=="),
        (1560, 3, "000", ""),  # zero: no bytes at all
        (1560, 8, "10000001", "gQ=="),
        (1560, 9, "100000000", "AAE="),  # little-endian
        (1560, 12, "101010101010", "qgo="),
        (1560, 64, "1" + "0" * 62 + "1", "AQAAAAAAAIA="),
        (1560, 64, "1" * 64, "//////////8="),
        (1562, -1, "1011", "Cw=="),
        (1562, 20, "11111111111", "/wc="),
        (1562, 20, "0", ""),
    ],
)
def test_bits_are_booleans_or_little_endian_bytes(oid, typmod, text, expected):
    assert convert(oid, text, typmod) == expected
    assert convert(oid, text, typmod, binary="hex") == expected  # a Connect BYTES value: base64 always


def _pg_text(pairs):
    """hstore's output: pairs by key length, then bytes; keys and values quoted."""

    def quoted(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    ordered = sorted(pairs, key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
    return ", ".join(f"{quoted(k)}=>{'NULL' if v is None else quoted(v)}" for k, v in ordered)


def test_hstore_json_keys_come_in_java_hashmap_order():
    assert hstore.to_json_string(_pg_text(HSTORE_20)) == HSTORE_20_JSON
    assert hstore.to_json_string(_pg_text(HSTORE_60)) == HSTORE_60_JSON
    assert convert(90002, '"a"=>"1", "b c"=>NULL') == '{"a":"1","b c":null}'
    assert convert(90002, "") == "{}"


def test_hstore_map_mode_and_arrays():
    assert convert(90002, '"a"=>"1", "b c"=>NULL', hstore="map") == {"a": "1", "b c": None}
    assert convert(90004, '{"\\"a\\"=>\\"1\\""}') == ['{"a":"1"}']
    assert convert(90004, '{"\\"a\\"=>\\"1\\""}', hstore="map") == [{"a": "1"}]


def test_java_string_hash_counts_utf16_units():
    assert hstore.java_string_hash("Aa") == hstore.java_string_hash("BB") == 2112
    assert hstore.java_string_hash("😀") == (0xD83D * 31 + 0xDE00) & 0xFFFFFFFF


@pytest.mark.parametrize(
    ("oid", "text", "expected"),
    [
        (600, "(1.5,-2)", {"x": 1.5, "y": -2.0, "wkb": "AQEAAAAAAAAAAAD4PwAAAAAAAADA", "srid": None}),
        (600, "(NaN,Infinity)", {"x": "NaN", "y": "Infinity", "wkb": "AQEAAAAAAAAAAAD4fwAAAAAAAPB/", "srid": None}),
        (
            603,
            "(1,2),(0,0)",
            {
                "wkb": "AQMAAAABAAAABQAAAAAAAAAAAPA/AAAAAAAAAEAAAAAAAADwPwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                "AAAAAAAAAAAEAAAAAAAADwPwAAAAAAAABA",
                "srid": None,
                "extensions": {"type": "box"},
            },
        ),
        (
            601,
            "[(0,0),(1,1)]",
            {
                "wkb": "AQIAAAACAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPA/AAAAAAAA8D8=",
                "srid": None,
                "extensions": {"type": "lseg"},
            },
        ),
        (
            602,
            "[(1,2)]",
            {
                "wkb": "AQIAAAABAAAAAAAAAAAA8D8AAAAAAAAAQA==",
                "srid": None,
                "extensions": {"type": "path", "closed": "false"},
            },
        ),
        (
            602,
            "((0,0))",
            {
                "wkb": "AQIAAAABAAAAAAAAAAAAAAAAAAAAAAAAAA==",
                "srid": None,
                "extensions": {"type": "path", "closed": "true"},
            },
        ),
        (  # closed by Debezium: the first point again
            604,
            "((0,0),(0,1),(1,0))",
            {
                "wkb": "AQMAAAABAAAABAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPA/AAAAAAAA8D8AAAAAAAAAAAAAAAAAAA"
                "AAAAAAAAAAAAA=",
                "srid": None,
                "extensions": {"type": "polygon"},
            },
        ),
        (  # already closed, and a single point: left as it is
            604,
            "((0,0),(1,0),(0,0))",
            {
                "wkb": "AQMAAAABAAAAAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAADwPwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
                "srid": None,
                "extensions": {"type": "polygon"},
            },
        ),
        (
            604,
            "((10000000000,-1e-10))",
            {"wkb": "AQMAAAABAAAAAQAAAAAAACBfoAJCu73X2d98270=", "srid": None, "extensions": {"type": "polygon"}},
        ),
        (
            718,
            "<(0.5,-1e-05),1e+20>",
            {"center": {"x": 0.5, "y": -1e-05, "wkb": "AQEAAAAAAAAAAADgP/Fo44i1+OS+", "srid": None}, "radius": 1e20},
        ),
        (628, "{0,1,-2.5}", {"a": 0.0, "b": 1.0, "c": -2.5}),
    ],
)
def test_geometric_types_are_debeziums_structs(oid, text, expected):
    value = convert(oid, text)
    assert value == expected
    assert all(type(value[k]) is type(expected[k]) for k in expected)  # 1.0, not 1


@pytest.mark.parametrize(
    ("text", "typmod", "mode", "expected"),
    [
        ("1.500", -1, "precise", {"scale": 1, "value": "Dw=="}),  # trailing zeros stripped
        ("100", -1, "precise", {"scale": 0, "value": "ZA=="}),  # scale never negative
        ("0.000", -1, "precise", {"scale": 0, "value": "AA=="}),
        ("NaN", -1, "precise", None),
        ("Infinity", -1, "precise", None),
        ("0.00000000000000000001", -1, "string", "0.00000000000000000001"),
        ("-0.0000000001", NUMERIC_6_2, "string", "-0.0000000001"),
        ("1.500", -1, "string", "1.500"),
        ("NaN", -1, "string", "NAN"),
        ("Infinity", -1, "string", "POSITIVE_INFINITY"),
        ("-Infinity", -1, "string", "NEGATIVE_INFINITY"),
        ("NaN", -1, "double", "NaN"),
        ("-Infinity", -1, "double", "-Infinity"),
        ("1.5", -1, "double", 1.5),
    ],
)
def test_numeric_per_decimal_handling_mode(text, typmod, mode, expected):
    assert convert(1700, text, typmod, decimal=mode) == expected


@pytest.mark.parametrize(
    ("oid", "text", "expected"), [(700, "NaN", "NaN"), (701, "-Infinity", "-Infinity"), (700, "0.1", 0.1)]
)
def test_floats_keep_jacksons_special_values(oid, text, expected):
    assert convert(oid, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("P1Y2M", "P1Y2M0DT0H0M0S"),
        ("P-3DT-1S", "P0Y0M-3DT0H0M-1S"),
        ("PT12.346S", "P0Y0M0DT0H0M12.346S"),
        ("PT-0.5S", "P0Y0M0DT0H0M-0.5S"),
        ("P-1Y", "P-1Y0M0DT0H0M0S"),
        ("P1M15DT0.000001S", "P0Y1M15DT0H0M0.000001S"),
        ("P-1Y-2M3DT-4H-5M-6.789S", "P-1Y-2M3DT-4H-5M-6.789S"),
    ],
)
def test_interval_strings_are_debeziums_iso_strings(text, expected):
    assert convert(1186, text, interval="string") == expected


@pytest.mark.parametrize(
    ("text", "typmod", "expected"),
    [
        ("2024-02-29 11:37:03.5+00", -1, "2024-02-29T11:37:03.500000Z"),
        ("0001-01-01 00:00:00+00", -1, "0001-01-01T00:00:00.000000Z"),
        ("2024-02-29 11:37:03.6+00", 1, "2024-02-29T11:37:03.6Z"),
        ("1970-01-01 00:00:00+00", 1, "1970-01-01T00:00:00.0Z"),
        ("2024-02-29 11:37:03+00", 6, "2024-02-29T11:37:03.000000Z"),
        ("2024-02-29 11:37:03.5+00", 0, "2024-02-29T11:37:03.5Z"),
        ("0044-03-15 13:37:03+00 BC", -1, "-0043-03-15T13:37:03.000000Z"),
        ("0001-12-31 23:59:59.5+00 BC", -1, "0000-12-31T23:59:59.500000Z"),
        ("infinity", 3, "infinity"),
    ],
)
def test_timestamptz_fraction_has_the_columns_precision(text, typmod, expected):
    assert convert(1184, text, typmod) == expected


def test_arrays_take_the_columns_typmod_and_their_elements_modes():
    assert convert(1231, "{1.5,-2.25}", NUMERIC_6_2) == ["AJY=", "/x8="]  # numeric(6,2)[]
    assert convert(1231, "{1,-2}", NUMERIC_5_0) == ["AQ==", "/g=="]
    assert convert(1231, "{1,2.50,-0.001,100}") == [
        {"scale": 0, "value": "AQ=="},
        {"scale": 1, "value": "GQ=="},
        {"scale": 3, "value": "/w=="},
        {"scale": 0, "value": "ZA=="},
    ]
    assert convert(1231, "{1,2.50}", decimal="string") == ["1", "2.50"]
    assert convert(1231, "{1,2.5,NaN}") is None  # a special value nulls the whole array
    assert convert(1231, "{1,-Infinity}", decimal="double") is None
    assert convert(1022, "{1.5,Infinity}") == [1.5, "Infinity"]
    assert convert(1185, '{"2024-02-29 11:37:03.5+00"}', 3) == ["2024-02-29T11:37:03.500Z"]
    assert convert(1185, '{"2024-02-29 11:37:03.5+00"}') == ["2024-02-29T11:37:03.500000Z"]
    assert convert(1115, '{"2024-02-29 13:37:03.5"}', 3) == [1709213823500]
    assert convert(1561, "{101,000}", 3) is None  # bit[]: Debezium's schema is a bit's


@pytest.mark.parametrize("oid", [791, 1003, 1187, 1563, 1017])  # money[], name[], interval[], varbit[], point[]
def test_arrays_without_a_debezium_schema_are_left_out_whatever_the_mode(oid):
    assert converter_for(oid, -1, ValueModes(), TYPES.__getitem__) is None
    assert converter_for(oid, -1, ValueModes(include_unknown=True), TYPES.__getitem__) is None


@pytest.mark.parametrize("oid", [28, 3220, 3221, 90003])  # xid, pg_lsn, pg_lsn[], positive[] (a domain's)
def test_unknown_types_are_left_out_unless_included_as_text_bytes(oid, caplog):
    caplog.set_level(logging.INFO)
    assert converter_for(oid, -1, ValueModes(), TYPES.__getitem__, column=f"public.t.c{oid}") is None
    assert f"public.t.c{oid}" in caplog.text and "include.unknown.datatypes" in caplog.text
    included = ValueModes(include_unknown=True, binary="hex")
    text = "{0/1}" if TYPES[oid].category == "A" else "0/1"
    expected = ["302f31"] if TYPES[oid].category == "A" else "302f31"
    assert converter_for(oid, -1, included, TYPES.__getitem__)(text) == expected
    if TYPES[oid].category != "A":
        assert convert(oid, "12345", include_unknown=True) == "MTIzNDU="  # bytes mode: base64


def test_name_columns_keep_their_value():  # Debezium's streaming emits null: a kept deviation
    assert convert(19, "pg_class") == "pg_class"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("bytes", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="),
        ("hex", "__debezium_unavailable_value"),
        ("base64", None),
        ("base64-url-safe", None),
    ],
)
def test_unavailable_bytea_per_binary_mode(mode, expected):
    assert unavailable_value(17, ValueModes(binary=mode), TYPES.__getitem__) == expected


HSTORE_20_JSON = '{"":"empty key","Aa":"1","BB":null,"key1":"7","key2":"14","a b":"x\\"y","key0":"0","key5":"35","key6":"42","key3":"21","key4":"28","ctl\\u0001":"z","key9":"63","key7":"49","key8":"56","key11":"77","key10":"70","q\'uote":"back\\\\slash","😀":"tab\\tnew\\nline","ü":"✓"}'  # noqa: E501 - what the oracle emitted, verbatim
HSTORE_60_JSON = '{"k31":"v31","k30":"v30","k33":"v33","k32":"v32","k35":"v35","k34":"v34","k37":"v37","k36":"v36","k39":"v39","k38":"v38","AaAa":"1","AaBB":null,"BBAa":"4","BBBB":"2","k40":"v40","k42":"v42","k41":"v41","k00":"v0","k44":"v44","k43":"v43","k02":"v2","k46":"v46","k01":"v1","k45":"v45","k04":"v4","k48":"v48","k03":"v3","k47":"v47","k06":"v6","k05":"v5","k49":"v49","k08":"v8","k07":"v7","k09":"v9","k51":"v51","k50":"v50","k53":"v53","k52":"v52","k11":"v11","k55":"v55","k10":"v10","k54":"v54","k13":"v13","k12":"v12","k15":"v15","k14":"v14","k17":"v17","k16":"v16","k19":"v19","k18":"v18","k20":"v20","k22":"v22","k21":"v21","k24":"v24","k23":"v23","k26":"v26","k25":"v25","k28":"v28","k27":"v27","k29":"v29"}'  # noqa: E501 - what the oracle emitted, verbatim
