"""Snapshot filters (``additional-conditions``) on the real servers: the filters the
single-quote-only check let through do close the engine's parenthesis and read another table
(the server proves it), the check refuses them, a filter with separators inside its strings
stays one predicate whatever sql_mode or standard_conforming_strings says, and through a
signal on MariaDB a crafted filter is refused with a clear notification while streaming and
a snapshot with a quoted ';' go on (engine/snapshots/filter_check.py, ADR 0007)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pymysql
import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.signals.signal import SignalError
from airflow_cdc.engine.snapshots.filter_check import check_single_predicate
from airflow_cdc.engine.sources.mysql.incremental import FILTER_SYNTAX as MYSQL
from airflow_cdc.engine.sources.postgres.incremental import FILTER_SYNTAX as POSTGRES
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.requirements import require_module
from tests.unit.test_snapshot_filters import MYSQL_BYPASSES, POSTGRES_BYPASSES

from .mysql_support import Collector, engine_config
from .pg_support import SIGNAL_TABLE

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration

SECRET = "top secret"
ROWS = {1: "semi;colon", 2: "dash -- dash", 3: "hash # /* star", 4: "(", 5: ")", 6: "it's", 7: 'say "hi"', 8: "plain"}
#: Filters with separators, comments and parentheses inside strings, and the ids they select.
MYSQL_QUOTED = {
    "name = 'semi;colon' or name = \"dash -- dash\"": {1, 2},
    "name in ('hash # /* star', \"(\", ')') and id > 0": {3, 4, 5},
    'name = \'it\'\'s\' or name = "say ""hi"""': {6, 7},
    "`name` like '%;%' or (`name` = \"plain\")": {1, 8},
}
POSTGRES_QUOTED = {
    "name = 'semi;colon' or name = $$dash -- dash$$": {1, 2},
    "name in ('hash # /* star', $x$($x$, ')') and id > 0": {3, 4, 5},
    "name = 'it''s' or name = E'say \"hi\"'": {6, 7},
    '"name" like \'%;%\' or ("name" = $$plain$$)': {1, 8},
}


def refused(syntax: Any, predicate: str) -> bool:
    try:
        check_single_predicate("t", predicate, syntax)
    except SignalError:
        return True
    return False


@pytest.fixture
def mysql_tables(mariadb_server: Any, mariadb_database: str) -> Any:
    conn = mariadb_server.connect(database=mariadb_database)
    with conn.cursor() as cur:
        cur.execute("create table t (id int primary key, name varchar(40))")
        cur.executemany("insert into t values (%s, %s)", list(ROWS.items()))
        cur.execute("create table secret (id int primary key, name varchar(40))")
        cur.execute("insert into secret values (99, %s)", (SECRET,))
    yield conn
    conn.close()


def mysql_select(conn: Any, predicate: str, sql_mode: str = "") -> set[Any]:
    """What the engine's filter check query, with the chunk read's columns, returns."""
    with conn.cursor() as cur:
        cur.execute("set session sql_mode = %s", (sql_mode,))
        cur.execute(f"select id, name from t where ({predicate})")
        return set(cur.fetchall())


@pytest.mark.parametrize("predicate", MYSQL_BYPASSES.values(), ids=MYSQL_BYPASSES.keys())
def test_a_mysql_filter_the_old_check_let_through_reads_another_table_and_is_refused(
    mysql_tables: Any, predicate: str
) -> None:
    assert (99, SECRET) in mysql_select(mysql_tables, predicate, "STRICT_TRANS_TABLES")  # a real bypass
    assert refused(MYSQL, predicate)


