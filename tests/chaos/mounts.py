"""Small tmpfs file systems for the faults that need a real disk to go wrong: full (ENOSPC), or
read-only (EROFS, as after a remount on I/O errors). Mounting needs root; without it the scenario
skips on a developer's machine and fails under CI=true."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.requirements import in_ci


class Tmpfs:
    def __init__(self, path: Path, size_kb: int) -> None:
        self.path, self.size_kb = path, size_kb
        self.ballast = path / "ballast"
        self.mounted = False

    def _mount(self, *options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["mount", *options], capture_output=True, text=True, timeout=30)

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        done = self._mount("-t", "tmpfs", "-o", f"size={self.size_kb}k,mode=0700", "tmpfs", str(self.path))
        if done.returncode != 0:
            message = f"cannot mount a tmpfs on {self.path} (needs root): {done.stderr.strip()}"
            if in_ci():
                pytest.fail(message, pytrace=False)
            pytest.skip(message)
        self.mounted = True

    def unmount(self) -> None:
        if self.mounted:
            # Lazily: a process killed mid-write may still hold a file here for a moment.
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=30, check=True)
            self.mounted = False

    def read_only(self, on: bool) -> None:
        done = self._mount("-o", f"remount,{'ro' if on else 'rw'}", str(self.path))
        assert done.returncode == 0, done.stderr

    def fill(self, leave: int = 0) -> int:
        """Write a ballast file until the file system refuses (ENOSPC), then give ``leave``
        bytes back (whole pages); the ballast's size. Big blocks first, then pages: tmpfs hands
        out whole pages, so none is left."""
        written = 0
        with open(self.ballast, "wb", buffering=0) as file:
            for size in (1 << 16, 1 << 12):
                block = b"\0" * size
                try:
                    while True:
                        written += file.write(block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        os.truncate(self.ballast, written - leave)
        return written - leave

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.ballast)


@contextlib.contextmanager
def mounted(path: Path, size_kb: int) -> Iterator[Tmpfs]:
    """A tmpfs on ``path``, always unmounted afterwards; after a failure its files are kept in
    ``<path>.kept`` first (the evidence of what the engine wrote)."""
    fs = Tmpfs(path, size_kb)
    fs.mount()
    try:
        yield fs
    except BaseException:
        fs.free()
        shutil.copytree(path, path.with_name(f"{path.name}.kept"), dirs_exist_ok=True)
        raise
    finally:
        fs.unmount()
