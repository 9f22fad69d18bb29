"""Fixtures of the docker stack's tests: the test servers after the stack's init SQL, run as the
images' entrypoints run it. The stack names cluster-wide objects (roles, users, the ``shop``
databases) with fixed names, so these run only on servers the tests started, never on an
external one (``CDC_TEST_PG_DSN`` / ``CDC_TEST_MYSQL_URL``); everything is dropped afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from tests.unit.docker import stack

POSTGRES_INIT = stack.DOCKER / "postgres" / "init.sql"
MARIADB_INIT = stack.DOCKER / "mariadb" / "init.sql"
#: Debezium's signal table, column by column: (name, type, length, nullable).


def _own(server: PostgresServer | MariaDBServer) -> None:
    if server.external:
        pytest.skip("the stack's init SQL creates roles and databases with fixed names: only on a server started here")


def _created(pattern: str, text: str) -> list[str]:
    return re.findall(pattern, text, flags=re.IGNORECASE | re.MULTILINE)


# --- PostgreSQL ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack_postgres(pg_server: PostgresServer) -> Iterator[PostgresServer]:
    """The test server after docker/postgres/init.sql, run as the postgres image's entrypoint runs
    it (psql, ON_ERROR_STOP, as the superuser, in POSTGRES_DB). Its roles log in with their
    passwords only (scram, as in the image), so a wrong password in the stack fails here."""
    _own(pg_server)
    text = POSTGRES_INIT.read_text()
    database = stack.environment("postgres")["POSTGRES_DB"]
    roles = _created(r"^create role (\w+)", text)
    databases = [database, *_created(r"^create database (\w+)", text)]
    assert roles and len(databases) == 3
    pg_server.create_database(database)
    hba = pg_server.data_dir / "pg_hba.conf"  # type: ignore[operator]
    original = hba.read_text()
    hba.write_text(f"host all {','.join(roles)} 127.0.0.1/32 scram-sha-256\n" + original)
    try:
        with pg_server.connect() as conn:
            conn.execute("select pg_reload_conf()")
        done = subprocess.run(
            [
                str(pg_server.program("psql")),
                *("-v", "ON_ERROR_STOP=1", "--no-psqlrc", "--no-password"),
                *("-h", pg_server.host, "-p", str(pg_server.port), "-U", pg_server.user, "--dbname", database),
                *("-f", str(POSTGRES_INIT)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        yield pg_server
    finally:
        hba.write_text(original)
        with pg_server.connect() as conn:
            conn.execute("select pg_reload_conf()")
        for name in databases:
            pg_server.drop_database(name)
        with pg_server.connect() as conn:
            for role in roles:
                conn.execute(f"drop role if exists {role}")


@pytest.fixture(scope="module")
def stack_mariadb(mariadb_server: MariaDBServer) -> Iterator[MariaDBServer]:
    """The test server after docker/mariadb/init.sql, run as the mariadb image's entrypoint runs
    it (the mariadb client, as root, in MARIADB_DATABASE)."""
    _own(mariadb_server)
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client is None:
        pytest.fail("no mariadb client program (install mariadb-client)", pytrace=False)
    database = stack.environment("mariadb")["MARIADB_DATABASE"]
    users = _created(r"^create user ('\w+'@'[^']+')", MARIADB_INIT.read_text())
    assert users
    mariadb_server.create_database(database)
    try:
        with MARIADB_INIT.open("rb") as sql:
            done = subprocess.run(
                [
                    *(client, "--no-defaults", "-h", mariadb_server.host, "-P", str(mariadb_server.port)),
                    *("-u", mariadb_server.user, f"--database={database}"),
                ],
                stdin=sql,
                capture_output=True,
                timeout=120,
                env={**os.environ, "MYSQL_PWD": mariadb_server.password},
            )
        assert done.returncode == 0, done.stdout.decode()[-2000:] + done.stderr.decode()[-2000:]
        yield mariadb_server
    finally:
        mariadb_server.drop_database(database)
        mariadb_server.drop_database("shop_replica")
        with mariadb_server.connect() as conn, conn.cursor() as cur:
            for user in users:
                cur.execute(f"drop user if exists {user}")
