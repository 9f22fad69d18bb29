"""One run of an instance's engine: the engine and its sink, built from a validated configuration,
run on their own thread until stopped or failed. An instance process has one run
(``airflow-cdc engine run``) or, serving (``airflow-cdc engine serve``), one after another."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from airflow_cdc.engine.engine import Engine
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.serialization import JsonSerializer
from airflow_cdc.engine.server.instance_files import NOTIFICATIONS
from airflow_cdc.engine.sinks import Sink, build_sink
from airflow_cdc.engine.validation import ValidatedConfig

log = logging.getLogger(__name__)


class EngineRun:
    def __init__(self, config: ValidatedConfig, directory: Path) -> None:
        self.config = config
        self.name = config.name
        self.sink: Sink = build_sink(dict(config.config))
        self.engine = Engine(config, batch_handler=self.sink, serializer=JsonSerializer.from_config(config.config))
        self.run_id = self.engine.notifications.run_id
        self.started_at = time.time()
        self.start_error: CdcError | None = None
        self._directory = directory
        self._thread = threading.Thread(target=self._run, name=f"engine-{self.name}")

    def start(self) -> None:
        """The sink, then the engine on its thread; a sink that cannot start is the run's error."""
        self.engine.notifications.persist(self._directory / NOTIFICATIONS)
        try:
            self.sink.start()
        except CdcError as exc:
            log.error("instance %r: %s", self.name, exc)
            self.start_error = exc
            return
        self._thread.start()

    def _run(self) -> None:
        try:
            self.engine.run()
        except Exception as exc:  # the engine records it; run() re-raises for embedders
            log.error("instance %r: engine failed: %s", self.name, exc)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def error(self) -> str | None:
        if self.engine.error is not None:
            return str(self.engine.error)
        return None if self.start_error is None else str(self.start_error)

    def stop(self) -> None:
        """Drain, commit, release the source's slots, close the sink; waits for all of it."""
        timeout = self.engine.settings["task.management.timeout.ms"] / 1000
        try:
            self.engine.close(timeout)
        except TimeoutError as exc:
            log.error("instance %r: %s", self.name, exc)
        if self._thread.ident is not None:
            self._thread.join(timeout)
        try:
            self.sink.close()
        except Exception as exc:
            log.error("instance %r: closing the sink failed: %s", self.name, exc)
        self.engine.notifications.close()
