"""An Apache Kafka broker for tests, the demo and the benchmarks: Kafka 4 in KRaft mode (broker
and controller in one JVM) on free loopback ports, with a data directory (ADR 0002).

``stop()`` and ``start()`` may be called mid-test (broker-outage tests): the broker comes back
on the same ports with its log, topics and committed offsets. ``close()`` stops it and deletes
its directory.

``KafkaBroker.from_env()`` uses ``CDC_TEST_KAFKA_BOOTSTRAP`` (an existing Kafka) instead;
stopping and restarting it is then unsupported (``restartable`` is false, ``stop()`` raises).

``KafkaBroker(sasl_ssl=SaslSsl(directory))`` also listens with SASL_SSL, as production brokers
do: SCRAM-SHA-512 logins (the user is created when the log directory is formatted) over TLS with
a certificate from a throwaway CA (``airflow_cdc.local.tls``), given to the JVM as PEM files
(Kafka 4 reads PEM key and trust stores). The PLAINTEXT listener stays, for the broker's own
traffic and the readiness check; clients under test use ``secure_bootstrap_servers`` and
``client_security()``.

The jars come from ``scripts/setup`` (``airflow_cdc.local.jvm``).
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from airflow_cdc.local import jvm
from airflow_cdc.local.ports import free_port, port_open
from airflow_cdc.local.process import (
    LocalServer,
    ServiceError,
    stop_process,
    wait_until,
)

ENV_VAR = "CDC_TEST_KAFKA_BOOTSTRAP"

#: Broker settings for one node; ports, directories and ids are added per start.
SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    # One node: every internal topic has one replica.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # A consumer group forms as soon as its first member joins (the default waits 3 s).
    "group.initial.rebalance.delay.ms": "0",
    # Tests create hundreds of small topics; small segments keep the data directory small.
    "log.segment.bytes": str(16 * 1024 * 1024),
    "log.retention.check.interval.ms": "300000",
}

_BIND_FAILED = ("Address already in use", "BindException")
SASL_MECHANISM = "SCRAM-SHA-512"


@dataclass
class SaslSsl:
    """A SASL_SSL listener: its CA, certificate and one SCRAM user, made in ``directory``."""

    directory: Path
    username: str = "cdc"
    password: str = field(default_factory=lambda: uuid.uuid4().hex)
    port: int = 0
    ca: Path = field(init=False)
    keystore: Path = field(init=False)

    def __post_init__(self) -> None:
        from airflow_cdc.local.tls import CertificateAuthority

        authority = CertificateAuthority(self.directory, "airflow-cdc test Kafka CA")
        issued = authority.issue("kafka", hosts=["127.0.0.1", "localhost"])
        self.ca = authority.cert
        # Kafka's PEM keystore file: the private key (unencrypted PKCS#8) and its certificate.
        self.keystore = self.directory / "kafka.keystore.pem"
        self.keystore.write_bytes(issued.key.read_bytes() + issued.cert.read_bytes())
        self.keystore.chmod(0o600)

    def broker_settings(self) -> dict[str, str]:
        return {
            "sasl.enabled.mechanisms": SASL_MECHANISM,
            f"listener.name.sasl_ssl.{SASL_MECHANISM.lower()}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.location": str(self.keystore),
            "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
            "listener.name.sasl_ssl.ssl.truststore.location": str(self.ca),
        }

    def client_security(self) -> dict[str, str]:
        """A client's settings (librdkafka/Java names, as the engine's configuration takes them)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SASL_MECHANISM,
            "sasl.username": self.username,
            "sasl.password": self.password,
            "ssl.ca.location": str(self.ca),
        }


