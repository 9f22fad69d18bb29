"""What tools outside capture do with a source database, one implementation per kind of source
(``postgres/database.py``, ``mysql/database.py``), found through the connector registry
(``engine/connector.py``): open a DB-API connection from Debezium's keys (TLS settings
included), read where the database's log stands now and how much of it the capture holds
back, and write a row into the signal table.

The callers - the Kafka Connect backend's position reader, the Airflow signal hook - never
branch on the database kind: they ask the registry for the :class:`SourceDatabase` of a
``connector.class`` and call it.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem

#: A signal table as ``signal.data.collection`` may name it: ``table``, ``schema.table``,
#: ``database.table`` or ``database.schema.table``. The name goes into a statement as it is, so
#: nothing else may be in it.
SIGNAL_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}$")
_NOT_ONE_NAME = re.compile(r"[,\s*+?()\[\]{}|\\^]")


def check_signal_table(collection: str) -> None:
    """ConfigError unless ``collection`` is a plain (schema-qualified) table name."""
    if not SIGNAL_TABLE_NAME.match(collection):
        raise ConfigError(
            [ConfigProblem("signal.data.collection", f"{collection!r} is not a plain table name", "use schema.table")]
        )


def single_name(value: Any) -> str | None:
    """The one database a setting names (MySQL's ``database.include.list`` may list several, or
    be a pattern: then none, and the signal table's name must say which)."""
    text = str(value or "").strip()
    return text if text and not _NOT_ONE_NAME.search(text) else None


class SourceDatabase(abc.ABC):
    """One kind of source database, as tools outside the capture reach it. ``config`` is a
    connector configuration with Debezium's keys (``database.hostname``, ``database.port``,
    ``database.user``, the TLS settings, ...); the password is passed apart from it."""

    @abc.abstractmethod
    def connect(self, config: Mapping[str, Any], password: str | None, *, database: str | None = None) -> Any:
        """A DB-API connection in autocommit mode to ``database`` (None: the server's default
        for the user), with the driver's own errors."""

    @abc.abstractmethod
    def read_position(self, config: Mapping[str, Any], password: str | None) -> str:
        """The database's current position as the connector's codec parses it (a short
        connection each time); RetriableError when the server cannot be reached."""

    @abc.abstractmethod
    def signal_target(
        self, collection: str, running: Mapping[str, Any], connection: Mapping[str, Any]
    ) -> tuple[str | None, str]:
        """Which database to connect to and which table to insert into for the signal table
        ``collection`` of an instance running with ``running`` and reached with ``connection``'s
        settings (the database None: the server's default)."""

    def retained_log_bytes(self, config: Mapping[str, Any], password: str | None) -> int | None:
        """Bytes of the server's log kept only because the capture has not confirmed them (a
        PostgreSQL slot's retained WAL); None where the capture holds nothing back per consumer
        (MySQL's binlog is kept by the server's own expiry, whatever the readers do)."""
        return None

    def write_signal(self, conn: Any, table: str, signal_id: str, kind: str, data: str) -> None:
        """Insert one signal row, Debezium's ``(id, type, data)``, over ``conn``. ``table`` goes
        into the statement as it is: a name checked with :func:`check_signal_table`, or an
        identifier the driver quoted."""
        conn.cursor().execute(f"insert into {table} (id, type, data) values (%s, %s, %s)", (signal_id, kind, data))
