"""Signals (Debezium's format): ``(id, type, data)`` from the signal table, Kafka, a file or the
control API; parsed here, acted on by the source's incremental snapshot."""

from airflow_cdc.engine.signals.channels import FileChannel, InProcessChannel, KafkaChannel, SignalChannel
from airflow_cdc.engine.signals.signal import ACTIONS, Signal, SignalError, parse_signal

__all__ = [
    "ACTIONS",
    "FileChannel",
    "InProcessChannel",
    "KafkaChannel",
    "Signal",
    "SignalChannel",
    "SignalError",
    "parse_signal",
]
