"""An exclusive hold on the apply job's Spark checkpoint for as long as the job runs.

Why: two runs of the job on one checkpoint (two DAG runs at once, or two tasks given the same
``checkpoint``) race on its offset log; the loser dies after Spark's start-up with Hadoop's
``FileAlreadyExistsException`` under a JVM trace, and which run loses is chance.

How: ``flock(2)`` on ``<checkpoint>.lock``, a file *beside* the directory, not in it: Spark owns
the directory's contents, and a user who deletes the checkpoint to start over must not delete a
lock a running job holds. The kernel drops a flock when its holder's process ends, however it
ends (``kill -9`` included), so the lock is never stale; the JSON record in the file only names
the holder for the error message of whoever finds it taken. On NFS, Linux maps flock onto NFS
byte-range locks, so workers sharing a mount exclude each other too.

Only a checkpoint on a file system has such a lock (a plain path or ``file:``). On ``hdfs://``,
``s3a://`` and the like :func:`lock_file` is None and the caller relies on the scheduler not
starting two of the task at once (the operator's ``max_active_tis_per_dag=1``).

No Airflow here: the operator fills :class:`Holder` from its task context.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from airflow_cdc.engine.errors import RetriableError

__all__ = ["CheckpointBusy", "CheckpointLock", "Holder", "lock_file"]

#: How long a contender waits for a holder to write its record: the holder writes it right after
#: taking the lock, so an empty file means "just taken", not "no holder".
_RECORD_PATIENCE = 1.0


@dataclass(frozen=True)
class Holder:
    """Who holds a checkpoint: the task instance, and the process the lock dies with."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int | None
    hostname: str
    pid: int
    started_at: str

    @classmethod
    def this_process(cls, dag_id: str, run_id: str, task_id: str, try_number: int | None) -> Holder:
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        return cls(dag_id, run_id, task_id, try_number, socket.gethostname(), os.getpid(), now)

    def describe(self) -> str:
        return (
            f"run {self.run_id!r} of DAG {self.dag_id!r} (task {self.task_id!r}, try {self.try_number}; "
            f"pid {self.pid} on {self.hostname}, since {self.started_at})"
        )


class CheckpointBusy(RetriableError):
    """Another run holds the checkpoint; retriable: that run ends, and then this one may start."""

    def __init__(self, checkpoint: str, holder: Holder | None, waited: float) -> None:
        self.checkpoint, self.holder, self.waited = checkpoint, holder, waited
        who = holder.describe() if holder is not None else "another process (its record is unreadable)"
        super().__init__(
            f"checkpoint {checkpoint} is in use by {who}, still after {waited:.0f} s: two runs of one apply "
            "must not share a checkpoint - set max_active_runs=1 on the DAG (and keep this operator's "
            "max_active_tis_per_dag=1), give each task its own checkpoint=, or raise checkpoint_lock_timeout "
            "to wait for it"
        )


def lock_file(checkpoint: str) -> Path | None:
    """The lock file of a checkpoint on a file system; None for ``hdfs://``, ``s3a://``, ...."""
    if checkpoint.startswith("file:"):
        checkpoint = "/" + checkpoint.removeprefix("file:").lstrip("/")
    elif "://" in checkpoint:
        return None
    path = Path(checkpoint).expanduser().absolute()
    return path.with_name(path.name + ".lock")


class CheckpointLock:
    """``with CheckpointLock(path, holder).acquire(timeout):`` - the job runs inside."""

    def __init__(self, path: Path, holder: Holder) -> None:
        self.path, self.holder = path, holder
        self._fd: int | None = None
        #: The record a previous holder left: it ended without releasing (killed, or its host died).
        self.previous: Holder | None = None

    def acquire(self, timeout: float = 0.0, interval: float = 0.5) -> CheckpointLock:
        """Take the lock, waiting up to ``timeout`` s for its holder to end; else CheckpointBusy."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by spark-submit
        started = time.monotonic()
        pause = threading.Event()
        while not _try_lock(fd):
            waited = time.monotonic() - started
            if waited >= timeout:
                holder = read_holder(self.path, wait=_RECORD_PATIENCE)
                os.close(fd)
                raise CheckpointBusy(str(self.path.with_name(self.path.name.removesuffix(".lock"))), holder, waited)
            pause.wait(min(interval, timeout - waited))
        self.previous = _parse(os.pread(fd, 64 << 10, 0))
        record = json.dumps(dataclasses.asdict(self.holder)).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # an empty record: nobody holds it
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> CheckpointLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_holder(path: Path, wait: float = 0.0) -> Holder | None:
    """The record in a lock file; polls up to ``wait`` s while it is empty (just taken)."""
    deadline = time.monotonic() + wait
    pause = threading.Event()
    while True:
        try:
            holder = _parse(path.read_bytes())
        except OSError:
            holder = None
        if holder is not None or time.monotonic() >= deadline:
            return holder
        pause.wait(0.02)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _parse(data: bytes) -> Holder | None:
    try:
        return Holder(**json.loads(data))
    except (ValueError, TypeError):
        return None
