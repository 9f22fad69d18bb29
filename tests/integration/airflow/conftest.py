"""Fixtures of the Airflow-layer integration tests: a real PostgreSQL database with tables and
Debezium's signal table, a role that must give its password (so a password that does not reach
the engine fails the test), an engine instance config file without any credential, and the
Airflow connections (``AIRFLOW_CONN_*`` JSON) that name them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from airflow_cdc.engine.server import control
from airflow_cdc.local.postgres import PostgresServer

#: A password that must appear in no log line, XCom or file the tests look at.
PASSWORD = f"pw-{uuid.uuid4().hex}"
ROLE = "airflow_cdc_tester"
CDC_CONN, PG_CONN = "cdc_test", "pg_test"


@pytest.fixture(scope="session")
def password_role(pg_server: PostgresServer) -> Iterator[tuple[str, str]]:
    """``(user, password)`` of a role the server authenticates by password (scram), when the
    tests run their own server; an external server's own user otherwise."""
    if pg_server.external:
        yield pg_server.user, pg_server.password
        return
    with pg_server.connect() as conn:
        conn.execute(f"drop role if exists {ROLE}")
        conn.execute(f"create role {ROLE} login superuser replication password '{PASSWORD}'")
        hba = pg_server.data_dir / "pg_hba.conf"  # type: ignore[operator]
        original = hba.read_text()
        hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + original)
        conn.execute("select pg_reload_conf()")
    try:
        with pytest.raises(psycopg.OperationalError):  # the password is really asked for
            psycopg.connect(pg_server.dsn(user=ROLE), connect_timeout=5).close()
        yield ROLE, PASSWORD
    finally:
        hba.write_text(original)
        with pg_server.connect() as conn:
            conn.execute("select pg_reload_conf()")


@dataclass
class Source:
    server: PostgresServer
    database: str
    user: str
    password: str

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.server.dsn(self.database), autocommit=True)

    def lsn(self) -> str:
        with self.connect() as conn:
            return str(conn.execute("select pg_current_wal_lsn()::text").fetchone()[0])  # type: ignore[index]


@pytest.fixture
def source(pg_server: PostgresServer, pg_database: str, password_role: tuple[str, str]) -> Source:
    """The captured database: ``orders`` (20 rows), ``customers`` (5 rows), the signal table."""
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table orders (id int primary key, status text, updated_at date)")
        conn.execute(
            "insert into orders select g, case when g % 2 = 0 then 'open' else 'done' end, "
            "date '2026-01-01' + g from generate_series(1, 20) g"
        )
        conn.execute("create table customers (id int primary key, name text)")
        conn.execute("insert into customers select g, 'c' || g from generate_series(1, 5) g")
        conn.execute(
            "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"
        )
    return Source(pg_server, pg_database, *password_role)


@dataclass
class Instance:
    name: str
    config_path: Path
    state_dir: Path
    token: str

    @property
    def props(self) -> dict[str, Any]:
        return {"name": self.name, "state.dir": str(self.state_dir)}

    def log(self) -> str:
        return control.log_tail(self.state_dir, 200)


def write_config(path: Path, config: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(config))


@pytest.fixture
def instance(tmp_path: Path, source: Source) -> Iterator[Instance]:
    """An instance config file with no database credential (the source connection gives them);
    stopped after the test whatever happened."""
    name = f"shop-{source.database[-8:]}"
    state = tmp_path / "state"
    token = f"tok-{uuid.uuid4().hex}"
    config = tmp_path / "shop.yaml"
    write_config(
        config,
        {
            "name": name,
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "topic.prefix": "shop",
            "slot.name": f"slot_{source.database}",
            "publication.name": f"pub_{source.database}",
            "signal.data.collection": "public.debezium_signal",
            "state.dir": str(state),
            "api.token": token,
            "offset.flush.interval.ms": 100,
            "poll.interval.ms": 100,
            "heartbeat.interval.ms": 1000,
            "sink.type": "changelog",
            "sink.changelog.segment.max.ms": 100,
        },
    )
    yield Instance(name, config, state, token)
    control.stop({"name": name, "state.dir": str(state)}, timeout=30)


def connection_env(conn: dict[str, Any]) -> str:
    return json.dumps(conn)


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch, instance: Instance, source: Source) -> Instance:
    """``cdc_test`` (the instance, by its config file) and ``pg_test`` (the source, with its password)."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CDC_CONN.upper()}",
        connection_env(
            {
                "conn_type": "cdc_engine",
                "login": instance.name,
                "password": instance.token,
                "extra": {"config_path": str(instance.config_path), "timeout": 10},
            }
        ),
    )
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{PG_CONN.upper()}",
        connection_env(
            {
                "conn_type": "postgres",
                "host": source.server.host,
                "port": source.server.port,
                "login": source.user,
                "password": source.password,
                "schema": source.database,
            }
        ),
    )
    return instance
