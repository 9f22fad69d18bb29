"""Which library a snapshot's connection uses (``snapshot_client.uses_mysqlclient``): mysqlclient
where it connects where PyMySQL would (``localhost`` over TCP), and where libmariadb does exactly
what the TLS settings ask; PyMySQL for the rest."""

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


def tls(host: str = "127.0.0.1", **settings: str) -> dict[str, object]:
    return {**TCP, "host": host, **mysql_client.tls_params(settings)}


STORES = {"database.ssl.truststore": "/ca.pem", "database.ssl.keystore": "/client.pem"}
FILES = {"ca": "/ca.pem", "cert": "/client.pem", "key": "/client.pem"}


def test_tls_settings_libmariadb_does_exactly_go_through_mysqlclient() -> None:
    cases = {
        "no settings": ({}, {"ssl_mode": "DISABLED"}),
        "disabled": ({"database.ssl.mode": "disabled", **STORES}, {"ssl_mode": "DISABLED"}),
        "required": ({"database.ssl.mode": "required"}, {"ssl_mode": "REQUIRED", "ssl": {}}),
        "required, stores": ({"database.ssl.mode": "required", **STORES}, {"ssl_mode": "REQUIRED", "ssl": FILES}),
        "verify_identity": (
            {"database.ssl.mode": "verify_identity", **STORES},
            {"ssl_mode": "VERIFY_IDENTITY", "ssl": FILES},
        ),
    }
    for case, (settings, expected) in cases.items():
        assert snapshot_client.mysqlclient_tls(tls(**settings)) == expected, case
        assert snapshot_client.uses_mysqlclient(tls(**settings)), case


def test_tls_settings_libmariadb_would_read_otherwise_keep_pymysql() -> None:
    cases = {
        # libmariadb checks the host name with the CA
        "verify_ca": tls(**{"database.ssl.mode": "verify_ca", **STORES}),
        # no truststore: PyMySQL checks against the system's CAs
        "verify_identity, system CAs": tls(**{"database.ssl.mode": "verify_identity"}),
        # reached at an address, the certificate would be checked against the address
        "verify_identity, localhost": tls("localhost", **{"database.ssl.mode": "verify_identity", **STORES}),
        # TLS when the server offers it, plaintext otherwise
        "preferred, stores": tls(**STORES),
        # mysqlclient cannot pass the key's passphrase
        "encrypted key": tls(**{"database.ssl.mode": "required", **STORES, "database.ssl.keystore.password": "k"}),
    }
    for case, params in cases.items():
        assert snapshot_client.mysqlclient_tls(params) is None, case
        assert not snapshot_client.uses_mysqlclient(params), case


def test_localhost_is_reached_over_tcp_at_the_addresses_pymysql_tries() -> None:
    # libmariadb would take "localhost" for its Unix socket, not the configured port.
    assert snapshot_client.uses_mysqlclient({**TCP, "host": "localhost"})
    addresses = snapshot_client.tcp_addresses("LOCALHOST", 3307)
    expected = [info[4][0] for info in socket.getaddrinfo("localhost", 3307, type=socket.SOCK_STREAM)]
    assert addresses == list(dict.fromkeys(expected)) and "localhost" not in addresses
    assert snapshot_client.tcp_addresses("db.example.com", 3307) == ["db.example.com"]