def cluster_id() -> str:
    """A Kafka cluster id: a random UUID in Kafka's URL-safe base64 form, never starting with
    ``-`` (kafka-storage's argument parser would take it for an option; Kafka's own random
    ids skip those too)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaBroker(LocalServer):
    """An Apache Kafka broker started here, or an existing Kafka (``from_env()``)."""

    what = "Kafka broker"
    bind_failed = _BIND_FAILED
    kind, log_name, env_var = "kafka", "kafka.log", ENV_VAR
    #: SIGTERM: a controlled shutdown that flushes the log.
    stop_timeout = 60.0

    def __init__(
        self,
        *,
        startup_timeout: float = 90.0,
        external_bootstrap: str | None = None,
        settings: dict[str, str] | None = None,
        sasl_ssl: SaslSsl | None = None,
    ) -> None:
        self.external_bootstrap = external_bootstrap
        self.sasl_ssl = sasl_ssl
        self.startup_timeout = startup_timeout
        self.settings = {**SETTINGS, **(settings or {})}
        self.host = "127.0.0.1"
        self.port = 0
        self.controller_port = 0
        if external_bootstrap:
            first = external_bootstrap.split(",")[0].strip()
            host, _, port = first.rpartition(":")
            self.host, self.port = (host or first), int(port or 9092)
        self.directory: Path | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_env(cls, **kwargs: Any) -> KafkaBroker:
        """An existing Kafka if ``CDC_TEST_KAFKA_BOOTSTRAP`` is set, else one started here."""
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

    @property
    def secure_bootstrap_servers(self) -> str:
        """The SASL_SSL listener's address (``sasl_ssl`` brokers only)."""
        if self.sasl_ssl is None:
            raise ServiceError("this broker has no SASL_SSL listener: start it with sasl_ssl=SaslSsl(...)")
        return f"{self.host}:{self.sasl_ssl.port}"

    def client_security(self) -> dict[str, str]:
        """``bootstrap.servers`` of the SASL_SSL listener and the client settings that log in there."""
        if self.sasl_ssl is None:
            raise ServiceError("this broker has no SASL_SSL listener: start it with sasl_ssl=SaslSsl(...)")
        return {"bootstrap.servers": self.secure_bootstrap_servers, **self.sasl_ssl.client_security()}

    def admin(self, **kwargs: Any) -> KafkaAdminClient:
        """A ``KafkaAdminClient`` for this broker (close it)."""
        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **kwargs)

    # --- lifecycle -------------------------------------------------------------------------

    def _check_installed(self) -> None:
        self._java, self._classpath = jvm.java(), jvm.classpath("kafka")  # JvmPartsMissing without them

    def _initialize(self) -> None:
        jvm.log4j2_properties(self.directory / "log4j2.properties")  # type: ignore[operator]
        self._format(self._java, self._classpath)

    def _check_external(self) -> None:
        wait_until(self._answers, timeout=self.startup_timeout, what=f"Kafka at {self.bootstrap_servers}")

    def _jvm(self, java: str, classpath: str) -> list[str]:
        return [
            java,
            *jvm.SERVER_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.directory}/log4j2.properties",
            f"-Dkafka.logs.dir={self.directory}/logs",
            "-cp",
            classpath,
        ]

    def _format(self, java: str, classpath: str) -> None:
        """``kafka-storage format``: a KRaft log directory needs a cluster id before the first start.
        The ports are not part of it, so a restart may use the same directory with any ports."""
        config = self._write_config(port=1, controller_port=2)  # placeholders: format reads only ids and dirs
        args = [*self._jvm(java, classpath), "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(config)]
        if self.sasl_ssl is not None:  # KRaft keeps SCRAM users in its metadata log, made here
            user = self.sasl_ssl
            args += ["--add-scram", f"{SASL_MECHANISM}=[name={user.username},password={user.password}]"]
        done = subprocess.run(args, capture_output=True, text=True, cwd=self.directory, timeout=120)
        if done.returncode != 0:
            raise ServiceError(f"kafka-storage format failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def _write_config(self, *, port: int, controller_port: int) -> Path:
        listeners, advertised = f"PLAINTEXT://{self.host}:{port}", f"PLAINTEXT://{self.host}:{port}"
        extra: dict[str, str] = {}
        if self.sasl_ssl is not None:
            secure = f"SASL_SSL://{self.host}:{self.sasl_ssl.port or 3}"
            listeners, advertised = f"{listeners},{secure}", f"{advertised},{secure}"
            protocols = f"{self.settings['listener.security.protocol.map']},SASL_SSL:SASL_SSL"
            extra = {**self.sasl_ssl.broker_settings(), "listener.security.protocol.map": protocols}
        settings = {
            **self.settings,
            **extra,
            "listeners": f"{listeners},CONTROLLER://{self.host}:{controller_port}",
            "advertised.listeners": advertised,
            "controller.quorum.voters": f"{self.settings['node.id']}@{self.host}:{controller_port}",
            "log.dirs": str(self.data_dir),
        }
        path = self.directory / "server.properties"  # type: ignore[operator]
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return path

    def _command(self) -> tuple[list[str], dict[str, Any]]:
        if self.starts == 0:  # a first start may retry on other ports; a restart keeps them
            self.controller_port = free_port()
            if self.sasl_ssl is not None:
                self.sasl_ssl.port = free_port()
        config = self._write_config(port=self.port, controller_port=self.controller_port)
        with open(self.log_path, "ab") as log:  # type: ignore[arg-type]
            log.write(f"--- start {self.starts + 1}: port {self.port}, controller {self.controller_port}\n".encode())
        return [*self._jvm(self._java, self._classpath), "kafka.Kafka", str(config)], {}

    def _answers(self) -> bool:
        if not port_open(self.port, self.host):
            raise ConnectionRefusedError(f"nothing accepts connections on {self.host}:{self.port}")
        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap_servers,
            request_timeout_ms=5000,
            bootstrap_timeout_ms=5000,
            client_id="cdc-test-readiness",
        )
        try:
            admin.describe_cluster()
            return True
        finally:
            admin.close()

    def kill(self) -> None:
        """SIGKILL the broker (a crash); ``start()`` recovers its log on the same ports."""
        if self.external:
            raise ServiceError(f"the Kafka from {ENV_VAR} cannot be killed by the tests")
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, signal.SIGKILL, timeout=30)
