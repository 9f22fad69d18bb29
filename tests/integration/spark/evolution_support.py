"""What the schema-evolution tests share: the two sources (PostgreSQL, MariaDB) with their
dialect's DDL, the targets that start empty, a write load that survives every DDL, the two
backends that capture (our engine; Debezium on Kafka Connect), and "apply until the target
equals the source"."""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.kafka_connect.client import ConnectRestError
from airflow_cdc.spark.apply import ApplyJob, run
from tests.integration.spark.test_apply_job import target_dsn
from tests.integration.spark.test_sql_targets import mysql_url


class Load:
    """Small transactions on ``evolving`` until stopped: updates of ``n``, inserts, deletes.
    Written to survive every step's DDL (it names only ``id`` and ``n``)."""

    def __init__(self, connect: Any) -> None:
        self._connect, self.next_id, self.transactions, self.retried = connect, 1000, 0, 0
        self._run = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._random = random.Random(28)

    def __enter__(self) -> Load:
        self._run.set()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._run.set()
        self._thread.join(30)

    def pause(self) -> None:
        self._idle.clear()
        self._run.clear()
        wait_until(self._idle.is_set, 60, "the load paused")

    def resume(self) -> None:
        self._run.set()

    def _loop(self) -> None:
        with self._connect() as conn:
            while not self._stop.is_set():
                if not self._run.is_set():
                    self._idle.set()
                    self._run.wait()
                    continue
                key = self._random.randint(1, self.next_id)
                cur = conn.cursor()
                try:
                    cur.execute("update evolving set n = n + 1 where id = %s", (key,))
                    cur.execute("insert into evolving (id, n) values (%s, %s)", (self.next_id + 1, self.next_id + 1))
                    if self._random.random() < 0.2:
                        cur.execute("delete from evolving where id = %s", (self._random.randint(1, self.next_id),))
                    conn.commit()
                except Exception:  # a deadlock with a DDL: the application's retry, as any would
                    conn.rollback()
                    self.retried += 1
                    continue
                self.next_id += 1
                self.transactions += 1


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, Decimal):
        return value.normalize()
    return value


class Side:
    """A database the test reads rows from: a source, or a target (PostgreSQL or MariaDB)."""

    def __init__(self, kind: str, connect: Any, table_names: dict[str, str]) -> None:
        self.kind, self._connect, self.table_names = kind, connect, table_names

    def _query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._connect() as conn:
            cur = conn.cursor()
            cur.execute(statement, params or None)
            return list(cur.fetchall())

    def rows(self, table: str, columns: list[str]) -> dict[Any, tuple[Any, ...]]:
        name = self.table_names.get(table, table)
        quote = '"' if self.kind == "postgresql" else "`"
        listed = ", ".join(f"{quote}{c}{quote}" for c in columns)
        return {row[0]: tuple(_plain(v) for v in row) for row in self._query(f"select {listed} from {name}")}

    def columns(self, table: str) -> list[str]:
        schema, name = table.split(".")
        found = self._query(
            "select column_name from information_schema.columns where table_schema = %s and table_name = %s "
            "order by ordinal_position",
            (schema, name),
        )
        return [str(c) for (c,) in found]


def assert_same(source: Side, target: Side, table: str, step: str) -> dict[Any, tuple[Any, ...]]:
    columns = source.columns(table)
    want, got = source.rows(table, columns), target.rows(table, columns)
    missing = sorted(set(want) - set(got))[:5]
    extra = sorted(set(got) - set(want))[:5]
    wrong = [(want[k], got[k]) for k in want if k in got and want[k] != got[k]][:3]
    assert not missing and not extra and not wrong, (
        f"after {step} ({columns}): missing {missing}, extra {extra}, different {wrong}"
    )
    return got


