"""The captured database's current position, read from the database itself: Debezium on Kafka
Connect reports none (only over JMX), and the offset sensor's "current" and "caught up" need it.

Written as the connector's positions are (what its codec parses): an LSN ``0/16B3748`` for
PostgreSQL, the executed GTID set for MySQL (``uuid:1-5``) and MariaDB (``0-1-42``), else the
binlog's ``file:pos``. Each call opens a short connection: the sensor asks every few seconds.

Unlike the embedded instance's "current" (the newest position the task has *seen*, ADR 0010),
this is the server's: Debezium's PostgreSQL offsets pass it only with a later change, so on a
quiet database give the connector ``heartbeat.interval.ms`` and a ``heartbeat.action.query``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.errors import ConfigError, ConfigProblem, RetriableError


def position_reader(config: Mapping[str, Any], password: str | None) -> Callable[[], str]:
    """A function reading the current position of the database the connector ``config``
    (Debezium's keys) captures, as ``password`` allows."""
    kind = str(config.get("connector.class") or "").lower()
    host = str(config.get("database.hostname") or "127.0.0.1")
    user = str(config.get("database.user") or "")
    if "postgres" in kind:
        dsn = {
            "host": host,
            "port": int(config.get("database.port") or 5432),
            "user": user,
            "password": password or "",
            "dbname": str(config.get("database.dbname") or "postgres"),
            # Debezium's TLS settings are libpq's parameters of the same names.
            **{
                k: config[f"database.{k}"]
                for k in ("sslmode", "sslrootcert", "sslcert", "sslkey")
                if config.get(f"database.{k}")
            },
        }
        return lambda: _postgres(dsn)
    if "mysql" in kind or "mariadb" in kind:
        params = {
            "host": host,
            "port": int(config.get("database.port") or 3306),
            "user": user,
            "password": password or "",
        }
        return lambda: _mysql(params, mariadb="mariadb" in kind)
    raise ConfigError(
        [
            ConfigProblem(
                "connector.class",
                f"{config.get('connector.class')!r}: no way to read its database's position",
                "use a PostgreSQL, MySQL or MariaDB connector, or give the offset sensor a target position",
            )
        ]
    )


def _postgres(dsn: Mapping[str, Any]) -> str:
    import psycopg

    try:
        with psycopg.connect(**dsn, connect_timeout=10, autocommit=True) as conn:
            row = conn.execute("select pg_current_wal_lsn()::text").fetchone()
    except psycopg.OperationalError as exc:
        raise RetriableError(f"cannot read the source's position: {exc}") from exc
    assert row is not None
    return str(row[0])


def _mysql(params: Mapping[str, Any], *, mariadb: bool) -> str:
    import pymysql

    try:
        with mysql_client.connect(**params, connect_timeout=10) as conn, conn.cursor() as cur:
            cur.execute("select @@gtid_binlog_pos" if mariadb else "select @@gtid_executed")
            row = cur.fetchone()
            gtids = str(row[0] or "").replace("\n", "") if row else ""
            if gtids:
                return gtids
            cur.execute("show master status")
            status = cur.fetchone()
    except pymysql.OperationalError as exc:
        raise RetriableError(f"cannot read the source's position: {exc}") from exc
    if not status:
        raise ConfigError(
            [ConfigProblem("log_bin", "the server writes no binlog", "enable the binlog (log_bin, binlog_format=ROW)")]
        )
    return f"{status[0]}:{status[1]}"
