"""The hook of a ``cdc_engine`` (or ``kafka_connect``) connection: it owns the connection and
hands out the connection's engine backend (``airflow_cdc.backends``, ADR 0022) - an instance
beside the worker (``config_path``), one reached by its API (an engine service), or a Debezium
connector on Kafka Connect (ADR 0017). It speaks no HTTP itself, and nothing above it knows
which backend it drives.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_cdc.backends import AsyncEngineBackend, EngineBackend, open_async_backend, open_backend
from airflow_cdc.backends.config_check import config_text
from airflow_cdc.backends.local import EFFECTIVE_CONFIG
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.hooks.engine_connection import KAFKA_CONNECT, EngineConnection, engine_connection, instance_config
from airflow_cdc.hooks.source_config import SourceConfig, from_connection

__all__ = ["EFFECTIVE_CONFIG", "CdcEngineHook", "CdcKafkaConnectHook", "config_text", "connection_settings"]


class CdcEngineHook(BaseHook):
    """An engine instance of airflow-cdc (or a Debezium connector on Kafka Connect), as an
    :class:`~airflow_cdc.backends.EngineBackend`.

    :param cdc_conn_id: a connection of type ``cdc_engine`` (or ``kafka_connect``).
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

    # -- the backend ---------------------------------------------------------------------------
    def get_backend(self) -> EngineBackend:
        """The connection's backend (close it, or use ``with``)."""
        settings = self.settings
        return open_backend(settings, self.cdc_conn_id, lambda: self._source(settings))

    async def get_async_backend(self) -> AsyncEngineBackend:
        """The same as coroutines, for triggers (``async with await hook.get_async_backend()``)."""
        settings = await self.asettings()
        source = None
        if settings.kafka_connect and settings.source_conn_id:
            source = from_connection(await self.aget_connection(settings.source_conn_id))
        return open_async_backend(settings, self.cdc_conn_id, source)

    def get_conn(self) -> EngineBackend:
        return self.get_backend()

    def get_client(self) -> Any:
        """The backend's own client (``EngineClient``, or a Connect connector's client with
        Connect's further operations); prefer :meth:`get_backend`."""
        return self.get_backend().client  # type: ignore[attr-defined]

    def _source(self, settings: EngineConnection) -> SourceConfig | None:
        return from_connection(self.get_connection(settings.source_conn_id)) if settings.source_conn_id else None

    def test_connection(self) -> tuple[bool, str]:
        """From the connection form: the API answers, the token is accepted, the name matches."""
        try:
            with self.get_backend() as backend:
                status = backend.verify()
        except CdcError as exc:
            return False, str(exc)
        cause = f": {status.cause}" if status.cause else ""
        return True, f"instance {status.name!r}: {status.health}{cause} ({status.state}, {status.phase})"

    def running_config(self) -> dict[str, Any]:
        """The configuration the instance runs with, as its API tells it (Kafka Connect's
        ``GET /connectors/<name>``; passwords left out)."""
        with self.get_backend() as backend:
            return backend.running_config()

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
