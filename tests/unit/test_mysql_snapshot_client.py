"""Which library a snapshot's connection uses (``snapshot_client.uses_mysqlclient``): mysqlclient
only where it connects where PyMySQL would, and without TLS settings (PyMySQL's are checked)."""

from __future__ import annotations

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.sources.mysql import snapshot_client
from tests.requirements import require_module

require_module("MySQLdb", extra="mysqlclient")

TCP = {"host": "127.0.0.1", "port": 3307, "user": "cdc", "password": "pw"}


def test_a_plain_tcp_connection_reads_through_mysqlclient() -> None:
    assert snapshot_client.uses_mysqlclient(TCP)
    assert snapshot_client.uses_mysqlclient({**TCP, "host": "db.example.com"})


def test_tls_settings_keep_pymysql() -> None:
    for mode in ("disabled", "required", "verify_identity"):
        params = {**TCP, **mysql_client.tls_params({"database.ssl.mode": mode})}
        assert not snapshot_client.uses_mysqlclient(params), mode


def test_localhost_keeps_pymysql_which_connects_over_tcp() -> None:
    # libmariadb would take "localhost" for its Unix socket, not the configured port.
    assert not snapshot_client.uses_mysqlclient({**TCP, "host": "localhost"})
    assert not snapshot_client.uses_mysqlclient({**TCP, "host": "LOCALHOST"})
