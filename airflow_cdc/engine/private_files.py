"""Files and directories that hold captured rows, created readable by their owner only.

Offsets carry key values (an incremental snapshot's last key, a MySQL row's position), the
changelog carries whole rows, and the state directory holds both: they are created ``0600``
(files) and ``0700`` (directories). The mode is given to ``open``/``mkdir``, so the process's
umask can only take more away (``077`` changes nothing, ``277`` leaves a file read-only), never
add: a ``022`` or ``002`` umask no longer makes captured rows readable by every local user.

A directory that already exists keeps its mode: an operator who made one group-readable (a
reader running as another user) chose that.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` and every missing parent, created ``0700`` (``Path.mkdir(parents=True)`` would
    create the parents with the umask's default, ``0755``, which a reader can walk)."""
    directory = Path(path)
    for parent in reversed([p for p in directory.parents if not p.exists()]):
        parent.mkdir(mode=PRIVATE_DIR, exist_ok=True)  # exist_ok: another process may race us
    directory.mkdir(mode=PRIVATE_DIR, exist_ok=True)
    return directory


def open_private(path: str | os.PathLike[str], flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """``os.open`` of a file that is created ``0600`` (an existing file keeps its mode)."""
    return os.open(path, flags, PRIVATE_FILE)
