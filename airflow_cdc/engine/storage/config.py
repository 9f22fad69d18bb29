"""The ``offset.storage*`` configuration: fields, key aliases, and the checks that need several keys.

Names are Kafka Connect's (``bootstrap.servers``, ``offset.storage.topic``, the worker's
``security.protocol``, ``sasl.*`` and ``ssl.*``, ...) and Debezium's
(``offset.storage.jdbc.*``). Debezium 3 renamed some JDBC keys (``offset.storage.jdbc.url`` became
``offset.storage.jdbc.connection.url``, ...) and still accepts the old ones; both spellings are
accepted here, so a configuration moves to either Debezium version unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.config import ConfigDef, Field
from airflow_cdc.engine.errors import ConfigProblem
from airflow_cdc.engine.kafka_settings import security_fields
from airflow_cdc.engine.storage.jdbc import DEFAULT_TABLE_NAME, TABLE_NAME, parse_jdbc_url

OFFSET_STORAGE_ALIASES = {
    "org.apache.kafka.connect.storage.FileOffsetBackingStore": "file",
    "org.apache.kafka.connect.storage.MemoryOffsetBackingStore": "memory",
    "org.apache.kafka.connect.storage.KafkaOffsetBackingStore": "kafka",
    "io.debezium.storage.jdbc.offset.JdbcOffsetBackingStore": "jdbc",
}

#: Other accepted spellings of a key -> the key used here (Debezium 3's JDBC key names).
KEY_ALIASES = {
    "offset.storage.jdbc.connection.url": "offset.storage.jdbc.url",
    "offset.storage.jdbc.connection.user": "offset.storage.jdbc.user",
    "offset.storage.jdbc.connection.password": "offset.storage.jdbc.password",
    "offset.storage.jdbc.table.name": "offset.storage.jdbc.offset.table.name",
    "offset.storage.jdbc.wait.retry.delay.ms": "offset.storage.jdbc.connection.wait.retry.delay.ms",
    "offset.storage.jdbc.retry.max.attempts": "offset.storage.jdbc.connection.retry.max.attempts",
}

OFFSET_STORAGE_CONFIG = ConfigDef(
    [
        Field(
            "offset.storage",
            default="file",
            choices=("file", "memory", "kafka", "jdbc"),
            aliases=OFFSET_STORAGE_ALIASES,
            doc="Where offsets are kept: file, memory, kafka (a compacted topic) or jdbc (a database table).",
        ),
        Field("offset.storage.file.filename", default="", doc="The offsets file of offset.storage=file."),
        Field(
            "offset.flush.timeout.ms",
            type="int",
            default=5_000,
            minimum=1,
            doc="How long an offset write may wait for the Kafka broker's acknowledgement (offset.storage=kafka).",
        ),
        # -- offset.storage=kafka (Kafka Connect's worker keys) --------------------------------
        Field("bootstrap.servers", default="", doc="The Kafka brokers of offset.storage=kafka, host:port[,...]."),
        Field("offset.storage.topic", default="", doc="The compacted topic of offset.storage=kafka."),
        Field(
            "offset.storage.partitions",
            type="int",
            default=1,
            minimum=-1,
            doc="Partitions of the offset topic when it is created (-1: the broker's default). Connect's "
            "default is 25, for a cluster of many connectors sharing one topic; one engine commits a few "
            "keys, and every partition is one more fetch when the engine starts.",
        ),
        Field(
            "offset.storage.replication.factor",
            type="int",
            default=-1,
            minimum=-1,
            doc="Replication factor of the offset topic when it is created (-1: the broker's "
            "default.replication.factor). Connect's default, 3, fails on a one-broker cluster; set 3 in production.",
        ),
        Field(
            "request.timeout.ms",
            type="int",
            default=30_000,
            minimum=1,
            doc="How long the Kafka offset store waits for the broker: bootstrap and each request.",
        ),
        # The worker-level client security of Kafka Connect (security.protocol, sasl.*, ssl.*),
        # which its KafkaOffsetBackingStore uses: the same keys move to a Connect worker.
        *security_fields("", "offset.storage=kafka"),
        # -- offset.storage=jdbc (Debezium's JdbcOffsetBackingStore keys) ----------------------
        Field(
            "offset.storage.jdbc.url",
            default="",
            doc="jdbc:postgresql://host:port/db, jdbc:mysql://... or jdbc:mariadb://... "
            "(alias offset.storage.jdbc.connection.url).",
        ),
        Field("offset.storage.jdbc.user", default="", doc="Database user (alias offset.storage.jdbc.connection.user)."),
        Field(
            "offset.storage.jdbc.password",
            default="",
            doc="Database password (alias offset.storage.jdbc.connection.password).",
        ),
        Field(
            "offset.storage.jdbc.offset.table.name",
            default=DEFAULT_TABLE_NAME,
            doc="The offsets table, created if missing (alias offset.storage.jdbc.table.name).",
        ),
        Field(
            "offset.storage.jdbc.connection.wait.retry.delay.ms",
            type="int",
            default=3_000,
            minimum=0,
            doc="Wait before reconnecting after a lost connection.",
        ),
        Field(
            "offset.storage.jdbc.connection.retry.max.attempts",
            type="int",
            default=5,
            minimum=1,
            doc="Attempts of one offset read or write before it fails.",
        ),
    ]
)


def resolve_key_aliases(props: Mapping[str, Any]) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """``props`` with every aliased key under the name used here; a problem when both are set."""
    resolved = dict(props)
    problems: list[ConfigProblem] = []
    for alias, key in KEY_ALIASES.items():
        if alias not in resolved:
            continue
        value = resolved.pop(alias)
        if key in resolved and resolved[key] != value:
            problems.append(ConfigProblem(alias, f"is set and so is {key}, differently", f"keep one of {alias}, {key}"))
            continue
        resolved[key] = value
    return resolved, problems


def offset_store_problems(settings: Mapping[str, Any]) -> list[ConfigProblem]:
    """What the chosen ``offset.storage`` needs and ``settings`` (parsed values) lack."""
    kind = settings.get("offset.storage")
    if kind == "file" and not settings.get("offset.storage.file.filename"):
        return [
            ConfigProblem(
                "offset.storage.file.filename",
                "is required with offset.storage=file",
                "set it to a file path, e.g. /var/lib/airflow-cdc/NAME/offsets.json, or use offset.storage=memory",
            )
        ]
    if kind == "kafka":
        return _kafka_problems(settings)
    if kind == "jdbc":
        return _jdbc_problems(settings)
    return []


def _kafka_problems(settings: Mapping[str, Any]) -> list[ConfigProblem]:
    problems = []
    if not str(settings.get("bootstrap.servers", "")).strip():
        problems.append(
            ConfigProblem(
                "bootstrap.servers",
                "is required with offset.storage=kafka",
                "set bootstrap.servers to the Kafka brokers, e.g. bootstrap.servers=localhost:9092",
            )
        )
    if not str(settings.get("offset.storage.topic", "")).strip():
        problems.append(
            ConfigProblem(
                "offset.storage.topic",
                "is required with offset.storage=kafka",
                "name the compacted offsets topic, e.g. offset.storage.topic=NAME-offsets",
            )
        )
    if settings.get("offset.storage.partitions") == 0:
        problems.append(ConfigProblem("offset.storage.partitions", "must not be 0", "use 1 or more, or -1"))
    if settings.get("offset.storage.replication.factor") == 0:
        problems.append(ConfigProblem("offset.storage.replication.factor", "must not be 0", "use 1 or more, or -1"))
    return problems


def _jdbc_problems(settings: Mapping[str, Any]) -> list[ConfigProblem]:
    url = str(settings.get("offset.storage.jdbc.url", "")).strip()
    problems = []
    if not url:
        problems.append(
            ConfigProblem(
                "offset.storage.jdbc.url",
                "is required with offset.storage=jdbc",
                "set it to the database's JDBC URL, e.g. jdbc:postgresql://localhost:5432/cdc",
            )
        )
    else:
        try:
            parse_jdbc_url(url)
        except ValueError as exc:
            problems.append(
                ConfigProblem(
                    "offset.storage.jdbc.url",
                    str(exc),
                    "use jdbc:postgresql://host:port/db, jdbc:mysql://host:port/db or jdbc:mariadb://host:port/db",
                )
            )
    table = str(settings.get("offset.storage.jdbc.offset.table.name", DEFAULT_TABLE_NAME))
    if not TABLE_NAME.match(table):
        problems.append(
            ConfigProblem(
                "offset.storage.jdbc.offset.table.name",
                f"{table!r} is not a plain table name",
                "use [schema.]table with letters, digits, _ and $",
            )
        )
    return problems
