"""What one PostgreSQL task derives from its configuration before any I/O: its database, offset
partition, slot, connection string, topic names, table filter and value modes.

Pure and built once per start (``PostgresTaskConfig.from_context``), so the naming rules - one
slot, partition and topic level per database when ``database.names`` lists several - are
tested without a server, and the task's start reads as its I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from airflow_cdc.engine.connector import TaskContext
from airflow_cdc.engine.sources.postgres.catalog import TableFilter
from airflow_cdc.engine.sources.postgres.changes import MessageFilter
from airflow_cdc.engine.sources.postgres.config import POSTGRES_CONFIG
from airflow_cdc.engine.sources.postgres.types import SESSION_OPTIONS, ValueModes

#: Debezium's ``database.<name>`` TLS settings, which are libpq's parameters of the same names.
TLS_FILES = ("sslrootcert", "sslcert", "sslkey", "sslpassword")
#: Set on each task's config by ``PostgresConnector.task_configs``.
TASK_DATABASE, TASK_SEVERAL = "postgres.task.database", "postgres.task.several"


@dataclass(frozen=True)
class PostgresTaskConfig:
    #: The connector's settings, parsed (POSTGRES_CONFIG).
    settings: Mapping[str, Any]
    database: str
    #: Whether the connector captures several databases (``database.names``): then the slot,
    #: the partition and the topics name the database too.
    several: bool
    engine_name: str

    @classmethod
    def from_context(cls, context: TaskContext) -> PostgresTaskConfig:
        return cls(
            POSTGRES_CONFIG.validate(context.config),
            str(context.config[TASK_DATABASE]),
            bool(context.config.get(TASK_SEVERAL)),
            context.engine_name,
        )

    @property
    def prefix(self) -> str:
        return str(self.settings["topic.prefix"])

    @property
    def partition(self) -> dict[str, Any]:
        """The task's offset partition (Debezium's: ``{"server": topic.prefix}``)."""
        return {"server": self.prefix, "database": self.database} if self.several else {"server": self.prefix}

    @property
    def slot(self) -> str:
        base = str(self.settings["slot.name"])
        if not self.several:
            return base
        return re.sub(r"[^a-z0-9_]", "_", f"{base}_{self.database}".lower())[:63]

    @property
    def conninfo(self) -> str:
        s = self.settings
        return psycopg.conninfo.make_conninfo(
            host=s["database.hostname"],
            port=str(s["database.port"]),
            user=s["database.user"],
            password=s["database.password"] or None,
            dbname=self.database,
            sslmode=s["database.sslmode"],
            **{name: s[f"database.{name}"] for name in TLS_FILES if s[f"database.{name}"]},
            options=SESSION_OPTIONS,
            application_name=f"airflow-cdc-{self.engine_name}",
        )

    def topic(self, schema: str, table: str) -> str:
        parts = (self.prefix, self.database, schema, table) if self.several else (self.prefix, schema, table)
        return ".".join(parts)

    @property
    def transaction_topic(self) -> str | None:
        """Debezium's ``<topic.prefix>.<topic.transaction>`` when ``provide.transaction.metadata``."""
        if not self.settings["provide.transaction.metadata"]:
            return None
        return f"{self.prefix}.{self.settings['topic.transaction']}"

    @property
    def signal_table(self) -> tuple[str, str] | None:
        """``signal.data.collection`` as (schema, table); ``table`` alone means ``public.table``."""
        name = str(self.settings["signal.data.collection"])
        if not name:
            return None
        parts = name.split(".")
        return (parts[-2], parts[-1]) if len(parts) >= 2 else ("public", parts[0])

    def table_filter(self) -> TableFilter:
        """The include/exclude lists; the signal table is captured whatever they say."""
        s = self.settings
        include = list(s["table.include.list"])
        if include and self.signal_table:
            include.append(re.escape(".".join(self.signal_table)))
        return TableFilter(include, s["table.exclude.list"], s["column.exclude.list"])

    @property
    def modes(self) -> ValueModes:
        s = self.settings
        return ValueModes(
            s["decimal.handling.mode"],
            s["time.precision.mode"],
            s["binary.handling.mode"],
            s["interval.handling.mode"],
            s["money.fraction.digits"],
            s["hstore.handling.mode"],
            s["include.unknown.datatypes"],
        )

    @property
    def skipped(self) -> frozenset[str]:
        return frozenset(op for op in self.settings["skipped.operations"] if op != "none")

    def message_filter(self) -> MessageFilter:
        s = self.settings
        return MessageFilter(
            f"{self.prefix}.message",
            tuple(re.compile(p) for p in s["message.prefix.include.list"]),
            tuple(re.compile(p) for p in s["message.prefix.exclude.list"]),
        )
