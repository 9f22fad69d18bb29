"""The MariaDB connector over TLS, for a user created ``REQUIRE X509``: Debezium's
``database.ssl.mode``, ``database.ssl.truststore`` and ``database.ssl.keystore`` (PEM files here)
reach every connection - the snapshot's (through mysqlclient where libmariadb checks what PyMySQL
checks), the binlog reader's. Without the client certificate, or with a CA that did not sign the
server's certificate, the engine fails at once naming them."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from airflow_cdc.engine import Engine, mysql_client
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.sources.mysql import snapshot_client
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.local.tls import CertificateAuthority
from tests.integration.mysql_support import create_load_table, engine_config
from tests.requirements import require_module

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


def test_the_snapshot_reads_over_tls_through_mysqlclient(
    mariadb_tls_server: Any, x509_user: Any, tmp_path: Any
) -> None:
    """With ``verify_identity`` and PEM stores the snapshot's rows come through mysqlclient
    (libmariadb checks what PyMySQL checks); a certificate from another CA, or none for a
    ``REQUIRE X509`` user, is refused as it is on PyMySQL."""
    require_module("MySQLdb", extra="mysqlclient")
    server, (database, user) = mariadb_tls_server, x509_user
    base = {**server.connection_params(database=database), "user": user, "password": "pw"}
    params = {**base, **mysql_client.tls_params(server.client_tls())}
    conn = snapshot_client.connect(params, autocommit=True)
    try:
        assert type(conn).__module__.startswith("MySQLdb")
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            assert cur.fetchone()[1], "not encrypted"
            cur.execute("SELECT count(*) FROM t")
            assert cur.fetchone() == (ROWS,)
    finally:
        conn.close()
    other_ca = CertificateAuthority(tmp_path, "another CA").cert
    for settings, code in (
        ({**server.client_tls(), "database.ssl.truststore": str(other_ca)}, 2026),  # CR_SSL_CONNECTION_ERROR
        ({**server.client_tls(), "database.ssl.keystore": ""}, 1045),  # ER_ACCESS_DENIED_ERROR
    ):
        refused_params = {**base, **mysql_client.tls_params(settings)}
        assert snapshot_client.uses_mysqlclient(refused_params)
        with pytest.raises(snapshot_client.ERRORS) as refused:
            snapshot_client.connect(refused_params, autocommit=True).close()
        assert refused.value.args[0] == code, refused.value


def test_required_tls_against_a_server_without_it_is_refused_on_either_library(mariadb_server: Any) -> None:
    require_module("MySQLdb", extra="mysqlclient")
    params = {**mariadb_server.connection_params(), **mysql_client.tls_params({"database.ssl.mode": "required"})}
    for connect in (lambda: snapshot_client.connect(params), lambda: mysql_client.connect(**params)):
        with pytest.raises(snapshot_client.ERRORS) as refused:
            connect().close()
        assert refused.value.args[0] == 2026, refused.value
