"""Offset stores, chosen by ``offset.storage``: ``build_offset_store`` is the one place that
turns the configuration into a store.

| offset.storage | store | library |
| --- | --- | --- |
| ``file`` (default) | :class:`FileOffsetStore`, a JSON file replaced atomically | - |
| ``memory`` | :class:`MemoryOffsetStore` | - |
| ``kafka`` | ``KafkaOffsetStore``, a compacted topic (Kafka Connect's) | kafka-python |
| ``jdbc`` | ``JdbcOffsetStore``, Debezium's offsets table | psycopg 3, PyMySQL |

The Kafka and JDBC stores are imported only when chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.storage.base import OffsetReader, OffsetStore, connect_key
from airflow_cdc.engine.storage.config import (
    KEY_ALIASES,
    OFFSET_STORAGE_ALIASES,
    OFFSET_STORAGE_CONFIG,
    offset_store_problems,
    resolve_key_aliases,
)
from airflow_cdc.engine.storage.file import FileOffsetStore
from airflow_cdc.engine.storage.memory import MemoryOffsetStore


def build_offset_store(engine_name: str, settings: Mapping[str, Any]) -> OffsetStore:
    """The store ``settings`` (values parsed by OFFSET_STORAGE_CONFIG, as in ``Engine.settings``)
    choose, not started. ``offset_store_problems(settings)`` must be empty."""
    kind = settings["offset.storage"]
    if kind == "memory":
        return MemoryOffsetStore(engine_name)
    if kind == "kafka":
        from airflow_cdc.engine.kafka_settings import security_settings
        from airflow_cdc.engine.storage.kafka import KafkaOffsetStore

        return KafkaOffsetStore(
            engine_name,
            bootstrap_servers=settings["bootstrap.servers"],
            security=security_settings(settings),
            topic=settings["offset.storage.topic"],
            partitions=settings["offset.storage.partitions"],
            replication_factor=settings["offset.storage.replication.factor"],
            flush_timeout_ms=settings["offset.flush.timeout.ms"],
            request_timeout_ms=settings["request.timeout.ms"],
        )
    if kind == "jdbc":
        from airflow_cdc.engine.storage.jdbc import JdbcOffsetStore

        return JdbcOffsetStore(
            engine_name,
            url=settings["offset.storage.jdbc.url"],
            user=settings["offset.storage.jdbc.user"],
            password=settings["offset.storage.jdbc.password"],
            table=settings["offset.storage.jdbc.offset.table.name"],
            retry_delay_ms=settings["offset.storage.jdbc.connection.wait.retry.delay.ms"],
            max_attempts=settings["offset.storage.jdbc.connection.retry.max.attempts"],
        )
    return FileOffsetStore(engine_name, settings["offset.storage.file.filename"])


__all__ = [
    "KEY_ALIASES",
    "OFFSET_STORAGE_ALIASES",
    "OFFSET_STORAGE_CONFIG",
    "FileOffsetStore",
    "MemoryOffsetStore",
    "OffsetReader",
    "OffsetStore",
    "build_offset_store",
    "connect_key",
    "offset_store_problems",
    "resolve_key_aliases",
]
