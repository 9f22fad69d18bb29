"""A Kafka Connect worker for tests and benchmarks: one distributed-mode worker (one JVM) with
Debezium's connectors on its plugin path, against a Kafka broker (ADR 0002).

Distributed mode, not standalone: it is what users run, and it is the mode whose REST API has
everything the scale-out backend needs (offsets, stop/resume, restarts). Its three internal topics
get a per-worker prefix, so a worker started again on the same broker starts clean.

``KafkaConnectWorker.from_env(broker)`` uses ``CDC_TEST_CONNECT_URL`` (an existing worker's REST
URL, already attached to that broker) instead of starting one.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx

from airflow_cdc.engine.connector import DEBEZIUM_CONNECTORS
from airflow_cdc.local import jvm
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.ports import port_open
from airflow_cdc.local.process import (
    LocalServer,
    ServiceError,
    wait_until,
)

ENV_VAR = "CDC_TEST_CONNECT_URL"

#: The Debezium connectors the readiness check expects on the plugin path: the registry's.
REQUIRED_PLUGINS = DEBEZIUM_CONNECTORS

_BIND_FAILED = ("Address already in use", "BindException")


class KafkaConnectWorker(LocalServer):
    """A distributed Kafka Connect worker started here, or an existing one (``from_env()``)."""

    what = "Kafka Connect worker"
    bind_failed = _BIND_FAILED
    kind, log_name, env_var = "connect", "connect.log", ENV_VAR
    #: SIGTERM: the worker stops its connectors and leaves the group.
    stop_timeout = 60.0

    def __init__(
        self,
        broker: KafkaBroker,
        *,
        startup_timeout: float = 120.0,
        external_url: str | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.broker = broker
        self.external_url = external_url.rstrip("/") if external_url else None
        self.startup_timeout = startup_timeout
        self.extra_settings = settings or {}
        self.host = "127.0.0.1"
        self.port = 0
        self.group_id = f"cdc-connect-{uuid.uuid4().hex[:8]}"
        self.directory: Path | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_env(cls, broker: KafkaBroker, **kwargs: Any) -> KafkaConnectWorker:
        """An existing worker if ``CDC_TEST_CONNECT_URL`` is set, else one started here."""
        return cls(broker, external_url=os.environ.get(ENV_VAR) or None, **kwargs)

    @property
    def external(self) -> bool:
        return bool(self.external_url)

    @property
    def url(self) -> str:
        """The REST API's base URL."""
        return self.external_url or f"http://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return self.url

    def settings(self) -> dict[str, str]:
        """The worker's properties (without its REST port)."""
        prefix = self.group_id
        return {
            "bootstrap.servers": self.broker.bootstrap_servers,
            "group.id": self.group_id,
            # Debezium's events as plain JSON: the form the compatibility oracle compares.
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "offset.storage.topic": f"{prefix}-offsets",
            "offset.storage.partitions": "1",
            "offset.storage.replication.factor": "1",
            "config.storage.topic": f"{prefix}-configs",
            "config.storage.replication.factor": "1",
            "status.storage.topic": f"{prefix}-status",
            "status.storage.partitions": "1",
            "status.storage.replication.factor": "1",
            # Tests wait for offsets; Connect's default flush is once a minute.
            "offset.flush.interval.ms": "1000",
            "plugin.path": str(jvm.plugin_path()),
            # Debezium's jars carry ServiceLoader manifests: no classpath scan (seconds at start).
            "plugin.discovery": "service_load",
            # A single worker: a departed member (our own previous run) need not be waited for.
            "scheduled.rebalance.max.delay.ms": "0",
            "rest.advertised.host.name": self.host,
            # Connectors may name secrets as ${file:/path:key}: the worker reads the file when it
            # starts the task, and its config topic keeps the reference, not the secret.
            "config.providers": "file",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            **self.extra_settings,
        }

    # --- lifecycle -------------------------------------------------------------------------

    def _check_installed(self) -> None:
        self._java, self._classpath = jvm.java(), jvm.classpath("kafka")  # JvmPartsMissing without them

    def _initialize(self) -> None:
        jvm.log4j2_properties(self.directory / "log4j2.properties")  # type: ignore[operator]

    def _check_external(self) -> None:
        wait_until(self._answers, timeout=self.startup_timeout, what=f"Kafka Connect at {self.url}")

    def _command(self) -> tuple[list[str], dict[str, Any]]:
        settings = {**self.settings(), "listeners": f"http://{self.host}:{self.port}"}
        path = self.directory / "connect-distributed.properties"  # type: ignore[operator]
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        with open(self.log_path, "ab") as log:  # type: ignore[arg-type]
            log.write(f"--- start {self.starts + 1}: port {self.port}\n".encode())
        args = [
            self._java,
            *jvm.SERVER_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.directory}/log4j2.properties",
            "-cp",
            self._classpath,
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(path),
        ]
        return args, {}

    def _answers(self) -> bool:
        if not self.external and not port_open(self.port, self.host):
            raise ConnectionRefusedError(f"nothing accepts connections on {self.url}")
        # The REST server answers before the worker has joined its group; GET /connectors
        # succeeds only once the herder is ready.
        with httpx.Client(base_url=self.url, timeout=5) as http:
            http.get("/connectors").raise_for_status()
            plugins = {p["class"] for p in http.get("/connector-plugins").raise_for_status().json()}
        missing = [name for name in REQUIRED_PLUGINS if name not in plugins]
        if missing:
            raise ServiceError(f"{self.url} has no {', '.join(missing)} on its plugin path")
        return True
