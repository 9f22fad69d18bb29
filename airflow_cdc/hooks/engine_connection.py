"""What a ``cdc_engine`` Airflow connection says, as plain data (no Airflow import): where an
engine instance's control API is and how to authenticate, or where its config file is on this
worker. Kept apart from the hook so it is tested without Airflow, one field at a time.

Connection fields (ADR 0011):

* ``host`` - the API's address, ``http://127.0.0.1`` or ``127.0.0.1`` (``port`` beside it), or a
  whole URL with its port; empty when the instance runs beside the worker (``config_path``).
  With a host and no ``config_path`` the instance is an engine service (``airflow-cdc engine
  serve``, in its own container or pod): the operators start and stop its engine, and change its
  offsets, through the API;
* ``password`` - the API's bearer token (never logged);
* ``login`` - the instance's name (informative; checked against the API's answer);
* extra ``config_path`` - the instance's config file on the worker: the hook can start the
  instance detached from it, and find its API in ``<state.dir>/instance.json``;
* extra ``timeout`` - seconds per API call (default 10);
* extras ``ssl_ca``, ``ssl_cert``, ``ssl_key`` - for an ``https://`` API: the CA bundle its
  certificate is checked with (default: the system's), and this client's certificate and key
  when the instance asks for one (``api.ssl.cafile``); paths on the worker.

A ``kafka_connect`` connection (issue 17, ADR 0017) names a Debezium connector on a Kafka Connect
cluster instead, driven by the same operators:

* ``host`` - Connect's REST URL (``http://connect:8083``); ``login`` / ``password`` - its basic
  auth, if any;
* extra ``config_path`` - the engine config file the connector is created from (the same file an
  embedded instance runs; ``CdcStartEngineOperator`` needs it);
* extra ``connector`` - the connector's name (default: the config file's ``name``);
* extra ``bootstrap_servers`` - the Kafka cluster of Debezium's notification topic
  (``notification.sink.topic.name``, or extra ``notification_topic``);
* extra ``kafka`` - that cluster's client settings, an object with Kafka's Java or librdkafka
  names (``{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
  "sasl.username": ..., "sasl.password": ..., "ssl.ca.location": ...}``): the notification
  reader and the consumer-lag trigger log in with them;
* extra ``source_conn_id`` - the captured database's connection: Debezium reports no source
  position, so "current" targets are read there, and signals a DAG sends on the ``api``
  channel (Debezium has none) go into the signal table over it.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.client import EngineClient, tls_context
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.hooks.source_config import connection_extras as _extras

DEFAULT_TIMEOUT = 10.0
#: The connection types, and the backend each one drives.
EMBEDDED, KAFKA_CONNECT = "cdc_engine", "kafka_connect"


@dataclass(frozen=True)
class EngineConnection:
    url: str | None
    token: str | None
    instance: str | None
    config_path: str | None
    timeout: float = DEFAULT_TIMEOUT
    #: ``cdc_engine`` (an embedded instance) or ``kafka_connect`` (a connector on Connect).
    backend: str = EMBEDDED
    #: Kafka Connect: basic auth's user (``token`` is its password), the Kafka cluster and topic
    #: of the notifications, and the captured database's connection.
    login: str | None = None
    bootstrap_servers: str | None = None
    #: Kafka Connect: the client settings of that cluster (Java/librdkafka names), security included.
    kafka: Mapping[str, Any] = field(default_factory=dict, repr=False)
    notification_topic: str | None = None
    source_conn_id: str | None = None
    #: An https API: the CA bundle, and this client's certificate and key (paths on the worker).
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None

    @property
    def kafka_connect(self) -> bool:
        return self.backend == KAFKA_CONNECT

    def tls(self) -> ssl.SSLContext | None:
        """The context an https API is checked with; None: the system's defaults."""
        if not (self.ssl_ca or self.ssl_cert):
            return None
        return tls_context(self.ssl_ca, self.ssl_cert, self.ssl_key)

    def __repr__(self) -> str:  # the token never reaches a log line
        token = "***" if self.token else None
        return (
            f"EngineConnection(url={self.url!r}, token={token!r}, instance={self.instance!r}, "
            f"config_path={self.config_path!r}, timeout={self.timeout}, backend={self.backend!r})"
        )


def _url(host: str | None, port: int | None, schema: str | None) -> str | None:
    if not host:
        return None
    text = host.strip().rstrip("/")
    if "://" not in text:
        text = f"{schema or 'http'}://{text}"
    parts = urlsplit(text)
    if port and parts.port is None:
        text = f"{parts.scheme}://{parts.hostname}:{port}{parts.path}"
    return text


