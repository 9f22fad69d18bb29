"""The snapshot's server-computed values (snapshot_columns) equal what the reference text
converters in types.py make of the same rows, for every type of the Debezium oracle's cases
(tests/compat), edge values, and every value mode - one source of truth for values."""

from __future__ import annotations

import itertools
import json
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.sources.postgres import catalog as cat
from airflow_cdc.engine.sources.postgres.changes import ChangeBuilder, plan_table
from airflow_cdc.engine.sources.postgres.snapshot import SnapshotReader
from airflow_cdc.engine.sources.postgres.snapshot_columns import plan_columns
from airflow_cdc.engine.sources.postgres.types import SESSION_OPTIONS, ValueModes
from tests.compat import postgres_cases as cases

EDGES = """
create table edges (
    id int primary key, n2 numeric(5,2), n0 numeric(18,0), n18 numeric(18,18), nbig numeric(30,4),
    r real, d double precision, day date, tstz timestamptz, ts timestamp, t time, b bytea,
    flag boolean, small smallint, o oid, vc varchar(5), ch char(4), arr numeric(5,2)[]
);
insert into edges values
    (1, 0, 0, 0, 0, 0, 0, '1970-01-01', '1970-01-01 00:00:00+00', '1970-01-01', '00:00', '', false,
     0, 0, '', '', '{}'),
    (2, 127.99, 999999999999999999, 0.999999999999999999, 12345678901234567890.1234, 0.1, 0.1,
     '9999-12-31', '9999-12-31 23:59:59.999999+00', '9999-12-31 23:59:59.999999', '24:00:00',
     '\\xdeadbeef', true, 32767, 4294967295, 'abcde', 'ab', '{1.5,NULL}'),
    (3, -128.00, -999999999999999999, -0.999999999999999999, -1, -0.1, 1e308, '0001-01-01',
     '0001-01-01 00:00:00+00', '0001-01-01', '13:37:03.5', decode(repeat('ff', 100), 'hex'), null,
     -32768, 1, 'x', 'abcd', '{{1,2},{3,4}}'),
    (4, 1.28, 128, 0.000000000000000128, 0.0001, 'NaN', 'Infinity', 'infinity', 'infinity', 'infinity',
     '00:00:00.000001', '\\x00', null, null, null, null, null, null),
    (5, -1.29, -129, -0.5, 'NaN', '-Infinity', '-Infinity', '-infinity', '-infinity', '-infinity',
     null, null, null, null, null, null, null, null),
    (6, 'NaN', 32767, 0.1, 1e20, 3.4028235e38, 5e-324, '0044-03-15 BC', '0044-03-15 13:00:00.25+00 BC',
     '0044-03-15 13:00:00.25 BC', null, null, null, null, null, null, null, null),
    (7, 5.5, -32768, 0.25, -1e20, 1.17549435e-38, 2.2250738585072014e-308, '12345-06-07',
     '12345-06-07 08:09:10+00', '12345-06-07 08:09:10', null, null, null, null, null, null, null, null),
    (8, -0.01, 8388607, -0.125, 0.5, -0.0, -0.0, '2000-02-29', '2024-02-29 13:37:03.5+02',
     '2024-02-29 13:37:03.5', null, null, null, null, null, null, null, null),
    (9, 0.01, -8388609, 0.000000000000000001, null, 1e-45, 123456789.123456789, '1999-12-31',
     '0999-12-31 23:59:59.9+00', '0999-12-31 23:59:59.9', null, null, null, null, null, null, null, null),
    (10, null, 2147483648, null, null, null, null, '4713-11-24 BC', '1000-01-01 00:00:00.000010+00',
     '0401-02-29 23:59:59.999999 BC',
     null, null, null, null, null, null, null, null);
insert into edges (id, n0, n2, tstz) select 100 + g, (2::numeric ^ g)::numeric(18,0) - 1, g - 0.01,
    timestamptz '2024-01-01 00:00:00+00' + g * interval '1.000001 seconds'
    from generate_series(1, 59) g;
insert into edges (id, n0, n2) select 200 + g, -(2::numeric ^ g)::numeric(18,0), -g from generate_series(1, 59) g;
-- Two's-complement byte-length edges of precise decimals (Java's BigInteger.toByteArray()): the
-- same unscaled values at scales 0, 2, 9 and 18, and the min/max of numeric(18,s).
alter table edges add column n9 numeric(18,9);
insert into edges (id, n0, n2, n9, n18)
    select 300 + i, u, case when abs(u) < 100000 then u * 0.01 end, u * 1e-9, u * 1e-18
    from unnest(array[-128, -129, -32768, -32769, -1, 0, 1, 127, 128, 255, 256, -255, -256, 32767,
                      32768, -8388608, -8388609, 8388607, 8388608, -2147483648, 2147483647,
                      -549755813888, -140737488355328, -36028797018963968, 36028797018963967,
                      999999999999999999, -999999999999999999]::numeric[])
    with ordinality as t(u, i);
insert into edges (id, n0) select 400 + g, (2::numeric ^ g)::numeric(18,0) from generate_series(1, 59) g;
insert into edges (id, n0) select 500 + g, -(2::numeric ^ g)::numeric(18,0) - 1 from generate_series(1, 59) g;
"""

