"""Offsets in a local JSON file, replaced atomically (the default ``offset.storage``).

Each write produces a complete new file: write a temporary file in the same directory, fsync
it, rename it over the old one, fsync the directory. A reader, or a process restarted after
``kill -9``, sees either the old offsets or the new ones, never a torn file.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.storage.base import OffsetStore, connect_key, parse_connect_key


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class FileOffsetStore(OffsetStore):
    """``offset.storage.file.filename``: a JSON object of Connect keys to offsets."""

    def __init__(self, engine_name: str, path: str | os.PathLike[str]) -> None:
        super().__init__(engine_name)
        self.path = Path(path)
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._data = {}
            return
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise OffsetError(
                f"offset file {self.path} is not valid JSON ({exc}); restore it from a backup, "
                "or remove it to start from the connector's initial position"
            ) from exc
        if not isinstance(data, dict):
            raise OffsetError(f"offset file {self.path} must hold a JSON object, found {type(data).__name__}")
        self._data = data

    def read(self, partition: Partition) -> Offset | None:
        with self._lock:
            offset = self._data.get(connect_key(self.engine_name, partition))
            return None if offset is None else dict(offset)

    def write(self, entries: Iterable[tuple[Partition, Offset]]) -> None:
        with self._lock:
            data = dict(self._data)
            for partition, offset in entries:
                data[connect_key(self.engine_name, partition)] = dict(offset)
            atomic_write(self.path, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
            self._data = data

    def entries(self) -> list[tuple[Partition, Offset]]:
        with self._lock:
            result: list[tuple[Partition, Offset]] = []
            for key, offset in self._data.items():
                name, partition = parse_connect_key(key)
                if name == self.engine_name:
                    result.append((partition, dict(offset)))
            return result
