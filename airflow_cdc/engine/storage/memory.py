"""Offsets kept in memory: for tests, and for pipelines that may restart from scratch."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.storage.base import CachedOffsetStore, connect_key, encode_entries


class MemoryOffsetStore(CachedOffsetStore):
    def __init__(self, engine_name: str) -> None:
        super().__init__(engine_name)
        self.writes = 0

    def write(self, entries: Iterable[tuple[Partition, Offset]]) -> None:
        encoded = encode_entries(self.engine_name, entries)  # all entries checked before any is stored
        with self._lock:
            for key, value in encoded.items():
                self._data[key] = orjson.loads(value)
            self.writes += 1

    def delete(self, partition: Partition) -> None:
        with self._lock:
            self._data.pop(connect_key(self.engine_name, partition), None)
