"""MySQL and MariaDB as tools outside capture reach them (``sources/database.py``): PyMySQL
through :mod:`airflow_cdc.engine.mysql_client` (the UTF-8 password, ``database.ssl.*``), the
executed GTID set or the binlog's ``file:pos``, and the signal table's database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.errors import CdcError, ConfigError, ConfigProblem, RetriableError
from airflow_cdc.engine.sources.database import SourceDatabase, single_name
from airflow_cdc.engine.sources.mysql.connect_errors import refusal_fix
from airflow_cdc.engine.sources.mysql.server import ServerSetupError, binlog_status


class MySqlDatabase(SourceDatabase):
    def __init__(self, *, mariadb: bool) -> None:
        self.mariadb = mariadb

    def connect(self, config: Mapping[str, Any], password: str | None, *, database: str | None = None) -> Any:
        return mysql_client.connect(
            host=str(config.get("database.hostname") or "127.0.0.1"),
            port=int(config.get("database.port") or 3306),
            user=config.get("database.user") or None,
            password=password or "",
            database=database,
            connect_timeout=10,
            autocommit=True,
            **mysql_client.tls_params(config),
        )

    def read_position(self, config: Mapping[str, Any], password: str | None) -> str:
        """The executed GTID set (MySQL ``uuid:1-5``, MariaDB ``0-1-42``), else the binlog's
        ``file:pos`` (MySQL without GTIDs)."""
        import pymysql

        try:
            with self.connect(config, password) as conn:
                with conn.cursor() as cur:
                    cur.execute("select @@gtid_binlog_pos" if self.mariadb else "select @@gtid_executed")
                    row = cur.fetchone()
                gtids = str(row[0] or "").replace("\n", "") if row else ""
                if gtids:
                    return gtids
                file, pos = binlog_status(conn)
        except pymysql.OperationalError as exc:
            fix = refusal_fix(exc)  # a refused login is no reason to try again
            if fix is not None:
                raise CdcError(f"the MySQL/MariaDB server refused the connection: {exc}; {fix}") from exc
            raise RetriableError(f"cannot read the source's position: {exc}") from exc
        except ServerSetupError:  # no binlog at all: neither GTIDs nor a file to stand in
            raise ConfigError(
                [
                    ConfigProblem(
                        "log_bin", "the server writes no binlog", "enable the binlog (log_bin, binlog_format=ROW)"
                    )
                ]
            ) from None
        return f"{file}:{pos}"

    def signal_target(
        self, collection: str, running: Mapping[str, Any], connection: Mapping[str, Any]
    ) -> tuple[str | None, str]:
        """``<database>.<table>`` names the database; a bare ``table`` is in the one database
        ``database.include.list`` names (the instance's, else the connection's), if it names one."""
        parts = collection.split(".")
        if len(parts) >= 2:
            return parts[0], ".".join(parts[1:])
        key = "database.include.list"
        return single_name(running.get(key)) or single_name(connection.get(key)), collection


MYSQL_DATABASE = MySqlDatabase(mariadb=False)
MARIADB_DATABASE = MySqlDatabase(mariadb=True)
