"""Sinks, chosen by ``sink.type``: where serialized change events go (ADR 0005)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.config import ConfigDef, Field
from airflow_cdc.engine.sinks.base import Sink
from airflow_cdc.engine.sinks.changelog import ChangelogSink
from airflow_cdc.engine.sinks.kafka import KafkaSink
from airflow_cdc.engine.sinks.null import NullSink, StdoutSink

SINKS: dict[str, type[Sink]] = {s.type: s for s in (ChangelogSink, KafkaSink, NullSink, StdoutSink)}

SINK_CONFIG = ConfigDef(
    [
        Field(
            "sink.type",
            default="changelog",
            choices=tuple(SINKS),
            aliases={"io.debezium.server.kafka.KafkaChangeConsumer": "kafka"},
            doc="Where change events go: a local changelog directory, Kafka, stdout or nowhere.",
        )
    ]
)


def build_sink(settings: Mapping[str, Any]) -> Sink:
    """The sink ``sink.type`` names, configured from ``settings`` (not started)."""
    kind = SINK_CONFIG.validate(settings)["sink.type"]
    return SINKS[kind](settings)


__all__ = ["SINKS", "SINK_CONFIG", "ChangelogSink", "KafkaSink", "NullSink", "Sink", "StdoutSink", "build_sink"]
