"""The source databases of the connector registry against real servers (``sources/*/database.py``):
the position the Kafka Connect backend reads is one the connector's codec parses and it moves
with a write, Debezium's TLS settings reach the connection (a server that takes only client
certificates lets it in, and refuses it without), a signal row lands where the signal table's
name says, and an unreachable server is a retriable error."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.engine.connector import MARIADB_KIND, POSTGRES_KIND, SourceKind, source_database
from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.kafka_connect.source_position import position_reader
from airflow_cdc.local.ports import free_port

pytestmark = pytest.mark.integration

PG = "io.debezium.connector.postgresql.PostgresConnector"
MARIADB = "io.debezium.connector.mariadb.MariaDbConnector"
SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"


def pg_config(server: Any, database: str, **extra: Any) -> dict[str, Any]:
    return {
        "connector.class": PG,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.dbname": database,
        **extra,
    }


def maria_config(server: Any, database: str, **extra: Any) -> dict[str, Any]:
    return {
        "connector.class": MARIADB,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.include.list": database,
        **extra,
    }


def moved(kind: SourceKind, before: str, after: str) -> bool:
    codec = kind.codec()
    order = codec.compare(codec.parse(after), codec.parse(before))
    return order is not None and order > 0


def test_postgres_position_is_an_lsn_that_moves_with_a_write(pg_server: Any, pg_database: str) -> None:
    read = position_reader(pg_config(pg_server, pg_database), pg_server.password)
    before = read()
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table t (id int primary key)")
        conn.execute("insert into t values (1)")
    after = read()
    assert moved(POSTGRES_KIND, before, after), (before, after)


def test_mariadb_position_is_a_gtid_state_that_moves_with_a_write(mariadb_server: Any, mariadb_database: str) -> None:
    read = position_reader(maria_config(mariadb_server, mariadb_database), mariadb_server.password)
    before = read()
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute("create table t (id int primary key)")
        cur.execute("insert into t values (1)")
    after = read()
    assert moved(MARIADB_KIND, before, after), (before, after)
    assert all(part.count("-") == 2 for part in after.split(",")), after  # domain-server-sequence


def test_postgres_tls_settings_reach_the_connection(pg_tls_server: Any) -> None:
    tls = pg_tls_server.client_tls()
    read = position_reader(pg_config(pg_tls_server, "postgres", **tls), None)
    assert POSTGRES_KIND.codec().parse(read())
    without = {key: value for key, value in tls.items() if key not in ("database.sslcert", "database.sslkey")}
    with pytest.raises(CdcError, match=r"database\.sslcert and database\.sslkey") as refused:  # no retry mends it
        position_reader(pg_config(pg_tls_server, "postgres", **without), None)()
    assert not isinstance(refused.value, RetriableError)


@pytest.fixture
def x509_user(mariadb_tls_server: Any) -> Iterator[str]:
    """A user that must present a client certificate signed by the server's CA."""
    user = f"x509_{uuid.uuid4().hex[:8]}"
    with mariadb_tls_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create user '{user}'@'%' identified by 'pw' require x509")
        cur.execute(f"grant binlog monitor on *.* to '{user}'@'%'")
    yield user
    with mariadb_tls_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"drop user if exists '{user}'@'%'")


def test_mariadb_tls_settings_reach_the_connection(mariadb_tls_server: Any, x509_user: str) -> None:
    tls = mariadb_tls_server.client_tls()
    config = maria_config(mariadb_tls_server, "", **{**tls, "database.user": x509_user})
    assert MARIADB_KIND.codec().parse(position_reader(config, "pw")())
    without = {key: value for key, value in config.items() if key != "database.ssl.keystore"}
    with pytest.raises(CdcError, match=r"database\.ssl\.keystore") as refused:  # no retry mends it
        position_reader(without, "pw")()
    assert not isinstance(refused.value, RetriableError)


@pytest.mark.parametrize("connector_class", [PG, MARIADB])
def test_an_unreachable_server_is_retriable(connector_class: str) -> None:
    config = {"connector.class": connector_class, "database.hostname": "127.0.0.1", "database.port": free_port()}
    with pytest.raises(RetriableError, match="cannot read the source's position"):
        position_reader(config, "pw")()


def test_a_postgres_signal_row_lands_in_the_instances_database(pg_server: Any, pg_database: str) -> None:
    with pg_server.connect(pg_database) as conn:
        conn.execute(SIGNAL_DDL)
    database = source_database(PG)
    assert database is not None
    # The connection names another database: the instance's is the one its signal table is in.
    connection = pg_config(pg_server, "postgres")
    name_database, table = database.signal_target(
        "public.debezium_signal", {"database.dbname": pg_database}, connection
    )
    with database.connect(connection, pg_server.password, database=name_database) as conn:
        database.write_signal(conn, table, "sig-1", "log", json.dumps({"message": "hi"}))
    with pg_server.connect(pg_database) as conn:
        assert conn.execute("select id, type, data from debezium_signal").fetchall() == [
            ("sig-1", "log", '{"message": "hi"}')
        ]


def test_a_mariadb_signal_row_lands_in_the_database_its_name_says(mariadb_server: Any, mariadb_database: str) -> None:
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute(SIGNAL_DDL)
    database = source_database(MARIADB)
    assert database is not None
    connection = maria_config(mariadb_server, "shop,inventory")  # names no one database
    for collection, signal_id in ((f"{mariadb_database}.debezium_signal", "sig-1"), ("debezium_signal", "sig-2")):
        running = {"database.include.list": mariadb_database}
        name_database, table = database.signal_target(collection, running, connection)
        with database.connect(connection, mariadb_server.password, database=name_database) as conn:
            database.write_signal(conn, table, signal_id, "log", "{}")
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute("select id, type, data from debezium_signal order by id")
        assert cur.fetchall() == (("sig-1", "log", "{}"), ("sig-2", "log", "{}"))
