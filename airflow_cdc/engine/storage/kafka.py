"""Offsets in a compacted Kafka topic (Kafka Connect's ``KafkaOffsetBackingStore``), kafka-python.

The topic holds Connect's records: key ``["<engine name>", {partition}]``, value the offset as
JSON, a null value (tombstone) for a deleted offset. Compaction keeps the last record per key, so
the topic stays as small as the number of partitions ever committed.

``start`` creates the topic if it is missing (admin client, ``cleanup.policy=compact``) and reads
every partition to its end as of the start: the ``end_offsets()`` it asked for first, as Kafka
Connect's ``KafkaBasedLog.readToEnd`` does. A fixed target bounds the read even while other
engines keep writing to a shared topic, and an empty partition needs no fetch at all.

``write`` returns only once the broker acknowledged every record (``acks=all``, then ``flush``),
within ``offset.flush.timeout.ms``. The records of one write go to the broker as one batch per
topic partition (``linger.ms`` is long, ``flush`` sends), which the broker appends whole; a write
that fails raises, and whatever did land is still a valid committed position of its own partition.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from airflow_cdc.engine.errors import OffsetError, RetriableError
from airflow_cdc.engine.kafka_settings import kafka_python_config, open_client
from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.storage.base import CachedOffsetStore, connect_key, encode_entries, parse_connect_key

log = logging.getLogger(__name__)

#: Longest wait between fetches while reading the topic to its end at start.
_FETCH_MAX_WAIT_MS = 100
#: Longer than any write takes to hand over its records: flush() sends them as one batch.
_LINGER_MS = 10_000
#: Longest wait between two attempts to reach a broker that was down (Java client's default).
_RECONNECT_BACKOFF_MAX_MS = 1_000


def _close_quietly(producer: KafkaProducer, timeout: float) -> None:
    with contextlib.suppress(Exception):
        producer.close(timeout=timeout)


class KafkaOffsetStore(CachedOffsetStore):
    """``offset.storage=kafka``: ``bootstrap.servers``, ``offset.storage.topic``,
    ``offset.storage.partitions``, ``offset.storage.replication.factor``; ``security``: the
    worker-level ``security.protocol``, ``sasl.*`` and ``ssl.*`` settings (Java/librdkafka names)."""

    def __init__(
        self,
        engine_name: str,
        *,
        bootstrap_servers: str,
        topic: str,
        partitions: int = 1,
        replication_factor: int = -1,
        flush_timeout_ms: int = 5_000,
        request_timeout_ms: int = 30_000,
        start_timeout_ms: int = 60_000,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(engine_name)
        # The admin client's settings are the ones every client here shares (checked now: a
        # wrong key fails the configuration, not the first commit).
        self._security = kafka_python_config(security or {}, KafkaAdminClient.DEFAULT_CONFIG)
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.flush_timeout_ms = flush_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.start_timeout_ms = start_timeout_ms
        self._producer: KafkaProducer | None = None

    def _client(self) -> dict[str, Any]:
        # bootstrap_timeout_ms bounds the wait for an unreachable broker (kafka-python: 30 s).
        # reconnect_backoff_max_ms is the Java client's default: kafka-python's 30 s lets the
        # backoff grow so far during a broker restart (several seconds) that the first writes
        # after it time out although the broker is back.
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": f"airflow-cdc-offsets-{self.engine_name}",
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.request_timeout_ms,
            "reconnect_backoff_max_ms": _RECONNECT_BACKOFF_MAX_MS,
            **self._security,
        }

    def _unreachable(self, what: str, exc: BaseException) -> RetriableError:
        return RetriableError(
            f"Kafka offset store: {what} failed for topic {self.topic!r} at "
            f"bootstrap.servers={self.bootstrap_servers}: {type(exc).__name__}: {exc}"
        )

    # -- start: create the topic, read it to the end -------------------------------------------
    def start(self) -> None:
        try:
            self._create_topic()
            data = self._read_to_end()
        except KafkaError as exc:
            raise self._unreachable("start", exc) from exc
        with self._lock:
            self._data = data
        log.info("Kafka offset store: %d offset(s) of %r read from %r", len(data), self.engine_name, self.topic)

    def _create_topic(self) -> None:
        # The first client of a start: a refused login fails the start with ConfigError instead
        # of being retried as an unreachable broker.
        admin = open_client(KafkaAdminClient, self._client(), setting_prefix="")
        try:
            admin.create_topics(
                [
                    NewTopic(
                        self.topic,
                        self.partitions,
                        self.replication_factor,
                        topic_configs={"cleanup.policy": "compact"},
                    )
                ]
            )
            log.info("Kafka offset store: created the compacted topic %r", self.topic)
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()

    def _read_to_end(self) -> dict[str, Offset]:
        consumer = KafkaConsumer(
            **self._client(),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=_FETCH_MAX_WAIT_MS,
        )
        try:
            partitions = self._topic_partitions(consumer)
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            ends: dict[TopicPartition, int] = consumer.end_offsets(partitions)
            data: dict[str, Offset] = {}
            deadline = time.monotonic() + self.start_timeout_ms / 1000
            while not self._at_end(consumer, ends):
                if time.monotonic() > deadline:
                    raise OffsetError(
                        f"Kafka offset store: topic {self.topic!r} was not read to its end within "
                        f"{self.start_timeout_ms} ms (bootstrap.servers={self.bootstrap_servers})"
                    )
                for records in consumer.poll(timeout_ms=_FETCH_MAX_WAIT_MS * 2).values():
                    for record in records:
                        self._apply(data, record.key, record.value)
            return data
        finally:
            consumer.close()

    def _topic_partitions(self, consumer: KafkaConsumer) -> list[TopicPartition]:
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            ids = consumer.partitions_for_topic(self.topic)
            if ids:
                return [TopicPartition(self.topic, i) for i in sorted(ids)]
            if time.monotonic() > deadline:
                raise OffsetError(
                    f"Kafka offset store: topic {self.topic!r} has no partitions after "
                    f"{self.request_timeout_ms} ms (bootstrap.servers={self.bootstrap_servers})"
                )
            consumer.topics()  # forces a metadata refresh
            time.sleep(0.05)

    @staticmethod
    def _at_end(consumer: KafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
        # The position is the next offset to read. A fetch may also return records written
        # after the ends were taken (and compaction leaves gaps it skips), hence >=.
        return all(consumer.position(tp) >= end for tp, end in ends.items())

    def _apply(self, data: dict[str, Offset], key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            name, partition = parse_connect_key(key.decode())
        except (OffsetError, UnicodeDecodeError):
            log.warning("Kafka offset store: skipping a record with a foreign key in %r: %r", self.topic, key[:200])
            return
        if name != self.engine_name:
            return
        ours = connect_key(name, partition)  # one spelling per partition, whatever the writer's key order
        if value is None:
            data.pop(ours, None)
            return
        try:
            offset = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise OffsetError(f"Kafka offset store: the offset of {ours} in {self.topic!r} is not JSON: {exc}") from exc
        data[ours] = offset

    # -- reads and writes ----------------------------------------------------------------------
    def write(self, entries: Iterable[tuple[Partition, Offset]]) -> None:
        encoded = encode_entries(self.engine_name, entries)
        if not encoded:
            return
        with self._lock:
            self._send(dict(encoded))
            for key, value in encoded.items():
                self._data[key] = orjson.loads(value)

    def delete(self, partition: Partition) -> None:
        key = connect_key(self.engine_name, partition)
        with self._lock:
            self._send({key: None})
            self._data.pop(key, None)

    def _send(self, records: dict[str, bytes | None]) -> None:
        """Send and wait for the broker's acknowledgement of every record; RetriableError if
        one is missing after offset.flush.timeout.ms (the producer is then replaced)."""
        try:
            producer = self._producer or self._new_producer()
            self._producer = producer
            futures = [producer.send(self.topic, key=key.encode(), value=value) for key, value in records.items()]
            producer.flush(self.flush_timeout_ms / 1000)
            for future in futures:
                future.get(timeout=0)
        except KafkaError as exc:
            self._drop_producer()
            raise self._unreachable(f"writing {len(records)} offset record(s)", exc) from exc

    def _new_producer(self) -> KafkaProducer:
        return KafkaProducer(
            **self._client(),
            acks="all",
            # One batch per partition per write: flush() sends it, the long linger keeps the
            # sender from cutting it in pieces before that.
            linger_ms=_LINGER_MS,
            max_block_ms=self.flush_timeout_ms,
            delivery_timeout_ms=_LINGER_MS + self.request_timeout_ms + self.flush_timeout_ms,
        )

    def _drop_producer(self) -> None:
        # A producer that failed may be in a fatal state (an idempotent producer whose broker
        # lost its log stays failed): the next write starts a new one. kafka-python's close()
        # flushes first and raises while records are pending, leaving the producer open, so
        # the old one is closed on a thread once its records are delivered or expired. A
        # record it still delivers holds an offset that was committable when written: an
        # older position at worst (duplicates after a restart), never one past unsent records.
        producer, self._producer = self._producer, None
        if producer is not None:
            timeout = (_LINGER_MS + self.request_timeout_ms + self.flush_timeout_ms) / 1000
            threading.Thread(
                target=_close_quietly, args=(producer, timeout), name="kafka-offset-store-close", daemon=True
            ).start()

    def stop(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            _close_quietly(producer, self.flush_timeout_ms / 1000)
