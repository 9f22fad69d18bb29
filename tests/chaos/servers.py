"""A scenario's own servers - the source database, a Kafka broker for the Kafka sink, the tmpfs
mounts a disk fault needs - started for it and closed after it: the faults restart and kill
them, which the servers the test session shares must never see."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql

from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from tests.chaos import checks
from tests.chaos.faults import ChangelogDiskFull, OffsetsUnavailable
from tests.chaos.mounts import mounted
from tests.chaos.workload import APPLICATION, Flavour, MariaDB, Postgres

#: What the tmpfs mounts hold: the whole changelog of a run (about 10 MB), and the offsets file.
CHANGELOG_KB, OFFSETS_KB = 128 * 1024, 1024
#: The broker's fast re-registration after a kill (tests/conftest.py's FAST_CRASH_RECOVERY).
BROKER_SETTINGS = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"}
LOAD_USER, LOAD_PASSWORD = "chaos_load", "chaos-load"


class Servers:
    def __init__(self, source: str, server: Any, database: str, flavour: Flavour) -> None:
        self.source, self.server, self.database, self.flavour = source, server, database, flavour
        self.broker: KafkaBroker | None = None
        self.worker: KafkaConnectWorker | None = None
        self.mounts: dict[str, Any] = {}

    @classmethod
    @contextlib.contextmanager
    def started(cls, scenario: Any, work: Path) -> Iterator[Servers]:
        with contextlib.ExitStack() as stack:
            if scenario.source == "postgres":
                servers = cls._postgres(stack.enter_context(PostgresServer()))
            else:
                servers = cls._mariadb(stack.enter_context(MariaDBServer()))
            if any(issubclass(fault, ChangelogDiskFull) for fault in scenario.pool):
                servers.mounts["changelog"] = stack.enter_context(mounted(work / "changelog", CHANGELOG_KB))
            if OffsetsUnavailable in scenario.pool:
                servers.mounts["offsets"] = stack.enter_context(mounted(work / "offsets", OFFSETS_KB))
            if scenario.sink == "kafka" or scenario.pipeline == "connect":
                servers.broker = stack.enter_context(KafkaBroker(settings=BROKER_SETTINGS))
            if scenario.pipeline == "connect":
                # Started by the scenario's ConnectEngine (and after each kill); closed here.
                servers.worker = KafkaConnectWorker(servers.broker)
                stack.callback(servers.worker.close)
            yield servers

    @classmethod
    def _postgres(cls, server: PostgresServer) -> Servers:
        database = server.create_database("chaos")
        dsn = server.dsn(database, application_name=APPLICATION)
        return cls("postgres", server, database, Postgres(functools.partial(psycopg.connect, dsn)))

    @classmethod
    def _mariadb(cls, server: MariaDBServer) -> Servers:
        database = server.create_database("chaos")
        with server.connect() as conn, conn.cursor() as cur:
            # The load logs in as a user of its own: the engine's connections are then root's.
            cur.execute(f"create user '{LOAD_USER}'@'127.0.0.1' identified by '{LOAD_PASSWORD}'")
            cur.execute(f"grant all on `{database}`.* to '{LOAD_USER}'@'127.0.0.1'")
        connect = functools.partial(
            pymysql.connect,
            host=server.host,
            port=server.port,
            user=LOAD_USER,
            password=LOAD_PASSWORD,
            database=database,
            autocommit=False,
        )
        return cls("mariadb", server, database, MariaDB(connect))

    def admin(self) -> Any:
        if self.source == "postgres":
            return self.server.connect(self.database)
        return self.server.connect(database=self.database)

    def usable(self, conn: Any) -> bool:
        try:
            if self.source == "postgres":
                conn.execute("select 1")
            else:
                conn.ping(reconnect=False)
            return True
        except (psycopg.Error, pymysql.Error):
            return False

    def leaks(self, conn: Any, slot: str, workload: str) -> list[str]:
        if self.source == "postgres":
            return checks.pg_leaks(conn, slot, workload)
        return checks.mariadb_leaks(conn, self.server.user)
