"""The embedded CDC engine: sources, record pipeline, offsets, sinks.

Imports neither Airflow nor PySpark (a test enforces it).
"""

from airflow_cdc.engine.config import Config, ConfigDef, Field
from airflow_cdc.engine.connector import SourceConnector, SourceTask, TaskContext
from airflow_cdc.engine.engine import Engine
from airflow_cdc.engine.envelope import Op, change_envelope, source_info
from airflow_cdc.engine.errors import (
    CdcError,
    ConfigError,
    EngineFailedError,
    IllegalStateError,
    OffsetError,
    RefusedError,
    RetriableError,
    SerializationError,
    TaskError,
)
from airflow_cdc.engine.processing import BatchHandler, RecordCommitter
from airflow_cdc.engine.records import PositionMarker, SerializedRecord, SourceRecord, partition_key
from airflow_cdc.engine.serialization import JsonSerializer
from airflow_cdc.engine.state import ALLOWED_TRANSITIONS, EngineState

__all__ = [
    "ALLOWED_TRANSITIONS",
    "BatchHandler",
    "CdcError",
    "Config",
    "ConfigDef",
    "ConfigError",
    "Engine",
    "EngineFailedError",
    "EngineState",
    "Field",
    "IllegalStateError",
    "JsonSerializer",
    "OffsetError",
    "Op",
    "PositionMarker",
    "RecordCommitter",
    "RefusedError",
    "RetriableError",
    "SerializationError",
    "SerializedRecord",
    "SourceConnector",
    "SourceRecord",
    "SourceTask",
    "TaskContext",
    "TaskError",
    "change_envelope",
    "partition_key",
    "source_info",
]
