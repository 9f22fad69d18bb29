"""Kafka Connect's REST API, for the test fixtures, the compatibility oracle and the scale-out
backend that runs Debezium connectors on a Connect cluster. Imports neither Airflow nor PySpark."""

from airflow_cdc.kafka_connect.client import (
    AsyncConnectClient,
    ConnectClient,
    ConnectorStatus,
    ConnectRestError,
    ConnectUnavailableError,
    TaskStatus,
)

__all__ = [
    "AsyncConnectClient",
    "ConnectClient",
    "ConnectRestError",
    "ConnectUnavailableError",
    "ConnectorStatus",
    "TaskStatus",
]
