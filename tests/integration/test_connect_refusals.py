"""A refused login fails at once whatever language the server speaks: the sources tell refusals
from transient failures by SQLSTATE, libpq's password flags and MySQL error codes, never by the
server's words (a German server's wrong password used to be retried for ever).

This machine has no locale but C and C.UTF-8, so PostgreSQL cannot be given
``lc_messages=de_DE``; it runs with ``lc_messages=C.UTF-8`` and ``LANGUAGE=de`` in its
environment instead, which gettext honours for any locale but C - and the server's German
catalog (postgres-15.mo) is installed. MariaDB has its own message files: ``lc_messages`` is
enough there. Each test first checks that the message really is not English."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pymysql
import pytest

from airflow_cdc.engine import Engine, EngineFailedError
from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.sources.mysql.connect_errors import refusal_fix
from airflow_cdc.engine.sources.postgres.connect_errors import refused_for_good
from airflow_cdc.local.postgres import PostgresServer

from . import mysql_support, pg_support

pytestmark = pytest.mark.integration

ROLE, PASSWORD = "cdc_pw", "the-password"


@pytest.fixture(scope="module")
def german_pg() -> Iterator[PostgresServer]:
    """A PostgreSQL server that speaks German, with a role it authenticates by password."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("LANGUAGE", "de")  # read by the server process, started below
    server = PostgresServer(settings={"lc_messages": "C.UTF-8"})
    try:
        server.start()
        monkeypatch.undo()
        with server.connect() as conn:
            conn.execute(f"create role {ROLE} login replication password '{PASSWORD}'")
        hba = server.data_dir / "pg_hba.conf"  # type: ignore[operator]
        hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        with server.connect() as conn:
            conn.execute("select pg_reload_conf()")
        yield server
    finally:
        monkeypatch.undo()
        server.close()


def pg_failure(server: PostgresServer, **params: Any) -> psycopg.OperationalError:
    with pytest.raises(psycopg.OperationalError) as failed:
        psycopg.connect(
            **{"host": server.host, "port": server.port, "dbname": "postgres", **params}, connect_timeout=10
        )
    return failed.value


def engine_failure(config: dict[str, Any]) -> BaseException:
    """What the engine stopped with, given no retry: a refusal is a CdcError, never a RetriableError."""
    with pytest.raises(EngineFailedError) as failed:
        Engine({**config, "errors.max.retries": 0}, consumer=lambda record: None).run()
    cause = failed.value.__cause__
    assert cause is not None
    return cause


def test_postgres_a_wrong_password_in_german_is_a_refusal(german_pg: PostgresServer) -> None:
    error = pg_failure(german_pg, user=ROLE, password="wrong")
    assert "Passwort-Authentifizierung" in str(error) and "password authentication" not in str(error)
    assert error.sqlstate is None and error.diag.sqlstate is None  # libpq keeps a startup failure's code
    assert refused_for_good(error)

    config = pg_support.engine_config(german_pg, "postgres", **{"database.user": ROLE, "database.password": "wrong"})
    cause = engine_failure(config)
    assert isinstance(cause, CdcError) and not isinstance(cause, RetriableError), repr(cause)
    assert "Passwort-Authentifizierung" in str(cause) and "database.password" in str(cause)


def test_postgres_no_password_where_one_is_asked_is_a_refusal(german_pg: PostgresServer) -> None:
    error = pg_failure(german_pg, user=ROLE, password="")
    assert error.pgconn is not None and error.pgconn.needs_password
    assert refused_for_good(error)


def test_postgres_a_database_refused_after_the_password_is_a_refusal_too(german_pg: PostgresServer) -> None:
    """The database is checked after the password: libpq's used_password says the server got that far."""
    error = pg_failure(german_pg, user=ROLE, password=PASSWORD, dbname="keine_datenbank")
    assert "existiert nicht" in str(error)
    assert refused_for_good(error)


def free_port() -> int:
    """A port nothing listens on (taken from the kernel and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_postgres_a_server_that_is_not_there_is_worth_retrying() -> None:
    with pytest.raises(psycopg.OperationalError) as failed:
        psycopg.connect(host="127.0.0.1", port=free_port(), dbname="postgres", connect_timeout=5)
    assert not refused_for_good(failed.value)


@pytest.fixture
def german_mariadb(mariadb_server: Any) -> Iterator[Any]:
    """The session's MariaDB speaking German, with an account that takes no password over TCP
    (unix_socket) and a locked one; English again afterwards."""
    suffix = uuid.uuid4().hex[:8]
    users = {"socket": f"sock_{suffix}", "locked": f"locked_{suffix}"}
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute("select @@global.lc_messages")
        (before,) = cur.fetchone()
        cur.execute(f"create user {users['socket']} identified via unix_socket")
        cur.execute(f"create user {users['locked']} identified by 'x' account lock")
        cur.execute("set global lc_messages = 'de_DE'")
    try:
        yield users
    finally:
        with mariadb_server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"set global lc_messages = '{before}'")
            for user in users.values():
                cur.execute(f"drop user if exists {user}")


def my_failure(server: Any, **params: Any) -> pymysql.OperationalError:
    with pytest.raises(pymysql.OperationalError) as failed:
        pymysql.connect(host=server.host, port=server.port, connect_timeout=10, **params)
    return failed.value


@pytest.mark.parametrize(("account", "code"), [("socket", 1698), ("locked", 4151), ("wrong password", 1045)])
def test_mariadb_refusals_are_told_by_code_in_any_language(
    mariadb_server: Any, mariadb_database: str, german_mariadb: dict[str, str], account: str, code: int
) -> None:
    user, password = (german_mariadb[account], "x") if account != "wrong password" else (mariadb_server.user, "wrong")
    error = my_failure(mariadb_server, user=user, password=password)
    assert error.args[0] == code
    if code != 4151:  # MariaDB has no German text for this one
        assert "Zugriffsberechtigung" in str(error) and "Access denied" not in str(error)
    assert refusal_fix(error) is not None

    config = mysql_support.engine_config(
        mariadb_server, mariadb_database, **{"database.user": user, "database.password": password}
    )
    cause = engine_failure(config)
    assert isinstance(cause, CdcError) and not isinstance(cause, RetriableError), repr(cause)
    assert str(cause).startswith("MySQL refused the connection: ")


def test_mariadb_a_server_that_is_not_there_is_worth_retrying() -> None:
    with pytest.raises(pymysql.OperationalError) as failed:
        pymysql.connect(host="127.0.0.1", port=free_port(), connect_timeout=5)
    assert refusal_fix(failed.value) is None