def engine_connection(
    conn_id: str,
    *,
    host: str | None = None,
    port: int | None = None,
    login: str | None = None,
    password: str | None = None,
    schema: str | None = None,
    extra: str | Mapping[str, Any] | None = None,
    conn_type: str | None = None,
) -> EngineConnection:
    """The connection's fields as an :class:`EngineConnection`; a ConfigError names what to fix
    when neither an API address nor a config file is given."""
    extras = _extras(extra, conn_id)
    if conn_type == KAFKA_CONNECT:
        return _connect_connection(conn_id, host, port, login, password, schema, extras)
    url = _url(host, port, schema if schema in ("http", "https") else None)
    config_path = str(Path(str(extras["config_path"])).expanduser()) if extras.get("config_path") else None
    if url is None and config_path is None:
        raise ConfigError(
            [
                ConfigProblem(
                    conn_id,
                    "has neither a host (the control API's address) nor an extra config_path",
                    "set the host to the instance's API, e.g. http://127.0.0.1:8765, or the extra "
                    '{"config_path": "/path/to/instance.yaml"} for an instance on this worker',
                )
            ]
        )
    try:
        timeout = float(extras.get("timeout") or DEFAULT_TIMEOUT)
    except (TypeError, ValueError):
        raise ConfigError(
            [ConfigProblem(f"{conn_id}.extra.timeout", f"{extras.get('timeout')!r} is not a number", "give seconds")]
        ) from None
    return EngineConnection(
        url,
        password or None,
        login or None,
        config_path,
        timeout,
        ssl_ca=_text(extras, "ssl_ca"),
        ssl_cert=_text(extras, "ssl_cert"),
        ssl_key=_text(extras, "ssl_key"),
    )


def _text(extras: Mapping[str, Any], key: str) -> str | None:
    return str(extras[key]) if extras.get(key) else None


def _kafka_settings(conn_id: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if value in (None, "", {}):
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(
            [ConfigProblem(f"{conn_id}.extra.kafka", "is not an object", 'give {"security.protocol": ..., ...}')]
        )
    return {str(k): v for k, v in value.items()}


def _connect_connection(
    conn_id: str,
    host: str | None,
    port: int | None,
    login: str | None,
    password: str | None,
    schema: str | None,
    extras: Mapping[str, Any],
) -> EngineConnection:
    url = _url(host, port, schema if schema in ("http", "https") else None)
    if url is None:
        raise ConfigError(
            [ConfigProblem(conn_id, "has no host", "set it to Kafka Connect's REST URL, e.g. http://connect:8083")]
        )
    config_path = str(Path(str(extras["config_path"])).expanduser()) if extras.get("config_path") else None
    connector = str(extras.get("connector") or "") or None
    if connector is None and config_path is not None:
        connector = str(load_config_file(config_path).get("name") or "") or None
    if connector is None:
        raise ConfigError(
            [
                ConfigProblem(
                    f"{conn_id}.extra",
                    "names no connector",
                    'set {"connector": "<name>"}, or {"config_path": ...} of a config file with a name',
                )
            ]
        )
    try:
        timeout = float(extras.get("timeout") or 30.0)
    except (TypeError, ValueError):
        raise ConfigError(
            [ConfigProblem(f"{conn_id}.extra.timeout", f"{extras.get('timeout')!r} is not a number", "give seconds")]
        ) from None

    return EngineConnection(
        url,
        password or None,
        connector,
        config_path,
        timeout,
        backend=KAFKA_CONNECT,
        login=login or None,
        bootstrap_servers=_text(extras, "bootstrap_servers"),
        kafka=_kafka_settings(conn_id, extras.get("kafka")),
        notification_topic=_text(extras, "notification_topic"),
        source_conn_id=_text(extras, "source_conn_id"),
    )


def instance_config(settings: EngineConnection) -> dict[str, Any]:
    """The instance's configuration, from the connection's ``config_path``."""
    if not settings.config_path:
        raise ConfigError(
            [ConfigProblem("config_path", "is not set", "set the connection's extra config_path or its host")]
        )
    return load_config_file(settings.config_path)


def engine_address(settings: EngineConnection) -> tuple[str, str | None]:
    """``(url, token)`` of the connection's instance: the host when given, else the address the
    instance of ``config_path`` wrote in its state directory on this machine (RefusedError when
    it is not running)."""
    if settings.url:
        return settings.url, settings.token
    url, token = control.api_address(instance_config(settings))
    return url, settings.token or token


def engine_client(settings: EngineConnection) -> EngineClient:
    """The control-API client of the connection's instance (close it, or use ``with``)."""
    url, token = engine_address(settings)
    return EngineClient(url, token, timeout=settings.timeout, tls=settings.tls())
