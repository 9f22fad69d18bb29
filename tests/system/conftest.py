"""Fixtures of the system tests: the example DAGs run with ``dag.test()`` against a real
PostgreSQL and real engine instances.

Airflow reads ``AIRFLOW_HOME`` when it is first imported: a throwaway one unless the caller chose
one (as the other Airflow test packages do). ``airflow db migrate`` runs once per session
(:func:`airflow_db`); the DAG folder is this repository's ``dags/``. Connections come from
``AIRFLOW_CONN_*`` JSON variables: ``cdc_shop`` / ``cdc_shop_batch`` (instances by their config
files, which hold no database credential) and ``pg_shop`` (the source, with the password of a
role the server really asks it of).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
import yaml

from airflow_cdc.engine.server import control
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from tests.airflow_home import throwaway_airflow_home

DAGS = Path(__file__).resolve().parents[2] / "dags"

throwaway_airflow_home("airflow-cdc-system-")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"

from tests.system.support import Instance, Source  # noqa: E402 - after Airflow's environment

#: A password that must appear in no log line, XCom, trigger argument or file the tests look at.
PASSWORD = f"pw-{uuid.uuid4().hex}"
ROLE = "airflow_cdc_system"
TOKEN = f"tok-{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def airflow_db() -> str:
    """The session's Airflow home, migrated once; its DAG folder is ``dags/``."""
    home = os.environ["AIRFLOW_HOME"]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from airflow import settings

    # Airflow may have been imported (by another test package) before this module set the folder.
    settings.DAGS_FOLDER = str(DAGS)
    return home


@pytest.fixture(scope="session")
def password_role(pg_server: PostgresServer) -> Iterator[tuple[str, str]]:
    """``(user, password)`` of a role the server authenticates by password (scram) when the tests
    run their own server; an external server's own user otherwise."""
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


@pytest.fixture
def source(pg_server: PostgresServer, pg_database: str, password_role: tuple[str, str]) -> Source:
    """The captured database: ``orders`` (2000 rows, ``updated_at`` over 10 days of January
    2026), ``customers`` (50 rows) and Debezium's signal table."""
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table orders (id int primary key, status text, updated_at timestamptz not null)")
        conn.execute(
            "insert into orders select g, case when g % 3 = 0 then 'open' else 'done' end, "
            "timestamptz '2026-01-01 00:00:00+00' + (g % 10) * interval '1 day' + g * interval '1 second' "
            "from generate_series(1, 2000) g"
        )
        conn.execute("create table customers (id int primary key, name text)")
        conn.execute("insert into customers select g, 'customer ' || g from generate_series(1, 50) g")
        conn.execute(
            "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"
        )
    return Source(pg_server, pg_database, *password_role)


@contextmanager
def _instance(tmp_path: Path, source: Source, name: str, **settings: Any) -> Iterator[Instance]:
    state = tmp_path / name
    config = {
        "name": f"{name}-{source.database[-8:]}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": "shop",
        "slot.name": f"slot_{name.replace('-', '_')}_{source.database}",
        "publication.name": f"pub_{name.replace('-', '_')}_{source.database}",
        "table.include.list": "public.orders,public.customers",
        "signal.data.collection": "public.debezium_signal",
        "state.dir": str(state),
        "api.token": TOKEN,
        "offset.flush.interval.ms": 100,
        "poll.interval.ms": 100,
        "heartbeat.interval.ms": 1000,
        "incremental.snapshot.chunk.size": 100,
        "sink.type": "changelog",
        "sink.changelog.segment.max.ms": 100,
        **settings,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    instance = Instance(str(config["name"]), path, state)
    try:
        yield instance
    finally:
        control.stop({"name": instance.name, "state.dir": str(state)}, timeout=30)


@pytest.fixture
def shop(tmp_path: Path, source: Source, airflow_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Instance]:
    """The instance of connection ``cdc_shop`` (streams from its start: ``snapshot.mode:
    no_data``; drops its slot when stopped), and ``pg_shop``; stopped after the test."""
    settings = {"snapshot.mode": "no_data", "slot.drop.on.stop": True, **WITH_SCHEMAS}
    with _instance(tmp_path, source, "shop", **settings) as instance:
        _connections(monkeypatch, source, cdc_shop=instance)
        yield instance


@pytest.fixture
def shop_batch(tmp_path: Path, source: Source, airflow_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Instance]:
    """The instance of connection ``cdc_shop_batch`` (initial snapshot at its first capture)."""
    with _instance(tmp_path, source, "shop-batch", **{"snapshot.mode": "initial"}) as instance:
        _connections(monkeypatch, source, cdc_shop_batch=instance)
        yield instance


def _connections(monkeypatch: pytest.MonkeyPatch, source: Source, **instances: Instance) -> None:
    connect_source(monkeypatch, source)
    local_spark(monkeypatch)
    for conn_id, instance in instances.items():
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps(
                {
                    "conn_type": "cdc_engine",
                    "login": instance.name,
                    "password": TOKEN,
                    "extra": {"config_path": str(instance.config_path)},
                }
            ),
        )


#: The converters' schemas in every record (Debezium's JSON converter default): the apply job
#: creates and evolves the replica's tables from them (README: Schema changes).
WITH_SCHEMAS = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}


@pytest.fixture
def replica(source: Source, monkeypatch: pytest.MonkeyPatch) -> Iterator[Source]:
    """Connection ``pg_shop_replica``: an empty database, where the example pipeline's Spark
    job creates the source's tables and applies the changes."""
    name = f"{source.database}_replica"
    with source.connect() as conn:
        conn.execute(f"create database {name}")
    replica = Source(source.server, name, source.user, source.password)
    monkeypatch.setenv(
        "AIRFLOW_CONN_PG_SHOP_REPLICA",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": source.server.host,
                "port": source.server.port,
                "login": source.user,
                "password": source.password,
                "schema": name,
            }
        ),
    )
    yield replica
    with source.connect() as conn:
        conn.execute(f"drop database if exists {name} with (force)")


