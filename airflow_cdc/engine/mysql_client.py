"""``pymysql.connect`` with the password sent as UTF-8, and Debezium's ``database.ssl.*``
settings as PyMySQL's TLS arguments.

Why the password: PyMySQL encodes a ``str`` password as latin-1, so a password with a character
outside it (``cdc-pw ☂``) failed with a codec error before reaching the server. The server
hashes the bytes the password was set with, which are UTF-8 when it was set from a ``utf8mb4``
session (every current client's default); bytes are passed through as they are.

Why TLS here: every MySQL connection of the package (the connector's, the binlog reader's, the
snapshot's, the JDBC offset store's) goes through :func:`connect`, so ``required`` is enforced
in one place - PyMySQL itself falls back to a plain connection when the server offers no TLS.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Debezium's ``database.ssl.mode`` values.
SSL_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")
#: A :func:`connect` argument (never PyMySQL's): fail unless the connection is encrypted.
REQUIRE_TLS = "cdc_require_tls"


def tls_params(settings: Mapping[str, Any]) -> dict[str, Any]:
    """PyMySQL arguments for Debezium's ``database.ssl.mode``, ``database.ssl.truststore`` (a
    PEM file of CA certificates) and ``database.ssl.keystore`` (a PEM file with the client's
    key and certificate chain; ``database.ssl.keystore.password`` if the key is encrypted).
    Debezium's stores are JKS or PKCS#12 for the JVM; Python reads PEM, as Kafka 4 does."""
    mode = str(settings.get("database.ssl.mode") or "preferred").lower()
    truststore = settings.get("database.ssl.truststore") or None
    keystore = settings.get("database.ssl.keystore") or None
    if mode == "disabled":
        return {"ssl_disabled": True}
    if mode == "preferred" and not (truststore or keystore):
        return {}  # a deviation from Debezium: no TLS unless asked for, as before
    verify = mode in ("verify_ca", "verify_identity")
    ssl: dict[str, Any] = {"check_hostname": mode == "verify_identity", "verify_mode": verify}
    if truststore:
        ssl["ca"] = str(truststore)
    if keystore:
        ssl["cert"] = str(keystore)  # the key is read from the same file
        if settings.get("database.ssl.keystore.password"):
            ssl["password"] = str(settings["database.ssl.keystore.password"])
    params: dict[str, Any] = {"ssl": ssl}
    if mode != "preferred":
        params[REQUIRE_TLS] = True
    return params


def connect(**params: Any) -> Any:
    import pymysql  # loaded by those who connect, not by every importer of this module

    if "db" in params:  # mysql-replication's name for it, which PyMySQL deprecates
        params.setdefault("database", params.pop("db"))
    password = params.get("password")
    if isinstance(password, str):
        params["password"] = password.encode("utf-8")
    require_tls = params.pop(REQUIRE_TLS, False)
    conn = pymysql.connect(**params)
    if require_tls and not conn._secure:  # PyMySQL's own flag: it has no public one
        conn.close()
        raise pymysql.OperationalError(
            2026, "the server offers no TLS and database.ssl.mode requires it (enable ssl on the server)"
        )
    return conn
