"""Offsets in a local JSON file, replaced atomically (the default ``offset.storage``).

Each write produces a complete new file: write a temporary file in the same directory, fsync
it, rename it over the old one, fsync the directory. A reader, or a process restarted after
``kill -9``, sees either the old offsets or the new ones, never a torn file. The file and a
directory made for it are private to the engine's user (``private_files``): offsets carry key values.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from airflow_cdc.engine.errors import OffsetError, RetriableError
from airflow_cdc.engine.private_files import open_private, private_dir
from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.storage.base import OffsetStore, connect_key, encode_entries, parse_connect_key


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = open_private(tmp)  # 0600: the renamed file is the offsets file
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


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive ``flock`` on a directory (released when the descriptor is closed)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class FileOffsetStore(OffsetStore):
    """``offset.storage.file.filename``: a JSON object of Connect keys to offsets."""

    def __init__(self, engine_name: str, path: str | os.PathLike[str]) -> None:
        super().__init__(engine_name)
        self.path = Path(path)
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}

    def start(self) -> None:
        private_dir(self.path.parent)
        with self._lock:
            self._data = self._load()

    def _load(self) -> dict[str, Any]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise OffsetError(
                f"offset file {self.path} is not valid JSON ({exc}); restore it from a backup, "
                "or remove it to start from the connector's initial position"
            ) from exc
        if not isinstance(data, dict):
            raise OffsetError(f"offset file {self.path} must hold a JSON object, found {type(data).__name__}")
        return data

    def read(self, partition: Partition) -> Offset | None:
        with self._lock:
            offset = self._data.get(connect_key(self.engine_name, partition))
            return None if offset is None else dict(offset)

    def write(self, entries: Iterable[tuple[Partition, Offset]]) -> None:
        encoded = encode_entries(self.engine_name, entries)  # all entries checked before the file changes
        with self._lock:
            try:
                self._replace({key: orjson.loads(value) for key, value in encoded.items()}, drop=None)
            except OSError as exc:
                # A full disk or a file system gone for a while: the file is replaced atomically,
                # so the old offsets are intact and the next commit writes the newer ones.
                raise RetriableError(f"writing the offset file {self.path} failed: {exc}") from exc

    def delete(self, partition: Partition) -> None:
        with self._lock:
            self._replace({}, drop=connect_key(self.engine_name, partition))

    def _replace(self, changes: dict[str, Any], drop: str | None) -> None:
        """Write the file anew: this engine's offsets from memory with ``changes`` applied, other
        engines' as the file holds them now. Under an exclusive lock on the directory, so engines
        sharing one file (in this process or another) never write back each other's old offsets."""
        with _locked(self.path.parent):
            current = self._load()
            data = {key: value for key, value in current.items() if not self._ours(key)}
            data.update((key, value) for key, value in self._data.items() if self._ours(key))
            data.update(changes)
            if drop is not None:
                if drop not in data and drop not in current:
                    return
                data.pop(drop, None)
            atomic_write(self.path, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        self._data = data

    def _ours(self, key: str) -> bool:
        try:
            return parse_connect_key(key)[0] == self.engine_name
        except OffsetError:
            return False

    def entries(self) -> list[tuple[Partition, Offset]]:
        with self._lock:
            result: list[tuple[Partition, Offset]] = []
            for key, offset in self._data.items():
                name, partition = parse_connect_key(key)
                if name == self.engine_name:
                    result.append((partition, dict(offset)))
            return result
