"""A small disk for tests that fill it: a size-limited tmpfs mounted for one test, and a filler
file that takes whatever room is left (freed again by deleting it)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(directory: Path, size_kib: int) -> Iterator[Path]:
    """``directory`` as a tmpfs of ``size_kib``; unmounted whatever happens. Mounting needs root:
    without it the test skips, and under CI=true fails (CI runs as root)."""
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0700", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        reason = f"cannot mount a tmpfs at {directory}: {mounted.stderr.strip()} (needs root)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False, capture_output=True)


def fill(directory: Path) -> Path:
    """A file in ``directory`` that takes all the room left; delete it to free the disk."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        block = b"\0" * 4096
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(block) == 1:
                    return filler
                block = block[: len(block) // 2]  # the last bytes too
    finally:
        os.close(fd)
