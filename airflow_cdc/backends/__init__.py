"""Engine backends: the one interface through which the Airflow layer drives an embedded
instance beside the worker, an engine service reached by its API, or a Debezium connector on
Kafka Connect (ADR 0022). Operators, sensors, triggers and the UI import only this package."""

from airflow_cdc.backends.config_check import (
    InvalidConfigError,
    check_config_argument,
    check_engine_config,
    config_differences,
    config_text,
)
from airflow_cdc.backends.factory import open_async_backend, open_backend
from airflow_cdc.backends.protocol import (
    START_FIX,
    AsyncEngineBackend,
    Capabilities,
    EngineBackend,
    InstanceNotRunningError,
    StartOutcome,
    StartRequest,
    StopOutcome,
)
from airflow_cdc.engine.notifications import NotificationPage
from airflow_cdc.engine.server.bounded import CaptureBounds, CaptureResult
from airflow_cdc.engine.server.models import (
    InstancePosition,
    InstanceStatus,
    OffsetEntry,
    StateChange,
    TaskPosition,
    TaskStatus,
)

__all__ = [
    "START_FIX",
    "AsyncEngineBackend",
    "Capabilities",
    "CaptureBounds",
    "CaptureResult",
    "EngineBackend",
    "InstanceNotRunningError",
    "InstancePosition",
    "InstanceStatus",
    "InvalidConfigError",
    "NotificationPage",
    "OffsetEntry",
    "StartOutcome",
    "StartRequest",
    "StateChange",
    "StopOutcome",
    "TaskPosition",
    "TaskStatus",
    "check_config_argument",
    "check_engine_config",
    "config_differences",
    "config_text",
    "open_async_backend",
    "open_backend",
]
