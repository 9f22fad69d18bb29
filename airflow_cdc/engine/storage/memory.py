"""Offsets kept in memory: for tests, and for pipelines that may restart from scratch."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import orjson

from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.storage.base import OffsetStore, connect_key, encode_entries, parse_connect_key


class MemoryOffsetStore(OffsetStore):
    def __init__(self, engine_name: str) -> None:
        super().__init__(engine_name)
        self._lock = threading.Lock()
        self._data: dict[str, Offset] = {}
        self.writes = 0

    def read(self, partition: Partition) -> Offset | None:
        with self._lock:
            offset = self._data.get(connect_key(self.engine_name, partition))
            return None if offset is None else dict(offset)

    def write(self, entries: Iterable[tuple[Partition, Offset]]) -> None:
        encoded = encode_entries(self.engine_name, entries)  # all entries checked before any is stored
        with self._lock:
            for key, value in encoded.items():
                self._data[key] = orjson.loads(value)
            self.writes += 1

    def delete(self, partition: Partition) -> None:
        with self._lock:
            self._data.pop(connect_key(self.engine_name, partition), None)

    def entries(self) -> list[tuple[Partition, Offset]]:
        with self._lock:
            return [(parse_connect_key(k)[1], dict(v)) for k, v in self._data.items()]
