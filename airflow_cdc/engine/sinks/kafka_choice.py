"""Which client library the Kafka sink uses when ``sink.kafka.client`` is not set (issue 30).

confluent-kafka (librdkafka's producer, the ``[confluent]`` extra) whenever it can be imported:
the Python client is what limits the sink, and librdkafka sent about four times as many records
per second as kafka-python on the same broker (bench/vs_debezium.py, bench/kafka_sink.py).
kafka-python otherwise: it is a core dependency, always there.

One exception keeps configurations written for kafka-python working unchanged: a
``sink.kafka.producer.*`` setting librdkafka has no counterpart of (``sasl.jaas.config``,
``max.block.ms``, ``ssl.truststore.*``, ...: ``kafka_confluent.JAVA_ONLY``) keeps kafka-python,
which takes it. An explicit ``sink.kafka.client`` is obeyed as it is. The choice and its reason
are logged when the sink starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.sinks import kafka_confluent
from airflow_cdc.engine.sinks.kafka_confluent import JAVA_ONLY, PRODUCER_PREFIX

KAFKA_PYTHON = "kafka-python"
CONFLUENT = "confluent"


@dataclass(frozen=True)
class ClientChoice:
    """The ``sink.kafka.client`` the sink runs with, and why (for the log line)."""

    name: str
    reason: str


def choose_client(setting: str | None, settings: Mapping[str, Any]) -> ClientChoice:
    """``setting`` is ``sink.kafka.client`` as parsed (``None``: not set); ``settings`` the sink's."""
    if setting:
        return ClientChoice(setting, "set by sink.kafka.client")
    missing = kafka_confluent.import_error()
    if missing is not None:
        return ClientChoice(
            KAFKA_PYTHON,
            f"confluent-kafka cannot be imported ({missing}); pip install 'airflow-cdc[confluent]' "
            "for librdkafka's producer, several times faster",
        )
    java_only = sorted(
        key
        for key, value in settings.items()
        if key.startswith(PRODUCER_PREFIX) and value is not None and key[len(PRODUCER_PREFIX) :] in JAVA_ONLY
    )
    if java_only:
        return ClientChoice(
            KAFKA_PYTHON,
            f"confluent-kafka is installed, but {', '.join(java_only)} only kafka-python takes "
            f"(set sink.kafka.client={CONFLUENT} and {JAVA_ONLY[java_only[0][len(PRODUCER_PREFIX) :]]})",
        )
    return ClientChoice(CONFLUENT, "confluent-kafka is installed (the [confluent] extra): librdkafka's producer")
