"""Which library a snapshot's connection uses (``snapshot_client.uses_mysqlclient``): mysqlclient
where it connects where PyMySQL would (``localhost`` over TCP), and without TLS settings (PyMySQL's
are checked)."""

from __future__ import annotations

import socket

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


def test_localhost_is_reached_over_tcp_at_the_addresses_pymysql_tries() -> None:
    # libmariadb would take "localhost" for its Unix socket, not the configured port.
    assert snapshot_client.uses_mysqlclient({**TCP, "host": "localhost"})
    addresses = snapshot_client.tcp_addresses("LOCALHOST", 3307)
    expected = [info[4][0] for info in socket.getaddrinfo("localhost", 3307, type=socket.SOCK_STREAM)]
    assert addresses == list(dict.fromkeys(expected)) and "localhost" not in addresses
    assert snapshot_client.tcp_addresses("db.example.com", 3307) == ["db.example.com"]
