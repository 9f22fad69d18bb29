"""The hook of a ``cdc_engine`` connection: it owns the connection and hands out the engine's own
control-API clients (ADR 0011) - it speaks no HTTP itself.

An instance is reached either at the address in the connection (it runs anywhere: beside the
worker, on another host, in a container), or through its config file on this worker
(``config_path``), from which the hook can also start it detached: it outlives the task.

A ``kafka_connect`` connection names a Debezium connector on a Kafka Connect cluster instead
(ADR 0017): the same hook hands out a client with the same operations
(``airflow_cdc.kafka_connect.backend``), and "starting" creates the connector from the same
config file. Operators and sensors do not know which one they drive.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from airflow.sdk import BaseHook

from airflow_cdc.engine.errors import ApiUnavailableError, CdcError, ConfigError, ConfigProblem
from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.client import AsyncEngineClient, EngineClient
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance_files import is_running, read_status, state_dir
from airflow_cdc.hooks.engine_connection import (
    KAFKA_CONNECT,
    EngineConnection,
    engine_address,
    engine_connection,
    instance_config,
)
from airflow_cdc.hooks.source_config import SourceConfig, from_connection
from airflow_cdc.kafka_connect.backend import AsyncConnectorEngineClient, ConnectorEngineClient
from airflow_cdc.kafka_connect.connector_config import connector_config
from airflow_cdc.kafka_connect.errors import ConnectorNotFoundError
from airflow_cdc.kafka_connect.source_position import position_reader

#: Where start_instance(config=...) writes the configuration it starts an instance from.
EFFECTIVE_CONFIG = "airflow-instance.yaml"


class CdcEngineHook(BaseHook):
    """An engine instance of airflow-cdc, through its control API.

    :param cdc_conn_id: a connection of type ``cdc_engine``.
    """

    conn_name_attr = "cdc_conn_id"
    default_conn_name = "cdc_engine_default"
    conn_type = "cdc_engine"
    hook_name = "CDC engine (airflow-cdc)"

    def __init__(self, cdc_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cdc_conn_id = cdc_conn_id

    # -- the connection ------------------------------------------------------------------------
    @cached_property
    def settings(self) -> EngineConnection:
        return connection_settings(self.cdc_conn_id, self.get_connection(self.cdc_conn_id))

    async def asettings(self) -> EngineConnection:
        """The settings, read without blocking the triggerer's event loop."""
        return connection_settings(self.cdc_conn_id, await self.aget_connection(self.cdc_conn_id))

    @cached_property
    def instance_config(self) -> dict[str, Any]:
        """The instance's configuration, from the connection's ``config_path``."""
        return instance_config(self.settings)

    # -- clients -------------------------------------------------------------------------------
    def get_conn(self) -> EngineClient:
        return self.get_client()

    def get_client(self) -> EngineClient:
        """The instance's control-API client (close it, or use ``with``); for a ``kafka_connect``
        connection, the connector's client with the same operations."""
        settings = self.settings
        if settings.kafka_connect:
            return ConnectorEngineClient(  # type: ignore[return-value]  # the same operations
                **self._connect_arguments(settings),
                source_position=_source_position(settings, self._source(settings)),
            )
        url, token = engine_address(settings)
        return EngineClient(url, token, timeout=settings.timeout, tls=settings.tls())

    async def get_async_client(self) -> AsyncEngineClient:
        """The same as coroutines, for triggers (``async with await hook.get_async_client()``)."""
        settings = await self.asettings()
        if settings.kafka_connect:
            source = None
            if settings.source_conn_id:
                source = from_connection(await self.aget_connection(settings.source_conn_id))
            return AsyncConnectorEngineClient(  # type: ignore[return-value]  # the same operations
                **self._connect_arguments(settings), source_position=_source_position(settings, source)
            )
        url, token = engine_address(settings)
        return AsyncEngineClient(url, token, timeout=settings.timeout, tls=settings.tls())

    # -- a connector on Kafka Connect ------------------------------------------------------------
    @staticmethod
    def _connect_arguments(settings: EngineConnection) -> dict[str, Any]:
        assert settings.url is not None and settings.instance is not None
        return {
            "url": settings.url,
            "connector": settings.instance,
            "auth": (settings.login, settings.token or "") if settings.login else None,
            "timeout": settings.timeout,
            "notification_topic": settings.notification_topic,
            "bootstrap_servers": settings.bootstrap_servers,
            "kafka_options": _kafka_options(settings.kafka),
        }

    def _source(self, settings: EngineConnection) -> SourceConfig | None:
        return from_connection(self.get_connection(settings.source_conn_id)) if settings.source_conn_id else None

    def start_connector(
        self, config: Mapping[str, Any], source: SourceConfig | None = None, timeout: float = 60.0
    ) -> tuple[bool, list[str]]:
        """Create the connector from an engine configuration (translated to Debezium's: the
        embedded instance's own keys left out), the source connection's password in it unless
        the file gives one (e.g. a Connect config provider's ``${file:...}``). ``(created,
        differences)``: an existing connector is left alone, and the keys on which its
        configuration differs from this one are returned."""
        wanted = dict(config)
        if source is not None and not wanted.get(source.mapping.secret_key):
            wanted = source.with_secret(wanted)
        topic = self.settings.notification_topic or str(wanted.get("notification.sink.topic.name") or "")
        if not topic and wanted.get("topic.prefix"):
            # The operators' sensors read Debezium's notifications from a topic: one there must be.
            topic = wanted["notification.sink.topic.name"] = f"{wanted['topic.prefix']}.notifications"
        translated = connector_config(wanted, notification_topic=topic)
        with self.get_client() as client:
            try:
                running = client.connector(self.settings.instance or "").get("config") or {}
            except ConnectorNotFoundError:
                client.create(wanted)  # type: ignore[attr-defined]  # a ConnectorEngineClient
                _wait_answering(client, timeout)
                return True, []
        differences = [
            f"{key}: running {running.get(key)!r}, asked {value!r}"
            for key, value in sorted(translated.items())
            if not is_secret(key) and str(running.get(key)) != config_text(value)
        ]
        return False, differences

    def test_connection(self) -> tuple[bool, str]:
        """From the connection form: the API answers, the token is accepted, the name matches."""
        try:
            with self.get_client() as client:
                status = client.status()
        except CdcError as exc:
            return False, str(exc)
        expected = self.settings.instance
        if expected and status.name != expected:
            return False, f"the API at this address serves instance {status.name!r}, not {expected!r}"
        return True, f"instance {status.name!r}: {status.state}, {status.phase}"

    # -- an instance beside the worker ---------------------------------------------------------
    def start_instance(
        self,
        *,
        timeout: float = 120.0,
        config: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Start the instance of ``config_path`` detached (it outlives the task); its status once
        it streams. Needs ``config_path`` in the connection. ``config`` (the whole configuration,
        e.g. the file's with a DAG's settings over it) is written to ``<state.dir>/airflow-instance.yaml``
        and started from there; ``env`` is added to the instance's environment (a password its
        driver reads, which then is in no file)."""
        settings = self.settings
        if not settings.config_path:
            raise ConfigError(
                [
                    ConfigProblem(
                        self.cdc_conn_id, "has no extra config_path", "set it to start instances on this worker"
                    )
                ]
            )
        if config is None:
            return control.start_detached(Path(settings.config_path), self.instance_config, timeout=timeout, env=env)
        path = state_dir(config) / EFFECTIVE_CONFIG
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            yaml.safe_dump({key: _plain(value) for key, value in config.items()}, file, sort_keys=True)
        return control.start_detached(path, load_config_file(path), timeout=timeout, env=env)

    def running_config(self) -> dict[str, Any]:
        """The configuration the instance runs with, as its API tells it (Kafka Connect's
        ``GET /connectors/<name>``; passwords left out)."""
        with self.get_client() as client:
            return dict(client.connector(client.status().name).get("config") or {})

    def local_status(self) -> dict[str, Any] | None:
        """What the instance of ``config_path`` last wrote, with ``running`` (None without one,
        and for a connector on Kafka Connect)."""
        if not self.settings.config_path or self.settings.kafka_connect:
            return None
        directory = state_dir(self.instance_config)
        written = read_status(directory) or {}
        return {**written, "running": is_running(directory)}

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """For Airflow before 3.2; newer ones read the form from the provider metadata."""
        from airflow_cdc.provider_info import ENGINE_CONNECTION

        return dict(ENGINE_CONNECTION["ui-field-behaviour"])


class CdcKafkaConnectHook(CdcEngineHook):
    """A Debezium connector on a Kafka Connect cluster, driven as an engine instance
    (``kafka_connect`` connections; the operators take it through ``cdc_conn_id`` as well)."""

    default_conn_name = "kafka_connect_default"
    conn_type = KAFKA_CONNECT
    hook_name = "Debezium on Kafka Connect (airflow-cdc)"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from airflow_cdc.provider_info import CONNECT_CONNECTION

        return dict(CONNECT_CONNECTION["ui-field-behaviour"])


def connection_settings(conn_id: str, conn: Any) -> EngineConnection:
    """An Airflow connection's fields as the engine connection's settings."""
    return engine_connection(
        conn_id,
        host=conn.host,
        port=conn.port,
        login=conn.login,
        password=conn.password,
        schema=conn.schema,
        extra=conn.extra,
        conn_type=conn.conn_type,
    )


def _source_position(settings: EngineConnection, source: SourceConfig | None) -> Any:
    """How the connector's source position is read (Debezium reports none): from the database
    of the connection's ``source_conn_id``; None without one. From ``settings`` as given (in a
    trigger they were read without blocking the event loop)."""
    if source is None:
        return None
    base = instance_config(settings) if settings.config_path else {}
    return position_reader({**base, **source.properties}, source.password)


def _wait_answering(client: Any, timeout: float) -> None:
    """Until Connect answers for a connector it just created: it rebalances first ("a
    rebalance is expected", "No status found")."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.status()
            return
        except (ApiUnavailableError, ConnectorNotFoundError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def is_secret(key: str) -> bool:
    from airflow_cdc.hooks.source_config import is_secret_key

    return is_secret_key(key)


def config_text(value: Any) -> str:
    """A value as Connect keeps it (every config value is a string there)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(config_text(v) for v in value)
    return str(value)


def _plain(value: Any) -> Any:
    """A value YAML writes as the config file would (paths and the like as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def _kafka_options(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A ``kafka_connect`` connection's ``kafka`` extra as kafka-python consumer arguments."""
    from kafka import KafkaConsumer

    from airflow_cdc.engine.kafka_settings import kafka_python_config

    return kafka_python_config(settings, KafkaConsumer.DEFAULT_CONFIG, strict=False)
