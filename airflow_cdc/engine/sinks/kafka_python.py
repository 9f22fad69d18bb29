"""The kafka-python client of the Kafka sink (``sink.kafka.client=kafka-python``; the default
when confluent-kafka cannot be imported, ``kafka_choice.py``).

``send`` returns a future per record; kafka-python's I/O thread resolves them. The sink's reaper
reads them (an attribute each) every few milliseconds.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.kafka_settings import kafka_python_config, open_client, security_settings
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.sinks.kafka_client import Pending, ProducerClient, Topics

PRODUCER_PREFIX = "sink.kafka.producer."
#: Where this sink's defaults differ from kafka-python's.
#: max.block.ms: how long send() waits for an unreachable broker before the sink parks the
#: records and starts replacing the producer (kafka-python's 60 s would hold a stop that long).
#: reconnect.backoff.max.ms: the Java client's 1 s; with kafka-python's 30 s a producer built
#: while the broker was away notices it is back up to half a minute late.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "linger_ms": 5,
    "max_block_ms": 10_000,
    "reconnect_backoff_max_ms": 1000,
}


def producer_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``sink.kafka.producer.*`` (Java/librdkafka names, as the confluent client takes them) as
    kafka-python keyword arguments (``engine/kafka_settings.py``)."""
    out: dict[str, Any] = dict(PRODUCER_DEFAULTS)
    out.update(kafka_python_config(settings, KafkaProducer.DEFAULT_CONFIG, prefix=PRODUCER_PREFIX))
    if out.get("acks") in ("all", "-1", -1):
        out["acks"] = "all"
    return out


def admin_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The producer's brokers and security settings, for the admin client that creates topics."""
    connection = {"bootstrap.servers": settings.get(PRODUCER_PREFIX + "bootstrap.servers")}
    connection |= security_settings(settings, PRODUCER_PREFIX)
    return kafka_python_config(connection, KafkaAdminClient.DEFAULT_CONFIG)


#: What to change when Kafka refuses a record for good.
TOO_LARGE = (
    "raise sink.kafka.producer.max.request.size (and the topic's max.message.bytes and the broker's "
    "message.max.bytes), or leave the large column out (column.exclude.list)"
)
BAD_TOPIC = "give the topic a name Kafka takes (topic.prefix, or a transform that routes it)"


class _FuturePending(Pending):
    """No callback per record: kafka-python runs callbacks on its single I/O thread, between the
    network work, and they cost about a tenth of its throughput. The reaper reads the futures
    instead (``is_done``, an attribute)."""

    __slots__ = ("checked", "futures")

    def __init__(self, committer: RecordCommitter, records: list[SerializedRecord]) -> None:
        super().__init__(committer, records)
        self.futures: list[Any] = []  # one per record sent so far, in order
        self.checked = 0  # futures[:checked] succeeded

    def reap(self) -> bool | None:
        futures = self.futures
        index = self.checked
        while index < len(futures):
            future = futures[index]
            if not future.is_done:
                break
            if future.exception is not None:
                self.checked = index
                return False
            index += 1
        self.checked = index
        return True if index == len(self.records) else None

    def waiting(self) -> int:
        return len(self.records) - self.checked

    def error(self) -> object:
        return self.futures[self.checked].exception


class KafkaPythonClient(ProducerClient[_FuturePending]):
    name = "kafka-python"

    #: The reaper reads the futures this often.
    REAP_INTERVAL_S = 0.005
    #: How long a dropped producer's I/O thread may take to stop.
    CLOSE_TIMEOUT_S = 5.0

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.kwargs = producer_settings(settings)
        self.admin_kwargs = admin_settings(settings)
        self.bootstrap_servers = str(self.kwargs.get("bootstrap_servers"))

    def new_producer(self) -> KafkaProducer:
        try:
            # A refused login raises ConfigError: sending again cannot mend a wrong password.
            return open_client(KafkaProducer, self.kwargs, setting_prefix=PRODUCER_PREFIX)
        except KafkaError as exc:
            raise RetriableError(f"cannot connect to Kafka at {self.bootstrap_servers}: {exc}") from exc

    def pending(self, committer: RecordCommitter, records: list[SerializedRecord]) -> _FuturePending:
        return _FuturePending(committer, records)

    def send(self, producer: KafkaProducer, pending: _FuturePending, topics: Topics, stop: Callable[[], bool]) -> None:
        # send() itself waits for room in buffer.memory (back-pressure), up to max.block.ms.
        send, futures, known = producer.send, pending.futures, topics.known
        for record in pending.records:
            if record.topic not in known:
                topics.ensure(record.topic)
            futures.append(send(record.topic, key=record.key, value=record.value, headers=record.headers or None))

    def serve(self, producer: KafkaProducer | None, stopping: threading.Event) -> None:
        stopping.wait(self.REAP_INTERVAL_S)

    def refusal(self, error: object) -> str | None:
        from kafka.errors import (
            InvalidRecordError,
            InvalidTopicError,
            MessageSizeTooLargeError,
            RecordListTooLargeError,
        )

        if isinstance(error, MessageSizeTooLargeError | RecordListTooLargeError | InvalidRecordError):
            return TOO_LARGE
        if isinstance(error, InvalidTopicError):
            return BAD_TOPIC
        if isinstance(error, AssertionError) and "key or value" in str(error):
            return "a record needs a key or a value: leave such records out (a transform) or give them a key"
        return None

    def flush(self, producer: KafkaProducer, timeout: float) -> None:
        with contextlib.suppress(KafkaError):
            producer.flush(timeout)

    def close_producer(self, producer: KafkaProducer) -> None:
        # close(timeout=0) alone is not enough: kafka-python flushes first, and flush(0) raises
        # while records are outstanding, before its I/O thread is stopped - which then goes on
        # retrying the old records and may deliver them after the new producer sent them again,
        # out of order. Stop that thread the way close() would have (failing what it holds).
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            sender.force_close()
            sender.join(self.CLOSE_TIMEOUT_S)
        producer.close(timeout=0)

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        admin = open_client(KafkaAdminClient, self.admin_kwargs, setting_prefix=PRODUCER_PREFIX)
        try:
            admin.create_topics([NewTopic(topic, partitions, replication_factor)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
