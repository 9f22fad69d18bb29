"""Run an engine on a background thread and look at its running tasks (seed 000's
``runWithTask``). Meant for tests, notebooks and benchmarks; production code calls ``run()``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from airflow_cdc.engine.connector import SourceTask
from airflow_cdc.engine.engine import Engine
from airflow_cdc.engine.state import EngineState

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, message: str = "condition", interval: float = 0.005) -> T:
    """Poll ``condition`` until it returns something truthy; TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{message} not reached within {timeout}s")
        pause.wait(interval)


class EngineRunner:
    """``with EngineRunner(engine) as runner:`` runs the engine until the block ends."""

    def __init__(self, engine: Engine, *, start_timeout: float = 30.0) -> None:
        self.engine = engine
        self.error: BaseException | None = None
        self._start_timeout = start_timeout
        self._thread = threading.Thread(target=self._run, name=f"engine-runner-{engine.name}", daemon=True)

    def _run(self) -> None:
        try:
            self.engine.run()
        except BaseException as exc:
            self.error = exc

    def start(self) -> EngineRunner:
        self._thread.start()
        wait_until(
            lambda: self.engine.state in (EngineState.POLLING_TASKS, EngineState.STOPPED),
            self._start_timeout,
            f"engine {self.engine.name!r} polling",
        )
        return self

    def task(self, index: int = 0) -> SourceTask:
        """The running task instance (for tests that drive or inspect the source)."""
        return self.engine.tasks[index].task

    def stop(self, timeout: float = 30.0) -> None:
        self.engine.close(timeout)
        self._thread.join(timeout)

    def join(self, timeout: float) -> None:
        """Wait for the engine to stop by itself (after an error); TimeoutError otherwise."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"engine {self.engine.name!r} still running after {timeout}s")

    def __enter__(self) -> EngineRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_with_task(engine: Engine, action: Callable[[SourceTask], T], *, timeout: float = 30.0) -> T:
    """Start ``engine``, call ``action`` with its first running task, then stop the engine."""
    with EngineRunner(engine, start_timeout=timeout) as runner:
        return action(runner.task())