@dataclass
class Source:
    """The captured database: how to reach it, the engine's settings for it, its dialect's DDL."""

    kind: str
    schema: str  # the tables' schema (PostgreSQL) or database (MariaDB), as the changes name them
    connect: Any  # a DB-API connection, not autocommitting
    engine: dict[str, Any]
    position: Any  # the source's current position, as the instance's position() takes it

    @property
    def side(self) -> Side:
        return Side(self.kind, self.connect, {})

    def execute(self, *statements: str) -> None:
        """Each statement in a transaction of its own (a DDL beside the load's transactions)."""
        with self.connect() as conn:
            cur = conn.cursor()
            for statement in statements:
                cur.execute(statement)
                conn.commit()

    def table(self, name: str) -> str:
        return f"{self.schema}.{name}"


PG_TABLE = (
    "create table evolving (id int primary key, n int not null, v varchar(20), amount numeric(10,2), old text, "
    "at timestamptz)"
)
MARIA_TABLE = (
    "create table evolving (id int primary key, n int not null, v varchar(20), amount decimal(10,2), old text, "
    "at datetime(6))"
)
SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"


@pytest.fixture(params=["postgresql", "mariadb"])
def evolving_source(request: pytest.FixtureRequest, pg_server: Any, pg_database: str) -> Iterator[Source]:
    if request.param == "postgresql":
        dsn = pg_server.dsn(pg_database)

        def lsn() -> str:
            with psycopg.connect(dsn) as conn:
                return str(conn.execute("select pg_current_wal_lsn()::text").fetchone()[0])  # type: ignore[index]

        yield Source(
            "postgresql",
            "public",
            lambda: psycopg.connect(dsn),
            {
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": pg_server.host,
                "database.port": pg_server.port,
                "database.user": pg_server.user,
                "database.dbname": pg_database,
                "slot.name": f"slot_{pg_database}",
                "publication.name": f"pub_{pg_database}",
                "slot.drop.on.stop": True,
                "signal.data.collection": "public.debezium_signal",
                "skipped.operations": "none",  # a TRUNCATE's record: the recipe for a table dropped and recreated
            },
            lsn,
        )
        return
    server = request.getfixturevalue("mariadb_server")
    database = server.create_database()

    def gtid() -> str:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("select @@gtid_binlog_pos")
            return str(cur.fetchone()[0])

    try:
        yield Source(
            "mariadb",
            database,
            lambda: server.connect(database=database, autocommit=False),
            {
                "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
                "database.hostname": server.host,
                "database.port": server.port,
                "database.user": server.user,
                "database.password": server.password,
                "database.server.id": 20_000 + uuid.uuid4().int % 1_000_000,
                "database.include.list": database,
                "signal.data.collection": f"{database}.debezium_signal",
                "skipped.operations": "none",
            },
            gtid,
        )
    finally:
        server.drop_database(database)


@pytest.fixture(params=["postgresql", "mariadb"])
def empty_target(request: pytest.FixtureRequest, pg_server: Any, pg_database: str) -> Iterator[tuple[str, Side]]:
    """(target URL, its Side): a target database with no table in it."""
    if request.param == "postgresql":
        with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
            conn.execute(f"create database {pg_database}_target")
        url = target_dsn(pg_server, pg_database)
        yield url, Side("postgresql", lambda: psycopg.connect(url), {})
        with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
            conn.execute(f"drop database if exists {pg_database}_target with (force)")
        return
    server = request.getfixturevalue("mariadb_server")
    database = server.create_database()
    try:
        # The job writes db.table as the changes name it: map the source's tables to this database.
        yield mysql_url(server, database), Side("mariadb", lambda: server.connect(database=database), {"": database})
    finally:
        server.drop_database(database)


