"""The one place that decides which backend a connection drives (ADR 0022)."""

from __future__ import annotations

from collections.abc import Callable

from airflow_cdc.backends.api import AsyncApiBackend
from airflow_cdc.backends.connect import AsyncConnectorBackend, ConnectorBackend
from airflow_cdc.backends.local import LocalInstanceBackend
from airflow_cdc.backends.protocol import AsyncEngineBackend, EngineBackend
from airflow_cdc.backends.service import ServiceBackend
from airflow_cdc.engine.server.client import AsyncEngineClient
from airflow_cdc.hooks.engine_connection import EngineConnection, engine_address
from airflow_cdc.hooks.source_config import SourceConfig


def open_backend(
    settings: EngineConnection, conn_id: str, source: Callable[[], SourceConfig | None] = lambda: None
) -> EngineBackend:
    """The backend of a connection's ``settings``: a connector on Kafka Connect, an instance
    beside the worker (``config_path`` and no host), or one reached by its API. ``source`` reads
    the source connection (only a connector needs it: Debezium reports no source position)."""
    if settings.kafka_connect:
        return ConnectorBackend(settings, conn_id, source)
    if settings.config_path:  # its API at the connection's host if given, else where it wrote it
        return LocalInstanceBackend(settings, conn_id)
    return ServiceBackend(settings, conn_id)


def open_async_backend(settings: EngineConnection, conn_id: str, source: SourceConfig | None) -> AsyncEngineBackend:
    """The same, for the triggers: only reading, so an instance is its API wherever it runs."""
    if settings.kafka_connect:
        return AsyncConnectorBackend(settings, conn_id, source)
    url, token = engine_address(settings)
    client = AsyncEngineClient(url, token, timeout=settings.timeout, tls=settings.tls())
    return AsyncApiBackend(client, expected=settings.instance, conn_id=conn_id)
