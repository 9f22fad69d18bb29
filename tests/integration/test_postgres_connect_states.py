"""Connecting to a real PostgreSQL that cannot take us now, or will never: told by SQLSTATE.

A server starting up or shutting down (57P03), one that is full (53300, before or after the
password), or a connection dropped right after the login are worth retrying (RetriableError);
a wrong password (28P01), a missing database (3D000) and missing privileges (42501) fail at
once, naming the fix. libpq hides a startup failure's code from psycopg, so a refusal after the
password looks the same for a wrong password and a full server - ``connect_errors`` asks again
with libpq's protocol trace on; these tests check it gets the server's code."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.sources.postgres import connect_errors
from airflow_cdc.engine.sources.postgres.database import POSTGRES_DATABASE
from airflow_cdc.engine.sources.postgres.stream import ReplicationStream
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer

from .tcp_relay import Relay

pytestmark = pytest.mark.integration

PASSWORD = "the-password"
#: Few connection slots, so that a test can fill them; 3 of them for superusers only.
SLOTS = {"max_connections": "12", "superuser_reserved_connections": "3"}


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    """A server of this module's own (its tests fill it and shut it down), where the roles
    ``cdc`` (REPLICATION), ``limited`` (CONNECTION LIMIT 0) and ``plain`` log in by password."""
    pg = PostgresServer(settings=SLOTS)
    try:
        pg.start()
        with pg.connect() as conn:
            conn.execute(f"create role cdc login replication password '{PASSWORD}'")
            conn.execute(f"create role limited login connection limit 0 password '{PASSWORD}'")
            conn.execute(f"create role plain login password '{PASSWORD}'")
            conn.execute("create database closed")
            conn.execute("revoke connect on database closed from public")
        hba = pg.data_dir / "pg_hba.conf"  # type: ignore[operator]
        rules = "host all,replication cdc,limited,plain 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(rules + hba.read_text())
        with pg.connect() as conn:
            conn.execute("select pg_reload_conf()")
        yield pg
    finally:
        pg.close()


def dsn(server: PostgresServer, **params: Any) -> str:
    base = {"host": server.host, "port": server.port, "dbname": "postgres", "connect_timeout": 10}
    return psycopg.conninfo.make_conninfo(**{**base, **params})


def failure(conninfo: str, **kwargs: Any) -> CdcError:
    with pytest.raises(CdcError) as failed:
        connect_errors.connect(conninfo, **kwargs).close()
    return failed.value


def code_of(error: BaseException) -> str | None:
    cause = error.__cause__
    assert isinstance(cause, psycopg.Error), repr(error)
    return connect_errors.sqlstate(cause)


@pytest.mark.parametrize(
    ("params", "state", "names"),
    [
        ({"user": "cdc", "password": "wrong"}, "28P01", "database.password"),
        ({"user": "nobody", "password": PASSWORD}, "28000", "pg_hba.conf"),  # no pg_hba.conf rule
        ({"user": "cdc", "password": PASSWORD, "dbname": "missing"}, "3D000", "database.dbname"),
        ({"user": "plain", "password": PASSWORD, "dbname": "closed"}, "42501", "CONNECT"),
    ],
)
def test_a_refusal_fails_at_once_naming_the_fix(server, params, state, names):
    error = failure(dsn(server, **params))
    assert not isinstance(error, RetriableError), repr(error)
    assert code_of(error) == state and names in str(error)


def test_a_role_without_replication_is_refused_a_replication_connection(server):
    with pytest.raises(CdcError) as failed:
        ReplicationStream.connect(dsn(server, user="plain", password=PASSWORD))
    assert not isinstance(failed.value, RetriableError)
    assert code_of(failed.value) == "42501" and "REPLICATION" in str(failed.value)


def test_a_connection_limit_after_the_password_is_retried(server):
    """53300 comes after the password: libpq's used_password alone made it a refusal."""
    error = failure(dsn(server, user="limited", password=PASSWORD))
    assert isinstance(error, RetriableError) and code_of(error) == "53300", repr(error)


def test_a_full_server_is_retried_before_and_after_the_password(server):
    held: list[psycopg.Connection[Any]] = []
    try:
        while True:  # the slots left to ordinary roles, until the server refuses
            try:
                held.append(psycopg.connect(dsn(server, user="plain", password=PASSWORD)))
            except psycopg.OperationalError:
                break
        # "remaining connection slots are reserved": after the password
        reserved = failure(dsn(server, user="cdc", password=PASSWORD))
        assert isinstance(reserved, RetriableError) and code_of(reserved) == "53300", repr(reserved)
        while True:  # the superusers' slots too: "sorry, too many clients already", before it
            try:
                held.append(server.connect())
            except psycopg.OperationalError:
                break
        full = failure(dsn(server, user="cdc", password=PASSWORD, application_name="full"))
        assert isinstance(full, RetriableError) and code_of(full) == "53300", repr(full)
    finally:
        for conn in held:
            conn.close()
    connect_errors.connect(dsn(server, user="cdc", password=PASSWORD, application_name="after")).close()


def test_a_connection_dropped_after_the_password_is_retried(server):
    relay = Relay(server.host, server.port, cut_after_login=True)
    try:
        # Plain TCP, so that the relay can read the server's messages.
        conninfo = psycopg.conninfo.make_conninfo(
            host="127.0.0.1",
            port=relay.port,
            dbname="postgres",
            user="cdc",
            password=PASSWORD,
            sslmode="disable",
            connect_timeout=10,
        )
        with pytest.raises(psycopg.OperationalError) as failed:
            psycopg.connect(conninfo, gssencmode="disable")
        assert failed.value.pgconn is not None and failed.value.pgconn.used_password
        error = failure(conninfo, gssencmode="disable")
        assert isinstance(error, RetriableError) and code_of(error) is None, repr(error)
        assert relay.cut >= 2
    finally:
        relay.close()


def test_a_server_shutting_down_is_retried(server):
    """57P03 cannot_connect_now: a smart shutdown waits for the open sessions and takes no new one."""
    session = psycopg.connect(dsn(server, user="plain", password=PASSWORD))
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    pg_ctl = [str(server.program("pg_ctl")), "stop", "-D", str(server.data_dir), "-m", "smart", "--no-wait"]
    try:
        subprocess.run([*as_postgres, *pg_ctl], check=True, capture_output=True, timeout=30)

        def refused() -> CdcError | None:
            try:
                connect_errors.connect(dsn(server, user="cdc", password=PASSWORD)).close()
            except CdcError as exc:
                return exc
            return None

        error = wait_until(refused, 30, "the server refusing new sessions")
        assert isinstance(error, RetriableError) and code_of(error) == "57P03", repr(error)
    finally:
        session.close()
        wait_until(lambda: not server.running, 30, "the server stopped")
        server.start()


def test_reading_the_position_with_a_refused_login_names_the_fix_instead_of_retrying(server):
    """A seek's check and Connect's position read ask the server for its position: a wrong
    password is no reason to try again."""
    config = {"database.hostname": server.host, "database.port": server.port, "database.user": "cdc"}
    with pytest.raises(CdcError) as refused:
        POSTGRES_DATABASE.read_position(config, "wrong")
    assert not isinstance(refused.value, RetriableError) and "database.password" in str(refused.value)
    assert POSTGRES_DATABASE.read_position(config, PASSWORD).count("/") == 1  # the right one reads an LSN
