"""Records flowing through the engine, in Kafka Connect's shape.

A :class:`SourceRecord` carries the Debezium envelope (``value``), its key, the topic, and the
source ``partition``/``offset`` pair that says where in the source it came from. ``offset`` is
the position to resume *after* this record. Offsets and partitions are JSON-primitive dicts so
they can be stored anywhere (a file, a Kafka topic, a SQL table) and read by other tools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeAlias

import orjson

from airflow_cdc.engine.immutable import immutable

Primitive: TypeAlias = str | int | float | bool | None
Partition: TypeAlias = Mapping[str, Primitive]
Offset: TypeAlias = Mapping[str, Primitive]


def partition_key(partition: Partition) -> str:
    """A canonical string for a partition (sorted-key JSON), used as a dict key and file key."""
    return orjson.dumps(partition, option=orjson.OPT_SORT_KEYS).decode()


@immutable
class SourceRecord:
    """One change event as the source produced it (or as transforms reshaped it).

    ``value`` is None for a tombstone (Kafka's delete marker for log compaction).
    """

    topic: str
    key: Any
    value: Any
    partition: Partition
    offset: Offset
    timestamp_ms: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    #: The key and value's Connect schemas (connect_schema.ConnectSchemas) when the source
    #: builds them (``*.converter.schemas.enable``); shared by every record of a table schema.
    schemas: Any = None

    def replace(self, **changes: Any) -> SourceRecord:
        return dataclasses.replace(self, **changes)

    @property
    def op(self) -> str | None:
        """The Debezium operation (``c``, ``u``, ``d``, ``r``, ``t``), if this is an envelope."""
        value = self.value
        if isinstance(value, dict):
            op = value.get("op")
            return op if isinstance(op, str) else None
        return None


@immutable
class PositionMarker(SourceRecord):
    """A position with nothing to deliver: a transaction's commit, a heartbeat, a keepalive.

    The engine tracks it like any record - so the committed offset can move past it once every
    record before it is done - but never hands it to transforms or consumers. This is how a
    source advances its offset (and, for PostgreSQL, the slot's flushed LSN) when changes were
    all filtered out or the database is idle.
    """

    @classmethod
    def at(cls, partition: Partition, offset: Offset) -> PositionMarker:
        return cls("", None, None, partition, offset)


@immutable
class SerializedRecord:
    """A record after serialization: bytes ready for a sink, plus the record they came from."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    record: SourceRecord
