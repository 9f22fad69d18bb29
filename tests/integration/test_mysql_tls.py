"""The MariaDB connector over TLS, for a user created ``REQUIRE X509``: Debezium's
``database.ssl.mode``, ``database.ssl.truststore`` and ``database.ssl.keystore`` (PEM files here)
reach every connection - the snapshot's, the binlog reader's. Without the client certificate, or
with a CA that did not sign the server's certificate, the engine fails at once naming them."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.local.tls import CertificateAuthority
from tests.integration.mysql_support import create_load_table, engine_config

pytestmark = pytest.mark.integration

ROWS = 20


class Ids:
    def __init__(self) -> None:
        self.seen: dict[str, set[int]] = {"r": set(), "c": set()}
        self.lock = threading.Lock()

    def __call__(self, record: Any) -> None:
        value = record.value
        if value is not None and value.get("op") in self.seen:
            with self.lock:
                self.seen[value["op"]].add(value["after"]["id"])


@pytest.fixture
def x509_user(mariadb_tls_server: Any) -> Any:
    """A database with a table, and a user that must present a client certificate."""
    server = mariadb_tls_server
    database, user = server.create_database(), f"x509_{uuid.uuid4().hex[:8]}"
    with server.connect(database=database) as conn, conn.cursor() as cur:
        create_load_table(conn, ROWS)
        cur.execute(f"create user '{user}'@'%' identified by 'pw' require x509")
        cur.execute(f"grant select, reload, lock tables, replication slave, binlog monitor on *.* to '{user}'@'%'")
    yield database, user
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"drop user if exists '{user}'@'%'")
    server.drop_database(database)


def config(server: Any, database: str, user: str, **tls: str) -> dict[str, Any]:
    return engine_config(server, database, **{"database.user": user, "database.password": "pw", **tls})


def test_the_engine_captures_as_a_require_x509_user(mariadb_tls_server: Any, x509_user: Any) -> None:
    server, (database, user) = mariadb_tls_server, x509_user
    ids = Ids()
    engine = Engine(config(server, database, user, **server.client_tls()), consumer=ids)
    with EngineRunner(engine):
        wait_until(lambda: ids.seen["r"] == set(range(1, ROWS + 1)), 60, "the snapshot over TLS")
        with server.connect(database=database) as conn, conn.cursor() as cur:
            cur.execute("insert into t values (%s, 'streamed', 0)", (ROWS + 1,))
        wait_until(lambda: ROWS + 1 in ids.seen["c"], 60, "the binlog over TLS")


def test_without_the_certificate_or_the_right_ca_it_fails_at_once_naming_the_settings(
    mariadb_tls_server: Any, x509_user: Any, tmp_path: Any
) -> None:
    server, (database, user) = mariadb_tls_server, x509_user
    tls = server.client_tls()
    other_ca = CertificateAuthority(tmp_path, "another CA").cert
    for settings, named in (
        ({**tls, "database.ssl.keystore": ""}, "database.ssl.keystore"),
        ({**tls, "database.ssl.truststore": str(other_ca)}, "database.ssl.truststore"),
    ):
        engine = Engine(config(server, database, user, **settings, **{"errors.max.retries": 0}), consumer=Ids())
        started = time.monotonic()
        with pytest.raises(CdcError) as failed:
            engine.run()
        assert time.monotonic() - started < 15, "a TLS refusal was retried"
        assert named in str(failed.value), str(failed.value)
