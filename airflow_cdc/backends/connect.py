"""A Debezium connector on a Kafka Connect cluster, driven as an engine instance (ADR 0017):
"starting" creates the connector from the same engine config file (translated to Debezium's
keys), stopping is Connect's ``PUT .../stop``, offsets go through KIP-875. What Debezium on
Connect lacks is declared in :class:`Capabilities`: no API signal channel, and a source position
only when the connection names the source database (``source_conn_id``).

Connect keeps every connector's configuration in its config topic, as it was sent: a password
sent as it is can be read by anyone who may read that topic. A Connect config provider
reference (``${file:/path:key}``, ``${directory:/path:key}``, ``${env:NAME}``) is resolved by
the worker when it starts the task, so only the reference is kept; ``start`` warns, naming the
keys, when a secret goes otherwise."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_cdc.backends.api import ApiBackend, AsyncApiBackend, ThroughApi
from airflow_cdc.backends.config_check import config_text
from airflow_cdc.backends.protocol import Capabilities, StartOutcome, StartRequest
from airflow_cdc.engine.errors import ApiUnavailableError, RefusedError
from airflow_cdc.hooks.engine_connection import EngineConnection, instance_config
from airflow_cdc.hooks.source_config import SourceConfig, is_secret_key
from airflow_cdc.kafka_connect.backend import AsyncConnectorEngineClient, ConnectorEngineClient
from airflow_cdc.kafka_connect.connector_config import connector_config
from airflow_cdc.kafka_connect.errors import ConnectorNotFoundError
from airflow_cdc.kafka_connect.source_position import position_reader

log = logging.getLogger(__name__)

SourceLoader = Callable[[], SourceConfig | None]

#: A config provider reference as Connect's ConfigTransformer finds one: ``${provider:[path:]key}``.
PROVIDER_REFERENCE = re.compile(r"\$\{[^}:]+:[^}]*\}")
#: The worker settings that make ``${file:...}`` work (Kafka's own provider, no plugin needed).
FILE_PROVIDER = {
    "config.providers": "file",
    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
}


def with_password(requested: Mapping[str, Any], base: Mapping[str, Any], source: SourceConfig | None) -> dict[str, Any]:
    """The connector's configuration with the source's password: the config file's when it is a
    config provider reference (the worker resolves it; the source connection's would land in the
    config topic), else the source connection's (as for an embedded instance), else none."""
    wanted = dict(requested)
    if source is None or wanted.get(source.mapping.secret_key):
        return wanted
    written = base.get(source.mapping.secret_key)
    if isinstance(written, str) and PROVIDER_REFERENCE.search(written):
        wanted[source.mapping.secret_key] = written
        return wanted
    return source.with_secret(wanted)


def plaintext_secrets(config: Mapping[str, Any]) -> list[str]:
    """The keys whose secret values would reach Connect's config topic as they are: set, and
    not (or not holding) a config provider reference."""
    return sorted(
        key
        for key, value in config.items()
        if is_secret_key(key) and value not in (None, "") and not PROVIDER_REFERENCE.search(str(value))
    )


def plaintext_warning(connector: str, keys: list[str]) -> str:
    """What to log for ``keys``: where the values end up, and the config file's lines that keep
    them out (the exact reference form and the worker settings it needs)."""
    lines = "; ".join(f"{key}: ${{file:/etc/kafka-connect/secrets/{connector}.properties:{key}}}" for key in keys)
    worker = " and ".join(f"{key}={value}" for key, value in FILE_PROVIDER.items())
    return (
        f"connector {connector!r}: {', '.join(keys)} go to Kafka Connect as plain text, and Connect keeps "
        "the connector's configuration in its config topic (config.storage.topic), readable by anyone who "
        f"may read that topic. Write a config provider reference in the config file instead: {lines} (a "
        f"properties file on every Connect worker, with {keys[0]}=<the secret>), and give the workers {worker}; "
        "or ${env:NAME} (EnvVarConfigProvider) or ${directory:/path:key} (DirectoryConfigProvider)"
    )


def capabilities(settings: EngineConnection) -> Capabilities:
    return Capabilities(api_signals=False, current_position=bool(settings.source_conn_id))


def client_arguments(settings: EngineConnection, source: SourceConfig | None) -> dict[str, Any]:
    """The Connect backend client's arguments from the connection (and its source's, which reads
    the source database's position: Debezium reports none)."""
    from kafka import KafkaConsumer

    from airflow_cdc.engine.kafka_settings import kafka_python_config

    assert settings.url is not None and settings.instance is not None
    reader = None
    if source is not None:
        base = instance_config(settings) if settings.config_path else {}
        # The instance's connector class wins: a mysql connection's default class is MySQL's,
        # and a MariaDB connector must read MariaDB's GTID position.
        config = {**base, **source.properties}
        if base.get("connector.class"):
            config["connector.class"] = base["connector.class"]
        reader = position_reader(config, source.password)
    return {
        "url": settings.url,
        "connector": settings.instance,
        "auth": (settings.login, settings.token or "") if settings.login else None,
        "timeout": settings.timeout,
        "notification_topic": settings.notification_topic,
        "bootstrap_servers": settings.bootstrap_servers,
        "kafka_options": kafka_python_config(settings.kafka, KafkaConsumer.DEFAULT_CONFIG, strict=False),
        "source_position": reader,
    }


