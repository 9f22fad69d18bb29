"""The offset store contract (Kafka Connect's ``OffsetBackingStore``, simplified).

Entries are keyed the way Kafka Connect keys them, ``["<engine name>", {partition}]``, so a file
or topic written here can be read by tools that understand Connect offsets, and the other way.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.records import Offset, Partition


def connect_key(engine_name: str, partition: Partition) -> str:
    """Kafka Connect's offset key: the JSON array ``[name, partition]``."""
    return orjson.dumps([engine_name, partition], option=orjson.OPT_SORT_KEYS).decode()


def encode_offset(partition: Partition, offset: Offset) -> bytes:
    """An offset as JSON bytes; OffsetError (before anything is stored) if it is not JSON."""
    try:
        return orjson.dumps(offset, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise OffsetError(f"the offset {offset!r} of partition {partition!r} is not JSON-serializable: {exc}") from exc


def encode_entries(engine_name: str, entries: Iterable[tuple[Partition, Offset]]) -> dict[str, bytes]:
    """Connect keys to JSON offsets for a write, all encoded before anything is written, so an
    entry that cannot be encoded fails the whole write and leaves the store as it was."""
    encoded: dict[str, bytes] = {}
    for partition, offset in entries:
        try:
            key = connect_key(engine_name, partition)
        except TypeError as exc:
            raise OffsetError(f"the partition {partition!r} is not JSON-serializable: {exc}") from exc
        encoded[key] = encode_offset(partition, offset)
    return encoded


def parse_connect_key(key: str) -> tuple[str, dict[str, Any]]:
    try:
        name, partition = orjson.loads(key)
    except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
        raise OffsetError(f"offset key {key!r} is not Kafka Connect's [name, partition] form") from exc
    if not isinstance(name, str) or not isinstance(partition, dict):
        raise OffsetError(f"offset key {key!r} is not Kafka Connect's [name, partition] form")
    return name, partition


class OffsetStore(abc.ABC):
    """Durable offsets of one engine. ``write`` returns only once the offsets are durable."""

    def __init__(self, engine_name: str) -> None:
        self.engine_name = engine_name

    def start(self) -> None:  # noqa: B027 - optional hook
        """Open the store (read a file, connect to a topic)."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Release what the store holds."""

    @abc.abstractmethod
    def read(self, partition: Partition) -> Offset | None:
        """The committed offset of a partition, or None if there is none."""

    @abc.abstractmethod
    def write(self, entries: Iterable[tuple[Partition, Offset]]) -> None:
        """Durably store these offsets (all or nothing)."""

    @abc.abstractmethod
    def delete(self, partition: Partition) -> None:
        """Durably remove the offset of one partition (an offset reset); no-op if it has none.
        The partition's source then starts again from its initial position."""

    @abc.abstractmethod
    def entries(self) -> list[tuple[Partition, Offset]]:
        """Every partition and offset of this engine, for inspection."""


class OffsetReader:
    """The read-only view tasks get (Kafka Connect's ``OffsetStorageReader``)."""

    def __init__(self, store: OffsetStore) -> None:
        self._store = store

    def offset(self, partition: Partition) -> Offset | None:
        return self._store.read(partition)

    def offsets(self, partitions: Iterable[Partition]) -> dict[str, Mapping[str, Any] | None]:
        return {orjson.dumps(p, option=orjson.OPT_SORT_KEYS).decode(): self._store.read(p) for p in partitions}


class CachedOffsetStore(OffsetStore):
    """A store that holds every entry of its engine in memory, loaded at start and kept in step
    by its writes: reads never touch the backing file, topic or table."""

    def __init__(self, engine_name: str) -> None:
        super().__init__(engine_name)
        self._lock = threading.Lock()
        self._data: dict[str, Offset] = {}

    def read(self, partition: Partition) -> Offset | None:
        with self._lock:
            offset = self._data.get(connect_key(self.engine_name, partition))
            return None if offset is None else dict(offset)

    def entries(self) -> list[tuple[Partition, Offset]]:
        with self._lock:
            return [(parse_connect_key(k)[1], dict(v)) for k, v in self._data.items()]