def local_spark(monkeypatch: pytest.MonkeyPatch, master: str = "local[2]") -> None:
    """Connection ``spark_cdc``: where the example DAGs' Spark jobs run."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CDC", json.dumps({"conn_type": "spark", "host": master}))


def connect_source(monkeypatch: pytest.MonkeyPatch, source: Source) -> None:
    """Connection ``pg_shop``: the source database, with its password."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_PG_SHOP",
        json.dumps(
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


# -- MariaDB (dags/example_mariadb_capture.py) ------------------------------------------------------
MARIADB_CONN, MARIADB_SOURCE_CONN = "cdc_mariadb", "mariadb_shop"


@dataclass
class MariaSource:
    """A MariaDB database, reached as the user the Airflow connections name."""

    server: MariaDBServer
    database: str

    def connect(self, database: str | None = None) -> pymysql.connections.Connection:
        return self.server.connect(database=database or self.database)

    def execute(self, *statements: str) -> None:
        with self.connect() as conn, conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    def rows(self, table: str, database: str | None = None) -> dict[int, dict[str, Any]]:
        """The table's rows by id."""
        with self.connect(database) as conn, conn.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(f"select * from {table}")
            return {row["id"]: dict(row) for row in cursor.fetchall()}

    def scalar(self, query: str) -> Any:
        with self.connect() as conn, conn.cursor() as cursor:
            cursor.execute(query)
            row = cursor.fetchone()
            return None if row is None else row[0]

    def connection(self, database: str | None = None) -> dict[str, Any]:
        """An Airflow ``mysql`` connection (as ``AIRFLOW_CONN_*`` JSON) to ``database``."""
        return {
            "conn_type": "mysql",
            "host": self.server.host,
            "port": self.server.port,
            "login": self.server.user,
            "password": self.server.password,
            "schema": database or self.database,
        }


@pytest.fixture
def maria_source(mariadb_server: MariaDBServer, mariadb_database: str) -> MariaSource:
    """The captured MariaDB database: ``orders`` (2000 rows, a decimal and a datetime(3)),
    ``customers`` (50 rows) and Debezium's signal table."""
    source = MariaSource(mariadb_server, mariadb_database)
    source.execute(
        "create table orders (id int primary key, status varchar(20), amount decimal(10,2) not null, "
        "updated_at datetime(3) not null)",
        "insert into orders select seq, if(seq % 3 = 0, 'open', 'done'), seq * 1.25, "
        "timestamp '2026-01-01 00:00:00' + interval (seq % 10) day + interval seq second "
        "+ interval (seq % 1000) * 1000 microsecond from seq_1_to_2000",
        "create table customers (id int primary key, name varchar(100))",
        "insert into customers select seq, concat('customer ', seq) from seq_1_to_50",
        "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))",
    )
    return source


@pytest.fixture
def maria_replica(maria_source: MariaSource, monkeypatch: pytest.MonkeyPatch) -> Iterator[MariaSource]:
    """Connection ``mariadb_shop_replica``: an empty database with the source's tables, where
    ``example_mariadb_capture``'s Spark job applies the changes."""
    replica = MariaSource(maria_source.server, f"{maria_source.database}_replica")
    maria_source.execute(f"create database `{replica.database}`")
    replica.execute(
        "create table orders (id int primary key, status varchar(20), amount decimal(10,2) not null, "
        "updated_at datetime(3) not null)",
        "create table customers (id int primary key, name varchar(100))",
    )
    monkeypatch.setenv("AIRFLOW_CONN_MARIADB_SHOP_REPLICA", json.dumps(replica.connection()))
    yield replica
    maria_source.execute(f"drop database if exists `{replica.database}`")


@pytest.fixture
def maria_shop(
    tmp_path: Path, maria_source: MariaSource, airflow_db: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Instance]:
    """The instance of connection ``cdc_mariadb`` (streams from its start: ``snapshot.mode:
    no_data``), the source connection ``mariadb_shop``, and the example DAG's database; stopped
    after the test. Its config file names no server and no credential: the connection does."""
    database = maria_source.database
    state = tmp_path / "mariadb"
    config = {
        "name": f"mariadb-{database[-8:]}",
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "topic.prefix": "shop_mariadb",
        "database.server.id": 10_000 + uuid.uuid4().int % 1_000_000,
        "table.include.list": f"{database}.orders,{database}.customers",
        "signal.data.collection": f"{database}.debezium_signal",
        "snapshot.mode": "no_data",
        "state.dir": str(state),
        "api.token": TOKEN,
        "offset.flush.interval.ms": 100,
        "poll.interval.ms": 100,
        "heartbeat.interval.ms": 1000,
        "incremental.snapshot.chunk.size": 100,
        "sink.type": "changelog",
        "sink.changelog.segment.max.ms": 100,
    }
    path = tmp_path / "mariadb.yaml"
    path.write_text(yaml.safe_dump(config))
    instance = Instance(str(config["name"]), path, state)
    monkeypatch.setenv("CDC_EXAMPLE_MARIADB_DATABASE", database)
    monkeypatch.setenv(f"AIRFLOW_CONN_{MARIADB_SOURCE_CONN.upper()}", json.dumps(maria_source.connection()))
    local_spark(monkeypatch)
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{MARIADB_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "cdc_engine",
                "login": instance.name,
                "password": TOKEN,
                "extra": {"config_path": str(path)},
            }
        ),
    )
    try:
        yield instance
    finally:
        control.stop(instance.props, timeout=30)
