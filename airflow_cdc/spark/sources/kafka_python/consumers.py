"""The Kafka side of the source: opening group-less consumers (the driver's and each task's),
and the driver's view of the subscribed topics (:class:`KafkaMetadata`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from kafka.structs import OffsetAndMetadata

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.kafka_settings import open_client
from airflow_cdc.spark.sources.kafka_python.errors import KafkaUnreachableError
from airflow_cdc.spark.sources.kafka_python.kafka_internals import shorten_metadata_backoff
from airflow_cdc.spark.sources.kafka_python.offsets import Offsets
from airflow_cdc.spark.sources.kafka_python.options import SourceSettings


def open_consumer(settings: SourceSettings, *, group: bool = False, **overrides: Any) -> KafkaConsumer:
    """A consumer without subscriptions (partitions are assigned), or a KafkaUnreachableError
    naming ``kafka.bootstrap.servers``. ``group``: with ``kafka.group.id``, to commit offsets."""
    config: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers.split(","),
        "group_id": settings.group_id if group else None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "allow_auto_create_topics": False,
        **overrides,
        **settings.client,
    }
    try:
        # A refused login or certificate is a ConfigError naming the kafka.* option (one more
        # connection when TLS or SASL is on), not an unreachable broker retried to the timeout.
        consumer = open_client(KafkaConsumer, config, setting_prefix="kafka.")
    except KafkaError as exc:
        raise KafkaUnreachableError(
            f"cannot reach Kafka at kafka.bootstrap.servers={settings.bootstrap_servers!r} ({exc}); fix the "
            "option kafka.bootstrap.servers (or kafka.security.protocol and the other kafka.* client options), or "
            "check that the brokers are up and reachable from here"
        ) from exc
    shorten_metadata_backoff(consumer)
    return consumer


class KafkaMetadata:
    """The driver's view of the subscribed topics: which partitions exist, and their offsets."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.consumer = open_consumer(settings, group=True)
        self._timeout = self.consumer.config["request_timeout_ms"]

    @contextmanager
    def _answering(self, what: str) -> Iterator[None]:
        """Kafka's silence (a refused connection, a timeout) as a KafkaUnreachableError naming
        the brokers, rather than kafka-python's bare error."""
        try:
            yield
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            raise KafkaUnreachableError(
                f"Kafka at kafka.bootstrap.servers={self.settings.bootstrap_servers!r} did not answer {what}: {exc}"
            ) from exc

    def partitions(self, *, required: bool) -> list[TopicPartition]:
        """The subscribed topics' partitions, asked afresh; ``required``: none is a ConfigError."""
        with self._answering("which topics exist"):
            topics = sorted(t for t in self.consumer.topics() if self.settings.matches(t))
        if required and not topics:
            raise ConfigError([self._no_topics_problem()])
        return [TopicPartition(t, p) for t in topics for p in sorted(self.consumer.partitions_for_topic(t))]

    def _no_topics_problem(self) -> ConfigProblem:
        if self.settings.pattern is not None:
            what = f"subscribePattern={self.settings.pattern!r}" + (
                f" / subscribe={','.join(self.settings.topics)!r}" if self.settings.topics else ""
            )
            return ConfigProblem("subscribePattern", f"no topic matches {what}", "a pattern that matches a topic")
        return ConfigProblem(
            "subscribe",
            f"none of the topics {', '.join(self.settings.topics)} exists",
            "name existing topics (the source does not create them)",
        )

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        return self._offsets(self.consumer.beginning_offsets, partitions)

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        return self._offsets(self.consumer.end_offsets, partitions)

    def _offsets(self, lookup: Any, partitions: Iterable[TopicPartition]) -> Offsets:
        wanted = list(partitions)
        if not wanted:
            return {}
        with self._answering("a request for offsets"):
            found = lookup(wanted, timeout_ms=self._timeout)
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def commit(self, offsets: Offsets) -> None:
        self.consumer.commit(
            {TopicPartition(t, p): OffsetAndMetadata(offset, "", -1) for (t, p), offset in offsets.items()},
            timeout_ms=self._timeout,
        )

    def close(self) -> None:
        self.consumer.close(autocommit=False)
