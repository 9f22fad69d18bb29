"""Signals (Debezium's format): ``(id, type, data)`` from the signal table, Kafka, a file or the
control API; parsed here, routed to the tasks they concern (``InProcessChannel``), acted on by
each task's snapshot coordinator (:mod:`airflow_cdc.engine.snapshots.coordinator`)."""

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
