"""What the demo prints while it runs: one plain line per event, stamped with the seconds since
the start, from any thread. A step names a phase; a failure inside it becomes
:class:`DemoFailed` naming the phase, so the command ends with one clear message."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import psycopg

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.local.process import ServiceError


class DemoFailed(CdcError):
    """A step of the demo failed, or its final check found the target unlike the source."""


#: What a step turns into DemoFailed: the services', the engine's, the databases' and the waits'
#: errors. Anything else is a bug and keeps its traceback.
STEP_ERRORS = (CdcError, ServiceError, psycopg.Error, TimeoutError)


class Progress:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()
        self._lock = threading.Lock()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def say(self, text: str) -> None:
        with self._lock:
            self.out.write(f"[{self.elapsed:6.1f}s] {text}\n")
            self.out.flush()

    def plain(self, text: str) -> None:
        """A line without a time stamp (the report)."""
        with self._lock:
            self.out.write(text + "\n")
            self.out.flush()

    @contextmanager
    def step(self, what: str) -> Iterator[Step]:
        """``with progress.step("starting PostgreSQL") as step: ...; step.done("on port 5432")``."""
        self.say(f"{what} ...")
        step = Step(self, time.monotonic())
        try:
            yield step
        except DemoFailed:
            raise
        except STEP_ERRORS as exc:
            raise DemoFailed(f"{what}: {exc}") from exc


class Step:
    def __init__(self, progress: Progress, started: float) -> None:
        self.progress = progress
        self.started = started

    def done(self, result: str) -> None:
        self.progress.say(f"  {result} ({time.monotonic() - self.started:.1f}s)")