MODES = [
    ValueModes(decimal, time_precision, binary, interval)
    for decimal, time_precision, binary, interval in itertools.chain(
        itertools.product(("precise", "double", "string"), ("adaptive",), ("bytes",), ("numeric",)),
        itertools.product(
            ("precise",),
            ("adaptive", "adaptive_time_microseconds", "connect"),
            ("bytes", "base64", "base64-url-safe", "hex"),
            ("numeric", "string"),
        ),
    )
] + [
    ValueModes(hstore="map", include_unknown=True),
    ValueModes("string", "connect", "hex", "string", hstore="map", include_unknown=True),
]


def _afters(dsn: str, conn: psycopg.Connection[Any], modes: ValueModes, *, fast: bool) -> list[dict[str, Any]]:
    filters = cat.TableFilter([], [], [])
    catalog = cat.Catalog(conn)
    tables = [t for t in cat.captured_tables(conn, filters) if t.name in (*cases.TYPED_TABLES, "edges")]
    builder = ChangeBuilder(
        server="s",
        database="d",
        partition={"server": "s"},
        topic=lambda schema, table: f"s.{schema}.{table}",
        catalog=catalog,
        modes=modes,
        filters=filters,
        tombstones=True,
        skipped=frozenset(),
        resume=None,
    )
    plans = [
        (t, plan_table(t.schema, t.name, t.name, list(t.columns), [], catalog=catalog, modes=modes, filters=filters))
        for t in tables
    ]
    reader = SnapshotReader(dsn, None, 0, builder, modes=modes if fast else None, lookup=catalog.type if fast else None)
    try:
        records: list[SourceRecord] = [r for batch in reader.batches(plans, 7, 5) for r in batch if r.topic]
    finally:
        reader.close()
    return sorted((r.value["after"] for r in records), key=lambda after: (len(after), after["id"]))


@pytest.fixture(scope="module")
def typed_database(pg_server: Any) -> str:
    name = pg_server.create_database()
    with pg_server.connect(name) as conn:
        for extension in cases.EXTENSIONS:
            conn.execute(f"create extension if not exists {extension}")
        conn.execute(cases.SCHEMA)
        for table in cases.TYPED_TABLES:
            for statement in cases.insert_rows(table, 1):
                conn.execute(statement)
        conn.execute(EDGES)
    return name


@pytest.mark.parametrize(
    "modes",
    MODES,
    ids=lambda m: f"{m.decimal}-{m.time_precision}-{m.binary}-{m.interval}-{m.hstore}-{m.include_unknown}",
)
def test_server_computed_values_equal_the_reference_converters(pg_server: Any, typed_database: str, modes: ValueModes):
    dsn = psycopg.conninfo.make_conninfo(pg_server.dsn(typed_database), options=SESSION_OPTIONS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        reference = _afters(dsn, conn, modes, fast=False)
        fast = _afters(dsn, conn, modes, fast=True)
    typed_rows = sum(len(cases.ROWS[table]) for table in cases.TYPED_TABLES)
    assert len(reference) == typed_rows + 10 + 59 + 59 + 27 + 59 + 59
    # Compared as text (NaN equals NaN there) and by type (1 is not 1.0, True is not 1).
    differences = [
        (r["id"], name, f[name], value)
        for f, r in zip(fast, reference, strict=True)
        for name, value in r.items()
        if json.dumps(f[name]) != json.dumps(value)
    ]
    assert differences == [], "\n".join(map(repr, differences))
    assert json.dumps(fast) == json.dumps(reference)
    for f, r in zip(fast, reference, strict=True):
        assert [type(v) for v in f.values()] == [type(v) for v in r.values()], f["id"]


def test_the_wide_table_is_read_mostly_by_the_server(pg_server: Any, typed_database: str):
    """The fast path is actually taken for the common types (not silently the text path)."""
    dsn = psycopg.conninfo.make_conninfo(pg_server.dsn(typed_database), options=SESSION_OPTIONS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        filters = cat.TableFilter([], [], [])
        catalog = cat.Catalog(conn)
        table = next(t for t in cat.captured_tables(conn, filters) if t.name == "edges")
        schema = plan_table(
            table.schema, table.name, "t", list(table.columns), [], catalog=catalog, modes=ValueModes(), filters=filters
        )
        columns = plan_columns(table, schema, ValueModes(), catalog.type)
    converted = {column.name for column, _ in columns.converted}
    assert converted == {"nbig", "ts", "t", "arr"}
    # Floats re-read NaN and the infinities as text; dates compute Debezium's snapshot infinities.
    assert {column.name for column, _ in columns.rare} == {"r", "d", "tstz"}


def test_precise_decimals_take_javas_byte_count_on_the_server(pg_server: Any, typed_database: str):
    """-128 is one byte (0x80) and -129 two (0xff7f) in Java's BigInteger.toByteArray(), at every
    scale - not only equal to the reference converter, but right."""
    dsn = psycopg.conninfo.make_conninfo(pg_server.dsn(typed_database), options=SESSION_OPTIONS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        afters = {after["id"]: after for after in _afters(dsn, conn, ValueModes(), fast=True)}
    expected = {301: "gA==", 302: "/38=", 303: "gAA=", 305: "/w==", 306: "AA==", 309: "AIA=", 327: "8h9JTFicAAE="}
    for id_, value in expected.items():
        assert [afters[id_][name] for name in ("n0", "n9", "n18")] == [value] * 3, id_
    assert afters[301]["n2"] == "gA==" and afters[326]["n0"] == "DeC2s6dj//8="
