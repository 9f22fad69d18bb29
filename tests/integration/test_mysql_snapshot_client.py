"""The snapshot's two row readers give the same Python values (``snapshot_client.py``): every
table of the MariaDB value oracle (ordinary, extreme, zero and NULL values of every type family)
read through mysqlclient and through PyMySQL on a real MariaDB, value for value, type for type;
the table definitions read through either connection are equal too. The converters in
``types.py`` are written for PyMySQL's values, so equal values mean equal events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.sources.mysql import snapshot_client
from airflow_cdc.engine.sources.mysql.schema import read_tables
from tests.compat import mariadb_cases
from tests.requirements import require_module

require_module("MySQLdb", extra="mysqlclient")

pytestmark = pytest.mark.integration

OPTIONS = {"autocommit": True, "init_command": "SET time_zone='+00:00'"}


@pytest.fixture
def connections(mariadb_server: Any, mariadb_database: str) -> Iterator[tuple[Any, Any]]:
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute("SET sql_mode = '', time_zone = '+00:00'")
        for statement in (*mariadb_cases.SCHEMA, *mariadb_cases.SNAPSHOT):
            cur.execute(statement)
    params = {**mariadb_server.connection_params(database=mariadb_database), "charset": "utf8mb4"}
    fast = snapshot_client.connect(params, **OPTIONS)
    plain = mysql_client.connect(**params, **OPTIONS)  # PyMySQL, as without mysqlclient
    try:
        yield fast, plain
    finally:
        fast.close()
        plain.close()


def test_both_readers_give_the_same_values(connections: tuple[Any, Any], mariadb_database: str) -> None:
    fast, plain = connections
    assert type(fast).__module__.startswith("MySQLdb")
    assert type(plain).__module__.startswith("pymysql")
    assert read_tables(fast) == read_tables(plain)
    compared = 0
    for table in mariadb_cases.TABLES:
        read = []
        for conn in (fast, plain):
            with snapshot_client.unbuffered_cursor(conn) as cur:
                cur.execute(f"SELECT * FROM `{mariadb_database}`.`{table}` ORDER BY id")
                read.append(cur.fetchall())
        assert len(read[0]) == len(read[1]) > 0, table
        for fast_row, plain_row in zip(*read, strict=True):
            # repr: a float's digits, a Decimal's exponent and -0.00, bytes against str
            assert [(type(v), repr(v)) for v in fast_row] == [(type(v), repr(v)) for v in plain_row], table
            compared += len(fast_row)
    assert compared > 300


def test_localhost_reaches_the_configured_port_over_tcp(mariadb_server: Any, mariadb_database: str) -> None:
    """libmariadb alone would go to its default Unix socket, where this server does not listen:
    the connection reaches the server at its port, as PyMySQL's does. A refused login is not
    retried at another address; it says what was refused."""
    params = {**mariadb_server.connection_params(database=mariadb_database), "host": "localhost"}
    conn = snapshot_client.connect(params, **OPTIONS)
    try:
        assert type(conn).__module__.startswith("MySQLdb")
        with conn.cursor() as cur:
            cur.execute("SELECT @@port")
            assert cur.fetchone() == (mariadb_server.port,)
    finally:
        conn.close()
    with pytest.raises(snapshot_client.ERRORS) as refused:
        snapshot_client.connect({**params, "password": "not-the-password"}, **OPTIONS)
    assert refused.value.args[0] == 1045, refused.value  # ER_ACCESS_DENIED_ERROR