class ConnectorBackend(ThroughApi):
    """The connector ``settings.instance`` on the Connect cluster at ``settings.url``."""

    def __init__(self, settings: EngineConnection, conn_id: str, source: SourceLoader) -> None:
        super().__init__(
            lambda: ConnectorEngineClient(**client_arguments(settings, source())),
            expected=settings.instance,
            conn_id=conn_id,
        )
        self.settings = settings
        self._source = source
        self.capabilities = capabilities(settings)

    @property
    def url(self) -> str:
        return str(self.settings.url).rstrip("/")

    def status_url(self) -> str:
        return f"{self.url}/connectors/{self.settings.instance}/status"

    def delivery_config(self) -> dict[str, Any]:
        # A Debezium connector writes to the Connect cluster's Kafka, which the connection names.
        return {
            **self.running_config(),
            "sink.type": "kafka",
            "sink.kafka.producer.bootstrap.servers": self.settings.bootstrap_servers,
        }

    def start(self, request: StartRequest) -> StartOutcome:
        """Create the connector from the engine configuration (Debezium's keys; the source's
        password in it unless the file gives one, e.g. a Connect config provider's
        ``${file:...}``: a secret that is no reference is warned about, naming the keys); an
        existing one with the same configuration is left alone, one with another is refused
        naming the keys that differ. Connect validates the configuration."""
        from airflow_cdc.hooks.source_config import engine_config

        source = request.source
        base = instance_config(self.settings)
        requested = engine_config(base, source=source, overrides=dict(request.overrides))
        if self.expected and requested.get("name") != self.expected:
            raise RefusedError(
                f"connection {self.conn_id!r} names instance {self.expected!r}, its config file "
                f"{self.settings.config_path} instance {requested.get('name')!r}: make them agree"
            )
        wanted = with_password(requested, base, source)
        topic = self.settings.notification_topic or str(wanted.get("notification.sink.topic.name") or "")
        if not topic and wanted.get("topic.prefix"):
            # The sensors read Debezium's notifications from a topic: one there must be.
            topic = wanted["notification.sink.topic.name"] = f"{wanted['topic.prefix']}.notifications"
        translated = connector_config(wanted, notification_topic=topic)
        exposed = plaintext_secrets(translated)
        if exposed:
            log.warning("%s", plaintext_warning(str(requested.get("name") or self.settings.instance), exposed))
        try:
            running = self.client.connector(self.settings.instance or "").get("config") or {}
        except ConnectorNotFoundError:
            self.client.create(wanted)
            _wait_answering(self, request.timeout)
            return StartOutcome(True, requested)
        differences = [
            f"{key}: running {running.get(key)!r}, asked {value!r}"
            for key, value in sorted(translated.items())
            if not is_secret_key(key) and str(running.get(key)) != config_text(value)
        ]
        if differences:
            raise RefusedError(
                f"connector {requested.get('name')!r} already runs on Kafka Connect with another configuration:\n  "
                + "\n  ".join(differences)
                + "\nstop and delete it first to create it with this configuration, or change the task's config"
            )
        return StartOutcome(False, requested)


def _wait_answering(backend: ApiBackend, timeout: float) -> None:
    """Until Connect answers for a connector it just created: it rebalances first ("a
    rebalance is expected", "No status found")."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            backend.client.status()
            return
        except (ApiUnavailableError, ConnectorNotFoundError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


class AsyncConnectorBackend(AsyncApiBackend):
    """The connector as the triggers read it."""

    def __init__(self, settings: EngineConnection, conn_id: str, source: SourceConfig | None) -> None:
        arguments = client_arguments(settings, source)
        super().__init__(AsyncConnectorEngineClient(**arguments), expected=settings.instance, conn_id=conn_id)
        self.capabilities = capabilities(settings)
        self._kafka = dict(arguments["kafka_options"])
        if settings.bootstrap_servers:
            self._kafka["bootstrap_servers"] = settings.bootstrap_servers

    async def flush_offsets(self) -> bool:
        # A connector commits on its Connect worker's interval: there is no request for it.
        return False

    def kafka_cluster(self) -> dict[str, Any] | None:
        # A connector on Kafka Connect writes to the cluster its kafka_connect connection names.
        return dict(self._kafka) if self._kafka.get("bootstrap_servers") else None