class EngineCapture:
    """Our engine, as an instance writing to Kafka, with the changes' schemas."""

    converges = False  # the test waits for its committed position, then applies once

    def __init__(self, source: Source, prefix: str, tmp_path: Path, broker: Any, *, transactions: bool = False) -> None:
        self.source, self.transactions = source, transactions
        self.instance = EngineInstance(
            {
                "provide.transaction.metadata": transactions,
                "name": f"evolve-{prefix}",
                "topic.prefix": prefix,
                **source.engine,
                "state.dir": str(tmp_path / "state"),
                "offset.flush.interval.ms": 100,
                "poll.interval.ms": 50,
                "key.converter.schemas.enable": "true",
                "value.converter.schemas.enable": "true",
                "column.propagate.source.type": ".*",
                "sink.type": "kafka",
                "sink.kafka.producer.bootstrap.servers": broker.bootstrap_servers,
            }
        )
        self._thread = threading.Thread(target=self.instance.run, daemon=True)

    def __enter__(self) -> EngineCapture:
        self._thread.start()
        directory = self.instance.directory
        wait_until(lambda: (read_status(directory) or {}).get("state") == "POLLING_TASKS", 60, "polling")
        return self

    def __exit__(self, *exc: object) -> None:
        self.instance.request_stop()
        self._thread.join(60)

    def captured(self, step: str) -> None:
        position = self.source.position()
        wait_until(lambda: self.instance.position(target=position).reached, 60, f"{step}: captured")

    def snapshot(self, table: str) -> None:
        signal = send_snapshot(self.source, table)

        def done() -> bool:
            items, _ = self.instance.engine.notifications.since(0)
            return any(n["id"] == signal and n["type"] == "COMPLETED" for n in items)

        wait_until(done, 120, f"snapshot of {table}")


class ConnectCapture:
    """Debezium's connector on the Kafka Connect worker, with the JSON converter's schemas."""

    converges = True  # no position to wait for: the test applies until the target equals the source

    def __init__(self, source: Source, prefix: str, worker: Any, broker: Any, *, transactions: bool = False) -> None:
        self.transactions = transactions
        self.client, self.name = ConnectClient(worker.url), f"evolve-{prefix}"
        extra: dict[str, Any] = (
            {"plugin.name": "pgoutput"}
            if source.kind == "postgresql"
            else {
                "schema.history.internal.kafka.bootstrap.servers": broker.bootstrap_servers,
                "schema.history.internal.kafka.topic": f"{prefix}.history",
            }
        )
        self.config = {
            **source.engine,
            **extra,
            "topic.prefix": prefix,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "true",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
            "column.propagate.source.type": ".*",
            "provide.transaction.metadata": str(transactions).lower(),
        }
        self.source = source

    def __enter__(self) -> ConnectCapture:
        self.client.create(self.name, self.config)

        def running() -> bool:
            try:
                status = self.client.status(self.name)
            except ConnectRestError:  # 404 until the worker has the connector's status
                return False
            failed = [t.trace for t in status.tasks if t.state == "FAILED"]
            assert not failed, f"the connector's task failed: {failed[0]}"
            return bool(status.tasks) and all(t.state == "RUNNING" for t in status.tasks)

        wait_until(running, TIMEOUT, "the connector running")
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.delete(self.name)

    def captured(self, step: str) -> None:
        return None

    def snapshot(self, table: str) -> None:
        send_snapshot(self.source, table)  # the test applies until the target equals the source


def send_snapshot(source: Source, table: str) -> str:
    signal = uuid.uuid4().hex
    data = json.dumps({"data-collections": [table]})
    source.execute(f"insert into debezium_signal values ('{signal}', 'execute-snapshot', '{data}')")
    return signal


def apply_until_equal(
    spark: Any, job: ApplyJob, capture: Any, sides: tuple[Side, Side], step: str, tables: tuple[str, ...]
) -> None:
    """Apply what was captured; then the tables must equal the source's. On a backend with no
    position to wait for (Connect), apply again until they do (or a deadline)."""
    if not capture.converges:
        capture.captured(step)
        run(spark, job)
        for table in tables:
            assert_same(*sides, table, step)
        return
    failures: list[str] = []

    def equal() -> bool:
        run(spark, job)
        try:
            for table in tables:
                assert_same(*sides, table, step)
        except Exception as exc:  # not equal yet, or a column the target does not have yet
            failures[:] = [f"{type(exc).__name__}: {exc}"]
            return False
        return True

    try:
        wait_until(equal, TIMEOUT, f"{step}: the target equal to the source")
    except TimeoutError:
        raise AssertionError(failures[0] if failures else step) from None


#: A connector's first start takes a snapshot, and a busy machine is slow to deliver.
TIMEOUT = 180
