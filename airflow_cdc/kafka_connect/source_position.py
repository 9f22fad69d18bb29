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

from airflow_cdc.engine.connector import source_database
from airflow_cdc.engine.errors import ConfigError, ConfigProblem


def position_reader(config: Mapping[str, Any], password: str | None) -> Callable[[], str]:
    """A function reading the current position of the database the connector ``config``
    (Debezium's keys) captures, as ``password`` allows (the SQL is the source's:
    ``SourceDatabase.read_position``)."""
    database = source_database(config.get("connector.class"))
    if database is None:
        raise ConfigError(
            [
                ConfigProblem(
                    "connector.class",
                    f"{config.get('connector.class')!r}: no way to read its database's position",
                    "use a PostgreSQL, MySQL or MariaDB connector, or give the offset sensor a target position",
                )
            ]
        )
    settings = dict(config)
    return lambda: database.read_position(settings, password)
