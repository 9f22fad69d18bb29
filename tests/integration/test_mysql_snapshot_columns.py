"""The snapshot's server-computed values (``snapshot_columns.py``) equal the reference
conversion (``RowPlan.row`` over a plain ``SELECT`` of the columns) on a real MariaDB: every
table of the value oracle, plus edge values of the computed types (unscaled decimals at every
byte boundary, invalid, zero and pre-1000 dates under ALLOW_INVALID_DATES, timestamp fractions),
in every decimal and time precision mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.engine.sources.mysql import snapshot_client
from airflow_cdc.engine.sources.mysql.changes import plan
from airflow_cdc.engine.sources.mysql.schema import read_tables
from airflow_cdc.engine.sources.mysql.snapshot_columns import snapshot_plan
from airflow_cdc.engine.sources.mysql.types import ValueModes
from tests.compat import mariadb_cases

pytestmark = pytest.mark.integration

EDGES = (
    """create table edges (
        id int primary key, d2 decimal(18,2), d0 decimal(18,0) unsigned, d4 decimal(9,4), d1 decimal(3,1),
        d date, dn date not null default '2001-02-03', dt datetime, dt3 datetime(3), dt6 datetime(6),
        ts timestamp(6) null, ts0 timestamp null, tn timestamp(3) not null default '2000-01-01 00:00:00')""",
)
_BOUNDARIES = [
    b
    for n in range(1, 8)
    for b in (2 ** (8 * n - 1) - 1, 2 ** (8 * n - 1), -(2 ** (8 * n - 1)), -(2 ** (8 * n - 1)) - 1)
]
_DATES = (
    "'2021-02-30'", "'2020-00-15'", "'0000-00-00'", "'2024-02-29'", "'1000-01-01'", "'0999-12-31'",
    "'0001-01-01'", "'9999-12-31'", "'2021-04-31'", "'2021-01-00'", "'1969-12-31'", "NULL",
)  # fmt: skip
_TIMES = ("'00:00:00'", "'23:59:59.999999'", "'12:00:00.5'", "'00:00:00.000001'", "'13:37:03.100'")
_STAMPS = ("'1970-01-01 00:00:01'", "'2038-01-19 03:14:07.999999'", "'2024-02-29 13:37:03.5'", "0", "NULL")


def _edge_rows() -> list[str]:
    rows = []
    for i, unscaled in enumerate([*_BOUNDARIES, 0, 1, -1, 10**17, -(10**17)]):
        number = f"{unscaled}e-2"
        rows.append(f"insert into edges (id, d2, d0) values ({i + 1}, {number}, {abs(unscaled)})")
    for j, day in enumerate(_DATES):
        for k, time in enumerate(_TIMES):
            at = "NULL" if day == "NULL" else f"concat({day}, ' ', {time})"
            rows.append(
                f"insert into edges (id, d4, d1, d, dn, dt, dt3, dt6) values ({1000 + 10 * j + k}, "
                f"{-k}.0{k}5, {-k}.{k}, {day}, coalesce({day}, '2001-02-03'), {at}, {at}, {at})"
            )
    for m, stamp in enumerate(_STAMPS):
        rows.append(f"insert into edges (id, ts, ts0, tn) values ({2000 + m}, {stamp}, {stamp}, coalesce({stamp}, 0))")
    return rows


@pytest.fixture
def conn(mariadb_server: Any, mariadb_database: str) -> Iterator[Any]:
    with mariadb_server.connect(database=mariadb_database) as setup, setup.cursor() as cur:
        cur.execute("SET sql_mode = 'ALLOW_INVALID_DATES', time_zone = '+00:00'")
        for statement in (*mariadb_cases.SCHEMA, *mariadb_cases.SNAPSHOT, *EDGES, *_edge_rows()):
            cur.execute(statement)
    params = {**mariadb_server.connection_params(database=mariadb_database), "charset": "utf8mb4"}
    connection = snapshot_client.connect(params, autocommit=True, init_command="SET time_zone='+00:00'")
    try:
        yield connection
    finally:
        connection.close()


def _read(conn: Any, select: str, table: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {select} FROM `{table}` ORDER BY id")
        return list(cur.fetchall())


@pytest.mark.parametrize("decimal", ["precise", "double", "string"])
@pytest.mark.parametrize("time_precision", ["adaptive_time_microseconds", "connect"])
def test_computed_values_equal_the_reference_conversion(
    conn: Any, mariadb_database: str, decimal: str, time_precision: str
) -> None:
    modes = ValueModes(decimal=decimal, time_precision=time_precision)
    tables = {name: t for (db, name), t in read_tables(conn).items() if db == mariadb_database}
    checked = 0
    for name in (*mariadb_cases.TABLES, "edges"):
        reference = plan(tables[name], "topic", modes, snapshot=True)
        fast = snapshot_plan(reference)
        plain = ", ".join(f"`{c.name}`" for c in tables[name].columns)
        expected = [reference.row(row) for row in _read(conn, plain, name)]
        got = [fast.row(row) for row in _read(conn, ", ".join(fast.select), name)]
        assert len(got) == len(expected) > 0, name
        for want, have in zip(expected, got, strict=True):
            # the JSON text: field order, int against float, every digit
            assert json.dumps(have) == json.dumps(want), name
            checked += len(want)
    assert checked > 700
