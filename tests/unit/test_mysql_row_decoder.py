"""row_decoder.py against mysql-replication's own decoding of the same bytes (hypothesis).

Tables of generated column types, rows of generated values written in MySQL's binlog formats
(``binlog_rows.py``) or recorded from a real MariaDB (``data/mariadb_row_events.json``): our
decoder, given the history's definition and a table map without optional metadata (what
``binlog_row_metadata=NO_LOG`` writes), must yield what the library yields given the same bytes
and a table map with full metadata - but for the library's known misreadings, named below.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.row_decoder import RowDecodeError, compile_table
from airflow_cdc.engine.sources.mysql.schema import SchemaMismatchError
from airflow_cdc.engine.sources.mysql.types import MySqlColumn
from tests.requirements import require_module
from tests.unit.binlog_rows import (
    T,
    date_bytes,
    datetime2_bytes,
    decimal_bytes,
    library_column,
    library_rows,
    librarys,
    same,
    time2_bytes,
    timestamp2_bytes,
)

require_module("pymysqlreplication", extra="mysql")

RECORDED = Path(__file__).parent / "data" / "mariadb_row_events.json"
MAX_TIME_US = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999


@dataclass(frozen=True)
class Kind:
    """A column type: the table map's column (type, metadata and the optional metadata the
    library needs), the history's definition, and its values' bytes."""

    binlog: dict[str, Any]
    column: MySqlColumn
    values: st.SearchStrategy[bytes]


def _prefixed(size: int, data: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return data.map(lambda raw: len(raw).to_bytes(size, "little") + raw)


def _text(size: int, max_chars: int, codec: str = "utf-8") -> st.SearchStrategy[bytes]:
    alphabet = st.characters(codec="cp1252" if codec == "cp1252" else "utf-8", exclude_categories=["Cs"])
    return _prefixed(size, st.text(alphabet, max_size=max_chars).map(lambda s: s.encode(codec)))


def _int(name: str, binlog_type: int, size: int, unsigned: bool) -> Kind:
    column = MySqlColumn("c", name, name + (" unsigned" if unsigned else ""), unsigned=unsigned)
    return Kind({"type": binlog_type, "unsigned": unsigned}, column, st.binary(min_size=size, max_size=size))


def _decimal(precision: int, scale: int) -> Kind:
    bound = Decimal(10) ** (precision - scale) - Decimal(10) ** -scale
    values = st.decimals(-bound, bound, places=scale, allow_nan=False, allow_infinity=False)
    column = MySqlColumn("c", "decimal", f"decimal({precision},{scale})", precision=precision, scale=scale)
    return Kind(
        {"type": T.NEWDECIMAL, "precision": precision, "decimals": scale},
        column,
        values.map(lambda v: decimal_bytes(v, precision, scale)),
    )


_DATES = st.one_of(
    st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)).map(lambda d: date_bytes(d.year, d.month, d.day)),
    st.sampled_from([date_bytes(0, 0, 0), date_bytes(2020, 0, 15), date_bytes(2020, 3, 0)]),
)


def _datetime(fsp: int) -> Kind:
    values = st.one_of(
        st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
        st.none(),  # the zero datetime
    ).map(lambda v: datetime2_bytes(v, fsp))
    return Kind({"type": T.DATETIME2, "fsp": fsp}, MySqlColumn("c", "datetime", f"datetime({fsp})", fsp=fsp), values)


def _timestamp(fsp: int) -> Kind:
    values = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 999_999)).map(
        lambda sm: timestamp2_bytes(sm[0], sm[1], fsp)
    )
    column = MySqlColumn("c", "timestamp", f"timestamp({fsp})", fsp=fsp)
    return Kind({"type": T.TIMESTAMP2, "fsp": fsp}, column, values)


def _time(fsp: int) -> Kind:
    values = st.integers(-MAX_TIME_US, MAX_TIME_US).map(lambda us: time2_bytes(dt.timedelta(microseconds=us), fsp))
    return Kind({"type": T.TIME2, "fsp": fsp}, MySqlColumn("c", "time", f"time({fsp})", fsp=fsp), values)


def _string(data_type: str, length: int, charset: str | None, binlog_type: int) -> Kind:
    max_length = length * (4 if charset == "utf8mb4" else 1)
    prefix = 2 if max_length > 255 else 1
    if charset is None:
        values = _prefixed(prefix, st.binary(max_size=length))
    else:
        values = _text(prefix, length, "cp1252" if charset == "latin1" else "utf-8")
    column = MySqlColumn("c", data_type, f"{data_type}({length})", charset=charset, length=length)
    binlog = {"type": binlog_type, "max_length": max_length, "character_set_name": charset or "binary"}
    return Kind(binlog, column, values)


def _blob(data_type: str, length_size: int, charset: str | None) -> Kind:
    values = _prefixed(length_size, st.binary(max_size=300)) if charset is None else _text(length_size, 100)
    binlog = {"type": T.BLOB, "length_size": length_size, "character_set_name": charset or "binary"}
    return Kind(binlog, MySqlColumn("c", data_type, data_type, charset=charset), values)


ENUM_OPTIONS = ("a", "b,c", "ü")
SET_OPTIONS = ("x", "y", "z", "w")

KINDS: dict[str, Kind] = {
    **{
        f"{name}{' unsigned' if unsigned else ''}": _int(name, binlog_type, size, unsigned)
        for name, binlog_type, size in (
            ("tinyint", T.TINY, 1),
            ("smallint", T.SHORT, 2),
            ("mediumint", T.INT24, 3),
            ("int", T.LONG, 4),
            ("bigint", T.LONGLONG, 8),
        )
        for unsigned in (False, True)
    },
    "float": Kind({"type": T.FLOAT, "size": 4}, MySqlColumn("c", "float", "float"), st.binary(min_size=4, max_size=4)),
    "double": Kind(
        {"type": T.DOUBLE, "size": 8}, MySqlColumn("c", "double", "double"), st.binary(min_size=8, max_size=8)
    ),
    "year": Kind({"type": T.YEAR}, MySqlColumn("c", "year", "year(4)"), st.binary(min_size=1, max_size=1)),
    "decimal(10,2)": _decimal(10, 2),
    "decimal(65,30)": _decimal(65, 30),
    "decimal(19,0)": _decimal(19, 0),
    "decimal(3,3)": _decimal(3, 3),
    "date": Kind({"type": T.DATE}, MySqlColumn("c", "date", "date"), _DATES),
    **{f"datetime({fsp})": _datetime(fsp) for fsp in (0, 1, 3, 4, 6)},
    **{f"timestamp({fsp})": _timestamp(fsp) for fsp in (0, 2, 3, 5, 6)},
    **{f"time({fsp})": _time(fsp) for fsp in (0, 1, 2, 3, 4, 5, 6)},
    "char(10)": _string("char", 10, "utf8mb4", T.STRING),
    "char(100)": _string("char", 100, "utf8mb4", T.STRING),
    "varchar(20)": _string("varchar", 20, "utf8mb4", T.VARCHAR),
    "varchar(300)": _string("varchar", 300, "utf8mb4", T.VARCHAR),
    "varchar(20) latin1": _string("varchar", 20, "latin1", T.VARCHAR),
    "binary(4)": _string("binary", 4, None, T.STRING),
    "binary(16)": _string("binary", 16, None, T.STRING),
    "varbinary(300)": _string("varbinary", 300, None, T.VARCHAR),
    "tinyblob": _blob("tinyblob", 1, None),
    "blob": _blob("blob", 2, None),
    "mediumblob": _blob("mediumblob", 3, None),
    "longblob": _blob("longblob", 4, None),
    "text": _blob("text", 2, "utf8mb4"),
    "longtext": _blob("longtext", 4, "utf8mb4"),
    "enum": Kind(
        {"type": T.ENUM, "size": 1, "enum_values": ["", *ENUM_OPTIONS], "character_set_name": "utf8mb4"},
        MySqlColumn("c", "enum", "enum('a','b,c','ü')", charset="utf8mb4"),
        st.integers(0, len(ENUM_OPTIONS)).map(lambda n: bytes([n])),
    ),
    "set": Kind(
        {"type": T.SET, "size": 1, "set_values": list(SET_OPTIONS), "character_set_name": "utf8mb4"},
        MySqlColumn("c", "set", "set('x','y','z','w')", charset="utf8mb4"),
        st.integers(0, 2 ** len(SET_OPTIONS) - 1).map(lambda n: bytes([n])),
    ),
    **{
        f"bit({bits})": Kind(
            {"type": T.BIT, "bits": bits, "bytes": (bits + 7) // 8},
            MySqlColumn("c", "bit", f"bit({bits})", precision=bits),
            st.binary(min_size=(bits + 7) // 8, max_size=(bits + 7) // 8),
        )
        for bits in (1, 7, 8, 10, 64)
    },
    "geometry": Kind(
        {"type": T.GEOMETRY, "length_size": 4}, MySqlColumn("c", "geometry", "geometry"), _prefixed(4, st.binary())
    ),
}


@dataclass(frozen=True)
class Case:
    kinds: tuple[str, ...]
    rows: tuple[tuple[bytes | None, ...], ...]  # per row, per column: the value's bytes or None (NULL)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    kinds = tuple(draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=9)))
    rows = draw(
        st.lists(
            st.tuples(*(st.one_of(st.none(), KINDS[k].values) if i else KINDS[k].values for i, k in enumerate(kinds))),
            min_size=1,
            max_size=4,
        )
    )
    return Case(kinds, tuple(rows))


def row_bytes(values: tuple[bytes | None, ...]) -> bytes:
    nulls = sum(1 << i for i, value in enumerate(values) if value is None)
    return nulls.to_bytes((len(values) + 7) // 8, "little") + b"".join(v for v in values if v is not None)


#: What a table map without optional metadata (``binlog_row_metadata=NO_LOG``) tells.
BARE = ("type", "max_length", "length_size", "precision", "decimals", "fsp", "size", "bits", "bytes")


def table_of(kinds: tuple[str, ...]) -> tuple[Table, list[Any], list[Any]]:
    """The history's definition, the library's FULL table map, and the NO_LOG one."""
    columns = tuple(replace(KINDS[k].column, name=f"c{i}") for i, k in enumerate(kinds))
    full = [library_column(**{**KINDS[k].binlog, "name": f"c{i}"}) for i, k in enumerate(kinds)]
    return Table("db", "t", columns, ()), full, [bare(KINDS[k].binlog) for k in kinds]


def bare(binlog: dict[str, Any]) -> Any:
    return SimpleNamespace(**{key: value for key, value in binlog.items() if key in BARE})


def assert_decodes_as_the_library(table: Table, full: list[Any], data: bytes, op: str) -> None:
    """Our decoder with the NO_LOG table map and with the FULL one yields the library's values
    (with the FULL table map) of the same bytes."""
    images = 2 if op == "u" else 1
    theirs = library_rows(full, data, {"c": 0x1E, "u": 0x1F, "d": 0x20}[op])
    keys = ("before_", "after_") if images == 2 else ("",)
    for binlog_columns in ([bare(vars(c)) for c in full], full):
        ours = compile_table(binlog_columns, table).decode(data, images)
        assert len(ours) == len(theirs)
        for mine, their in zip(ours, theirs, strict=True):
            for image, key in zip(mine, keys, strict=True):
                values, reasons = their[f"{key}values"], their[f"{key}none_sources"]
                for column, value in zip(table.columns, image, strict=True):
                    expected = librarys(column, values[column.name], reasons.get(column.name))
                    assert same(value, expected), (column.name, column.column_type, value, expected)


def check(case: Case, op: str = "c") -> None:
    table, full, _ = table_of(case.kinds)
    images = 2 if op == "u" else 1
    rows = case.rows[: len(case.rows) // images * images]
    assert_decodes_as_the_library(table, full, b"".join(row_bytes(image) for image in rows), op)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_rows_decode_as_the_library_decodes_them_with_full_metadata(case: Case) -> None:
    check(case)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_updates_decode_both_images(case: Case) -> None:
    if len(case.rows) >= 2:
        check(case, op="u")


def test_binary_values_that_are_not_utf8_decode_as_bytes() -> None:
    """Item 1 of the issue: a binary key beside simple columns stopped the stream (LookupError
    'binary' with full metadata, UnicodeDecodeError without)."""
    case = Case(("binary(4)", "varchar(20)"), ((b"\x04\x00\xff\x80\x00", b"\x02n1"),))
    table, _, no_log = table_of(case.kinds)
    assert compile_table(no_log, table).decode(row_bytes(case.rows[0]), 1) == [((b"\x00\xff\x80\x00", "n1"),)]
    check(case)


def test_unsigned_maxima_enum_and_set_need_no_metadata() -> None:
    """Item 2: without metadata the library read unsigned maxima as -1 and ENUM/SET as None."""
    case = Case(
        ("tinyint unsigned", "int unsigned", "bigint unsigned", "enum", "set"),
        ((b"\xff", b"\xff" * 4, b"\xff" * 8, b"\x02", b"\x05"),),
    )
    table, _, no_log = table_of(case.kinds)
    assert compile_table(no_log, table).decode(row_bytes(case.rows[0]), 1) == [
        ((255, 4294967295, 18446744073709551615, "b,c", {"x", "z"}),)
    ]
    check(case)


def test_a_table_map_that_cannot_be_the_definition_is_a_mismatch_naming_the_column() -> None:
    table, _, no_log = table_of(("int", "varchar(20)"))
    with pytest.raises(
        SchemaMismatchError, match="column c1 is long in the binlog where the schema history has varchar"
    ):
        compile_table([no_log[0], SimpleNamespace(type=T.LONG)], table)
    with pytest.raises(SchemaMismatchError, match="the binlog has 1 columns where the schema history has 2"):
        compile_table(no_log[:1], table)


def test_bytes_that_do_not_decode_name_the_column() -> None:
    table, _, no_log = table_of(("int", "varchar(20)"))
    decoder = compile_table(no_log, table)
    with pytest.raises(RowDecodeError, match="column c1: the bytes are not utf-8"):
        decoder.decode(b"\x00" + b"\x01\x00\x00\x00" + b"\x02\xff\xfe", 1)
    with pytest.raises(RowDecodeError, match="column c1: the value runs past the event's end"):
        decoder.decode(b"\x00" + b"\x01\x00\x00\x00" + b"\x09ab", 1)
    enum_table, _, enum_map = table_of(("int", "enum"))
    with pytest.raises(RowDecodeError, match="column c1: ENUM member 9 is not in the definition"):
        compile_table(enum_map, enum_table).decode(b"\x00\x01\x00\x00\x00\x09", 1)


def _recorded() -> list[dict[str, Any]]:
    return json.loads(RECORDED.read_text()) if RECORDED.exists() else []


@pytest.mark.parametrize("event", _recorded(), ids=lambda e: f"{e['table']}-{e['op']}-{e['index']}")
def test_recorded_row_events_decode_as_the_library_decodes_them(event: dict[str, Any]) -> None:
    """Row events recorded from a real MariaDB 10.11 (``tests/compat/record_row_events.py``):
    every column type of ``tests/compat/mariadb_cases.py``'s type table, edge values included."""
    columns = tuple(MySqlColumn(**c) for c in event["columns"])
    full = [library_column(**b) for b in event["binlog"]]
    assert_decodes_as_the_library(
        Table("db", event["table"], columns, ()), full, base64.b64decode(event["data"]), event["op"]
    )
