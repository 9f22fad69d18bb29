"""The errors of the kafka-python source, in the engine's one hierarchy: retriable where
retrying the query can help (Kafka down, records late), fatal where it cannot (records gone)."""

from __future__ import annotations

from airflow_cdc.engine.errors import CdcError, RetriableError


class KafkaUnreachableError(RetriableError):
    """The brokers of ``kafka.bootstrap.servers`` did not answer (down, or the wrong address)."""


class KafkaDataLossError(CdcError):
    """Records a batch must read are gone from Kafka (retention, a recreated topic)."""


class KafkaReadTimeoutError(RetriableError):
    """Records known to exist did not arrive within ``kafkaConsumer.pollTimeoutMs``."""
