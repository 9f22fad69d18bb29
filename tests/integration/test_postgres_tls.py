"""The PostgreSQL connector against a server that takes TCP clients only over TLS with a client
certificate (``hostssl ... cert``): Debezium's ``database.sslrootcert``, ``database.sslcert`` and
``database.sslkey`` reach every connection the engine opens - catalog, snapshot, replication,
the incremental snapshot's reads and watermarks in the signal table - and the JDBC offset store
takes pgjdbc's URL parameters of the same names. Without the certificate the engine fails at
once, naming the settings, instead of retrying."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import psycopg
import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.pg_support import create_load_table, engine_config

pytestmark = pytest.mark.integration

SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"
ROWS = 30


class Collector:
    def __init__(self) -> None:
        self.values: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, record: Any) -> None:
        with self.lock:
            if record.topic.endswith(".public.t") and record.value is not None:
                self.values.append(record.value)

    def ids(self, op: str) -> set[int]:
        with self.lock:
            return {v["after"]["id"] for v in self.values if v["op"] == op and v.get("after")}


@pytest.fixture
def tls_database(pg_tls_server: Any) -> Any:
    name = pg_tls_server.create_database()
    with psycopg.connect(pg_tls_server.dsn(name), autocommit=True) as conn:
        conn.execute(SIGNAL_DDL)
        create_load_table(conn, ROWS)
    yield name
    pg_tls_server.drop_database(name)


def jdbc_url(server: Any, database: str) -> str:
    tls = {k.removeprefix("database."): v for k, v in server.client_tls().items()}
    return f"jdbc:postgresql://{server.host}:{server.port}/{database}?{urlencode(tls)}"


def test_the_engine_captures_over_tls_with_a_client_certificate(pg_tls_server: Any, tls_database: str) -> None:
    server = pg_tls_server
    config = engine_config(
        server,
        tls_database,
        **server.client_tls(),
        **{
            "signal.data.collection": "public.debezium_signal",
            "offset.storage": "jdbc",
            # Beside the captured database: its publication takes every table, deletes included.
            "offset.storage.jdbc.url": jdbc_url(server, "postgres"),
            "offset.storage.jdbc.user": server.user,
            "offset.storage.jdbc.offset.table.name": f"offsets_{tls_database}",
        },
    )
    collector = Collector()
    engine = Engine(config, consumer=collector)
    with EngineRunner(engine):
        wait_until(lambda: collector.ids("r") == set(range(1, ROWS + 1)), 60, "the snapshot over TLS")
        with psycopg.connect(server.dsn(tls_database), autocommit=True) as conn:
            conn.execute("insert into t values (%s, 'streamed', 0)", (ROWS + 1,))
            # An incremental snapshot: watermarks written to the signal table, chunks read.
            signal = {"data-collections": ["public.t"]}
            conn.execute(
                "insert into debezium_signal values (%s, 'execute-snapshot', %s)",
                (uuid.uuid4().hex, json.dumps(signal)),
            )
        wait_until(lambda: ROWS + 1 in collector.ids("c"), 60, "a change streamed over TLS")
        wait_until(
            lambda: any(n["type"] == "COMPLETED" for n in engine.notifications.since(0)[0]), 60, "incremental snapshot"
        )
    with psycopg.connect(server.dsn("postgres")) as conn:
        stored = conn.execute(f"select count(*) from offsets_{tls_database}").fetchone()
        ssl = conn.execute("select ssl, client_dn from pg_stat_ssl where pid = pg_backend_pid()").fetchone()
    assert stored is not None and stored[0] >= 1, "the JDBC offset store wrote nothing"
    assert ssl == (True, "/CN=postgres")


@pytest.mark.parametrize(
    ("left_out", "named"),
    [("database.sslcert", "database.sslcert"), ("database.sslrootcert", "database.sslrootcert")],
)
def test_without_the_certificate_it_fails_at_once_naming_the_settings(
    pg_tls_server: Any, tls_database: str, left_out: str, named: str
) -> None:
    tls = {k: v for k, v in pg_tls_server.client_tls().items() if k not in (left_out, "database.sslkey")}
    engine = Engine(
        engine_config(pg_tls_server, tls_database, **tls, **{"errors.max.retries": 0}), consumer=Collector()
    )
    started = time.monotonic()
    with pytest.raises(CdcError) as failed:
        engine.run()
    assert time.monotonic() - started < 15, "a refused certificate was retried"
    message = str(failed.value) + "".join(f" <- {e}" for e in _causes(failed.value))
    assert named in message, message


def _causes(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    while error.__cause__ is not None and len(found) < 5:
        error = error.__cause__
        found.append(error)
    return found
