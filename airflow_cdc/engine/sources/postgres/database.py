"""PostgreSQL as tools outside capture reach it (``sources/database.py``): libpq's parameters
from Debezium's keys, the WAL's current LSN, and the signal table's database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.sources.database import SourceDatabase, single_name
from airflow_cdc.engine.sources.postgres.task_config import TLS_FILES


def connect_params(config: Mapping[str, Any], password: str | None, database: str | None) -> dict[str, Any]:
    """psycopg's keyword arguments (None: libpq's default) for the server ``config`` names.
    Debezium's TLS settings are libpq's parameters of the same names, as the connector's own
    connections pass them (``PostgresTaskConfig.conninfo``)."""
    return {
        "host": str(config.get("database.hostname") or "127.0.0.1"),
        "port": int(config.get("database.port") or 5432),
        "user": config.get("database.user") or None,
        "password": password or None,
        "dbname": database,
        "sslmode": config.get("database.sslmode") or None,
        **{name: config[f"database.{name}"] for name in TLS_FILES if config.get(f"database.{name}")},
    }


class PostgresDatabase(SourceDatabase):
    def connect(self, config: Mapping[str, Any], password: str | None, *, database: str | None = None) -> Any:
        import psycopg

        return psycopg.connect(**connect_params(config, password, database), connect_timeout=10, autocommit=True)

    def read_position(self, config: Mapping[str, Any], password: str | None) -> str:
        """The WAL's current LSN (``0/16B3748``): any database of the server tells it."""
        import psycopg

        try:
            with self.connect(config, password, database=str(config.get("database.dbname") or "postgres")) as conn:
                row = conn.execute("select pg_current_wal_lsn()::text").fetchone()
        except psycopg.OperationalError as exc:
            from airflow_cdc.engine.sources.postgres.connect_errors import connect_failure

            # A refused login or certificate is no reason to try again.
            raise connect_failure(exc, "cannot read the source's position") from exc
        assert row is not None
        return str(row[0])

    def retained_log_bytes(self, config: Mapping[str, Any], password: str | None) -> int | None:
        """The WAL the instance's slot keeps (``restart_lsn`` to the current LSN): an idle or
        filtered slot keeps every byte other databases write until the instance confirms a later
        position, which its heartbeat does. None when the slot does not exist (yet)."""
        import psycopg

        slot = str(config.get("slot.name") or "debezium")
        try:
            with self.connect(config, password, database=str(config.get("database.dbname") or "postgres")) as conn:
                row = conn.execute(
                    "select pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
                    "from pg_replication_slots where slot_name = %s",
                    (slot,),
                ).fetchone()
        except psycopg.OperationalError as exc:
            from airflow_cdc.engine.sources.postgres.connect_errors import connect_failure

            raise connect_failure(exc, f"cannot read the WAL slot {slot} retains") from exc
        return None if row is None or row[0] is None else int(row[0])

    def signal_target(
        self, collection: str, running: Mapping[str, Any], connection: Mapping[str, Any]
    ) -> tuple[str | None, str]:
        """``<database>.<schema>.<table>`` (with ``database.names``) names the database;
        ``schema.table`` and ``table`` are in the instance's database, else the connection's."""
        parts = collection.split(".")
        if len(parts) == 3:
            return parts[0], ".".join(parts[1:])
        return single_name(running.get("database.dbname")) or connection.get("database.dbname") or None, collection


POSTGRES_DATABASE = PostgresDatabase()
