"""An engine instance: one named engine, its sink and its control API, run as one process (its
files and settings: ``instance_files.py``).

Two ways to run it:

* ``airflow-cdc engine run`` (and ``engine start``, the same detached): the engine runs once;
  the process ends when it is stopped (SIGTERM, ``POST /stop``) or fails.
* ``airflow-cdc engine serve``: the engine as a service, under a supervisor (a container, a
  Kubernetes Deployment, systemd). The process and its API stay up; ``POST /stop`` stops the
  engine (drain, commit, release the source's slots) and ``POST /start`` starts it again,
  with the configuration a DAG asks for laid over the file's (kept in
  ``<state.dir>/service-state.yaml`` for the next boot, with whether it was started or stopped:
  the target state, which a reboot restores, as Kafka Connect restores a connector's); while it
  is stopped its offsets can be changed through the API, as Kafka Connect allows for a stopped
  connector (KIP-875). SIGTERM stops the engine and the process. ``--stopped`` is the initial
  target state (Connect's KIP-980): it boots stopped unless a start was kept.

Every run of the engine has an id (``run_id`` in the status, the notification bus's).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from airflow_cdc.engine.engine import Engine
from airflow_cdc.engine.errors import CdcError, RefusedError
from airflow_cdc.engine.positions import codec_for
from airflow_cdc.engine.private_files import open_private, private_dir
from airflow_cdc.engine.server.engine_run import EngineRun
from airflow_cdc.engine.server.instance_files import (
    STATUS,
    _locked,
    api_tls,
    ensure_api_token,
    read_status,
    validated,
)
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, TaskStatus
from airflow_cdc.engine.server.status import instance_health, instance_position, stopped_position
from airflow_cdc.engine.sinks import Sink
from airflow_cdc.engine.storage import OffsetStore, build_offset_store
from airflow_cdc.engine.validation import ValidatedConfig

log = logging.getLogger(__name__)

#: A serving instance's configuration from POST /start, laid over the file's at the next boot too.
SERVICE_STATE = "service-state.yaml"


class NotRunningError(RefusedError):
    """The engine is not running (a serving instance, stopped)."""


class EngineInstance:
    """Runs until stopped (SIGTERM, SIGINT, ``POST /stop``) or until the engine fails; serving
    (``serve=True``), until SIGTERM, the engine started and stopped through the API."""

    def __init__(self, props: Mapping[str, Any], *, serve: bool = False, start_stopped: bool = False) -> None:
        self.props = dict(props)
        self.serve = serve
        kept = _kept_service_state(props) if serve else {}
        #: What the last POST /start laid over the file's configuration (a serving instance's).
        self.overrides: dict[str, Any] = dict(kept.get("config") or {})
        if kept.get("target") in ("STARTED", "STOPPED"):  # the kept target state wins over --stopped
            start_stopped = kept["target"] == "STOPPED"
        self.config: ValidatedConfig = validated({**props, **self.overrides})
        self.settings = dict(self.config.config)
        self.directory = Path(self.settings["state.dir"])
        self.instance_settings = self.config.components["instance"]
        self.name = self.config.name
        self.positions = codec_for(self.settings)
        self.stop_requested = threading.Event()  # the process
        self._engine_stop = threading.Event()  # a serving instance's engine
        self._lock = threading.Lock()  # one start or stop at a time
        self.started_at = time.time()
        self.api_url: str | None = None
        self.token = ""
        self.current: EngineRun | None = None if start_stopped else EngineRun(self.config, self.directory)
        self._last_written: str | None = None

    # -- what the API asks ------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The engine of the current (or last) run; NotRunningError before the first."""
        if self.current is None:
            raise NotRunningError(f"instance {self.name!r} is stopped: start it (POST /start)")
        return self.current.engine

    @property
    def running(self) -> bool:
        return self.current is not None and self.current.alive

    @property
    def run_id(self) -> str:
        return self.current.run_id if self.current is not None else ""

    @property
    def sink(self) -> Sink:
        if self.current is None:
            raise NotRunningError(f"instance {self.name!r} is stopped: start it (POST /start)")
        return self.current.sink

    def request_stop(self) -> None:
        """Stop the engine; the process too unless it serves."""
        if self.serve:
            with self._lock:
                _write_service_state(self.directory, "STOPPED", self.overrides)
                self._engine_stop.set()
        else:
            self.stop_requested.set()

    def request_start(self, overrides: Mapping[str, Any] | None = None) -> str:
        """A serving instance's engine started with ``overrides`` laid over the file's
        configuration (None: those of the last start): ``"STARTING"``, or ``"RUNNING"`` when it
        runs with that configuration already (RefusedError naming the keys when it runs with
        another)."""
        if not self.serve:
            raise RefusedError(
                f"instance {self.name!r} runs once (engine run): start it with `airflow-cdc engine start`"
            )
        with self._lock:
            wanted = dict(self.overrides if overrides is None else overrides)
            if self.running:
                differences = self._differences(wanted)
                if differences:
                    raise RefusedError(
                        f"instance {self.name!r} runs with another configuration ({'; '.join(differences)}): "
                        "stop it first (POST /stop) to start it with this one"
                    )
                return "RUNNING"
            config = validated({**self.props, **wanted})
            _write_service_state(self.directory, "STARTED", wanted)
            self.config, self.settings, self.overrides = config, dict(config.config), wanted
            self._engine_stop.clear()
            self.current = EngineRun(config, self.directory)
            self.current.start()
            return "STARTING"

    def _differences(self, wanted: Mapping[str, Any]) -> list[str]:
        running = validated({**self.props, **wanted}).config
        return [
            f"{key}: running {self.settings.get(key)!r}, asked {running.get(key)!r}"
            for key in sorted(set(running) | set(self.settings))
            if str(running.get(key)) != str(self.settings.get(key)) and "password" not in key
        ]

    def stopped_store(self) -> OffsetStore:
        """The offset store, while a serving instance's engine is stopped (RefusedError while it
        runs: offsets changed under a running engine would be overwritten at its next commit)."""
        if self.running:
            raise RefusedError(
                f"instance {self.name!r} is running: stop it first (POST /stop, or PUT /connectors/{self.name}/stop)"
            )
        return build_offset_store(self.name, self.config.engine)

    # -- running ----------------------------------------------------------------------------
    def run(self) -> int:
        """Run in the foreground; 0 after a requested stop, 1 if the engine failed."""
        private_dir(self.directory)  # it holds offsets and captured rows: 0700
        try:
            with _locked(self.directory, blocking=False):
                return self._run_locked()
        except BlockingIOError:
            running = read_status(self.directory) or {}
            raise CdcError(
                f"instance {self.name!r} is already running (pid {running.get('pid')}) in {self.directory}"
            ) from None

    def _run_locked(self) -> int:
        from airflow_cdc.engine.server.api_server import ControlApi

        self._install_signal_handlers()
        api = None
        if self.instance_settings["api.enabled"]:
            self.token = ensure_api_token(self.settings)
            settings = self.instance_settings
            api = ControlApi(self, settings["api.host"], settings["api.port"], self.token, api_tls(settings))
            self.api_url = api.start()
        self._write_status()
        try:
            if self.current is not None:
                self.current.start()
            self._supervise()
        finally:
            if self.current is not None:
                self.current.stop()
            self._write_status()
            if api is not None:
                api.stop()
        return 0 if self.current is None or self.current.error is None else 1

    def _supervise(self) -> None:
        """Until the process is to stop: keep the status file current, stop the engine when
        asked; a run that ends ends the process unless it serves."""
        while not self.stop_requested.wait(0.2):
            if self.serve and self._engine_stop.is_set() and self.current is not None:
                with self._lock:
                    self.current.stop()
                    self._engine_stop.clear()
            self._write_status()
            if not self.serve and (self.current is None or not self.current.alive):
                return

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop_requested.set())
        # `engine stop` asks a stop that hangs where its threads are before it kills it.
        faulthandler.register(signal.SIGUSR1, all_threads=True)

    # -- status -----------------------------------------------------------------------------
    def status_model(self) -> InstanceStatus:
        current = self.current
        common: dict[str, Any] = {
            "name": self.name,
            "pid": os.getpid(),
            "connector_class": self.settings.get("connector.class"),
            "api": self.api_url,
            "state_dir": str(self.directory),
        }
        if current is None:
            return InstanceStatus(
                run_id="",
                state="STOPPED",
                phase="stopped",
                started_at=self.started_at,
                uptime_s=round(time.time() - self.started_at, 3),
                sink={"type": str(self.settings.get("sink.type") or "")},
                position=stopped_position(),
                **common,
            )
        engine = current.engine.status()
        position = self.position()
        error = current.error
        health = instance_health(current.engine, current.sink, error)
        sink_retry = current.sink.retrying.current()
        return InstanceStatus(
            run_id=current.run_id,
            state=engine["state"],
            phase="failed" if error else position.phase,
            paused=engine["paused"],
            started_at=current.started_at,
            uptime_s=round(time.time() - current.started_at, 3),
            tasks=tuple(TaskStatus.from_json(task) for task in engine["tasks"]),
            sink={
                "type": current.sink.type,
                **current.sink.metrics(),
                "topic_ends": current.sink.topic_ends(),
                "retrying": None if sink_retry is None else sink_retry.to_json(),
            },
            error=error,
            position=position,
            health=health.health,
            cause=health.cause,
            **common,
        )

    def status(self) -> dict[str, Any]:
        return self.status_model().to_json()

    def position(self, target: str | None = None) -> InstancePosition:
        """Phase and positions; with ``target`` (OffsetError if it is not a position of this
        source) whether every task's committed offset has reached it."""
        if self.current is None:
            return stopped_position()
        return instance_position(self.current.engine, self.positions, target)

    def offsets(self) -> list[OffsetEntry]:
        if self.current is not None and self.current.alive:
            return [OffsetEntry(p, o) for p, o in self.current.engine.offset_store.entries()]
        store = build_offset_store(self.name, self.config.engine)
        store.start()
        try:
            return [OffsetEntry(p, o) for p, o in store.entries()]
        finally:
            store.stop()

    def _write_status(self) -> None:
        status = self.status()
        status.pop("uptime_s")
        data = orjson.dumps(status, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        if data.decode() == self._last_written:
            return
        temp = self.directory / f".{STATUS}.tmp"
        with os.fdopen(open_private(temp), "wb") as file:
            file.write(data)
        os.replace(temp, self.directory / STATUS)
        self._last_written = data.decode()


def _kept_service_state(props: Mapping[str, Any]) -> dict[str, Any]:
    """``{"target": "STARTED" | "STOPPED", "config": {...}}``: a serving instance boots as it was
    last left, with the configuration it was last started with."""
    directory = Path(validated(props).config["state.dir"])
    try:
        kept = yaml.safe_load((directory / SERVICE_STATE).read_text()) or {}
    except FileNotFoundError:
        return {}
    return dict(kept) if isinstance(kept, dict) else {}


def _write_service_state(directory: Path, target: str, overrides: Mapping[str, Any]) -> None:
    private_dir(directory)
    temp = directory / f".{SERVICE_STATE}.tmp"
    with os.fdopen(open_private(temp), "w") as file:
        file.write(yaml.safe_dump({"target": target, "config": dict(overrides)}, sort_keys=True))
    os.replace(temp, directory / SERVICE_STATE)