@pytest.mark.parametrize("sql_mode", ["", "ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "ANSI"])
def test_mysql_filters_with_quoted_separators_stay_one_predicate_in_every_sql_mode(
    mysql_tables: Any, sql_mode: str
) -> None:
    for predicate, ids in MYSQL_QUOTED.items():
        assert not refused(MYSQL, predicate), predicate
        try:
            rows = mysql_select(mysql_tables, predicate, sql_mode)
        except pymysql.err.MySQLError:
            assert "ANSI" in sql_mode  # "..." is an identifier there: an unknown column, never more
            continue
        assert {row[0] for row in rows} == ids, (predicate, sql_mode)


def test_a_crafted_filter_in_a_signal_is_refused_and_streaming_and_snapshots_go_on(
    mariadb_server: Any, mariadb_database: str, mysql_tables: Any
) -> None:
    with mysql_tables.cursor() as cur:
        cur.execute(f"create table {SIGNAL_TABLE} (id varchar(42) primary key, type varchar(32), data varchar(2048))")
    table = f"{mariadb_database}.t"
    config = engine_config(
        mariadb_server,
        mariadb_database,
        **{"snapshot.mode": "no_data", "signal.data.collection": f"{mariadb_database}.{SIGNAL_TABLE}"},
    )
    collected = Collector()
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())

    def send(predicate: str) -> str:
        signal_id = uuid.uuid4().hex
        data = {"data-collections": [table], "additional-conditions": [{"data-collection": table, "filter": predicate}]}
        with mysql_tables.cursor() as cur:
            cur.execute(
                f"insert into {SIGNAL_TABLE} values (%s, 'execute-snapshot', %s)", (signal_id, json.dumps(data))
            )
        return signal_id

    def notified(signal_id: str) -> list[dict[str, Any]]:
        return [n for n in engine.notifications.since(0)[0] if n["id"] == signal_id]

    with EngineRunner(engine):
        crafted = send(MYSQL_BYPASSES["a backslash-escaped quote"])
        wait_until(lambda: notified(crafted), 60, "the crafted signal answered")
        quoted = send("name = 'semi;colon' or name = \"dash -- dash\"")
        wait_until(lambda: "COMPLETED" in [n["type"] for n in notified(quoted)], 60, "the quoted filter's snapshot")
        with mysql_tables.cursor() as cur:
            cur.execute("insert into t values (100, 'after the signals')")
        wait_until(lambda: any(e["key"] == {"id": 100} for e in collected.snapshot()), 30, "still streaming")

    (answer,) = notified(crafted)
    assert answer["type"] == "REJECTED"
    problem = answer["additional_data"]["problem"]
    assert f"for {table} is not a single predicate: ')' closes a parenthesis the filter did not open" in problem
    reads = [e["value"]["after"] for e in collected.snapshot() if e["value"] and e["value"]["op"] == "r"]
    assert sorted(r["name"] for r in reads) == ["dash -- dash", "semi;colon"]  # no row of secret, none else


@pytest.fixture
def pg_tables(pg_server: Any, pg_database: str) -> Any:
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table t (id int primary key, name text)")
        with conn.cursor() as cur:
            cur.executemany("insert into t values (%s, %s)", list(ROWS.items()))
        conn.execute("create table secret (id int primary key, name text)")
        conn.execute("insert into secret values (99, %s)", (SECRET,))
        yield conn


def pg_select(conn: Any, predicate: str, conforming: str = "on") -> set[Any]:
    conn.execute(f"set standard_conforming_strings = {conforming}")
    return set(conn.execute(f"select id, name from t where ({predicate})").fetchall())


@pytest.mark.parametrize("predicate", POSTGRES_BYPASSES.values(), ids=POSTGRES_BYPASSES.keys())
def test_a_postgres_filter_the_old_check_let_through_reads_another_table_and_is_refused(
    pg_tables: Any, predicate: str
) -> None:
    assert (99, SECRET) in pg_select(pg_tables, predicate)  # a real bypass
    assert refused(POSTGRES, predicate)


@pytest.mark.parametrize("conforming", ["on", "off"])
def test_postgres_filters_with_quoted_separators_stay_one_predicate_either_way(pg_tables: Any, conforming: str) -> None:
    for predicate, ids in POSTGRES_QUOTED.items():
        assert not refused(POSTGRES, predicate), predicate
        assert {row[0] for row in pg_select(pg_tables, predicate, conforming)} == ids, (predicate, conforming)
