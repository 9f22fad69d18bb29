"""The Kafka sink (kafka-python): one topic per table, Debezium's key and envelope as JSON.

Delivery: every record is sent asynchronously and marked processed from the producer's
acknowledgement callback (``acks=all``), so an offset is committable only once Kafka holds that
record and all earlier ones. kafka-python retries sends itself (``retries`` is unbounded); when
it gives up - the broker was down longer than ``delivery.timeout.ms``, or it came back without
the producer's state (a restarted broker that lost its log answers ``UnknownProducerId`` to an
idempotent producer, and kafka-python then fails for good) - the sink replaces the producer and
sends every record that was never acknowledged again, in the original order. Nothing is
dropped; a record may arrive twice. While the broker is away, ``send`` blocks once
``buffer.memory`` is full and the engine's ``max.queue.size`` bounds what waits for an
acknowledgement, so memory stays bounded and the source is held back (back-pressure).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from airflow_cdc.engine.config import ConfigDef, Field
from airflow_cdc.engine.errors import ConfigError, ConfigProblem, RetriableError
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.retry import RetryPolicy
from airflow_cdc.engine.sinks.base import Sink

log = logging.getLogger(__name__)

PRODUCER_PREFIX = "sink.kafka.producer."
#: Where this sink's defaults differ from kafka-python's.
#: max.block.ms: how long send() waits for an unreachable broker before the sink parks the
#: records and starts replacing the producer (kafka-python's 60 s would hold a stop that long).
PRODUCER_DEFAULTS: dict[str, Any] = {"acks": "all", "linger_ms": 5, "max_block_ms": 10_000}

KAFKA_SINK_CONFIG = ConfigDef(
    [
        Field(
            "sink.kafka.producer.bootstrap.servers",
            doc="The Kafka brokers, host:port[,host:port...]. Every sink.kafka.producer.* key is "
            "passed to the producer (Java names, e.g. compression.type=lz4, linger.ms=20).",
            fix="set sink.kafka.producer.bootstrap.servers, e.g. sink.kafka.producer.bootstrap.servers=localhost:9092",
        ),
        Field("topic.creation.enable", type="bool", default=True, doc="Create missing topics (admin client)."),
        Field("topic.creation.default.partitions", type="int", default=1, minimum=1),
        Field(
            "topic.creation.default.replication.factor",
            type="int",
            default=-1,
            doc="-1: the broker's default.replication.factor.",
        ),
        Field("sink.kafka.wait.message.delivery.timeout.ms", type="int", default=30_000, minimum=0),
        Field("errors.retry.delay.initial.ms", type="int", default=300, minimum=0),
        Field("errors.retry.delay.max.ms", type="int", default=10_000, minimum=0),
    ]
)


def producer_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``sink.kafka.producer.*`` (Java-style names) as kafka-python keyword arguments."""
    known = KafkaProducer.DEFAULT_CONFIG
    out: dict[str, Any] = dict(PRODUCER_DEFAULTS)
    problems = []
    for key, raw in settings.items():
        if not key.startswith(PRODUCER_PREFIX):
            continue
        name = key[len(PRODUCER_PREFIX) :].replace(".", "_")
        if name not in known:
            problems.append(ConfigProblem(key, "is not a kafka-python producer setting", "remove it or fix its name"))
            continue
        out[name] = _coerce(raw, known[name])
    if problems:
        raise ConfigError(problems)
    if out.get("acks") in ("all", "-1", -1):
        out["acks"] = "all"
    return out


def _coerce(raw: Any, default: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    if isinstance(default, bool):
        return raw.strip().lower() == "true"
    if isinstance(default, int):
        with contextlib.suppress(ValueError):
            return int(raw)
    if isinstance(default, float):
        with contextlib.suppress(ValueError):
            return float(raw)
    return raw


class _Pending:
    """Records of one batch handed to one producer, waiting for their acknowledgements.

    No callback per record: kafka-python runs callbacks on its single I/O thread, between the
    network work, and they cost about a tenth of its throughput. Instead the sink's reaper
    thread looks at the futures every few milliseconds (an attribute read each) and marks a
    batch processed in one call once all of its futures succeeded.
    """

    __slots__ = ("checked", "committer", "futures", "records", "whole")

    def __init__(self, committer: RecordCommitter, records: list[SerializedRecord], *, whole: bool) -> None:
        self.committer = committer
        self.records = records
        self.whole = whole  # the committer's whole batch: one mark_all_processed() covers it
        self.futures: list[Any] = []  # one per record sent so far, in order
        self.checked = 0  # futures[:checked] succeeded

    def reap(self) -> bool | None:
        """True once every record is acknowledged, False if one failed, None while waiting."""
        futures, size = self.futures, len(self.records)
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
        return True if index == size else None

    def unacknowledged(self) -> list[SerializedRecord]:
        return [
            record
            for index, record in enumerate(self.records)
            if index >= len(self.futures) or not self.futures[index].succeeded()
        ]


class KafkaSink(Sink):
    type = "kafka"
    config = KAFKA_SINK_CONFIG

    #: How often the reaper looks for acknowledged batches.
    REAP_INTERVAL_S = 0.005

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(settings)
        self._producer_kwargs = producer_settings(settings or {})
        self._lock = threading.RLock()  # sends, and the replacement of a failed producer
        self._producer: KafkaProducer | None = None
        # Batches sent (or parked) and not yet fully acknowledged, oldest first. What a failed
        # producer leaves here is sent again, in this order.
        self._pending: deque[_Pending] = deque()
        self._pending_lock = threading.Lock()
        self._reap_lock = threading.Lock()
        self._failed = threading.Event()
        self._closing = threading.Event()
        self._known_topics: set[str] = set()
        self._retry = RetryPolicy(
            -1,
            self.settings["errors.retry.delay.initial.ms"] / 1000,
            self.settings["errors.retry.delay.max.ms"] / 1000,
        )
        self._reaper: threading.Thread | None = None
        self.recoveries = 0
        self.resent = 0
        self.last_error: str | None = None

    def start(self) -> None:
        self._producer = self._new_producer()
        self._reaper = threading.Thread(target=self._reap_loop, name="kafka-sink-reaper", daemon=True)
        self._reaper.start()

    def _new_producer(self) -> KafkaProducer:
        try:
            return KafkaProducer(**self._producer_kwargs)
        except KafkaError as exc:
            servers = self._producer_kwargs.get("bootstrap_servers")
            raise RetriableError(f"cannot connect to Kafka at {servers}: {exc}") from exc

    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        with self._lock:
            pending = _Pending(committer, records, whole=True)
            with self._pending_lock:
                self._pending.append(pending)
            if not self._failed.is_set():
                self._send(self._producer, pending)  # else parked: the new producer sends it
        committer.mark_batch_finished()

    def _send(self, producer: KafkaProducer | None, pending: _Pending) -> bool:
        """Send a batch in order; on the first failure stop (the rest stays for a new producer)."""
        if producer is None:
            self._failed.set()
            return False
        send, futures = producer.send, pending.futures
        for record in pending.records:
            try:
                if record.topic not in self._known_topics:
                    self._create_topic(record.topic)
                futures.append(send(record.topic, key=record.key, value=record.value, headers=record.headers or None))
            except Exception as exc:  # broker unreachable for max.block.ms, a fatal producer state, ...
                self._on_error(exc)
                return False
        return True

    def _on_error(self, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        if not self._failed.is_set():
            log.warning("kafka sink: delivery failed (%s); the records will be sent again", self.last_error)
        self._failed.set()

    def _reap(self) -> None:
        with self._reap_lock:
            self._reap_locked()

    def _reap_locked(self) -> None:
        """Mark fully acknowledged batches processed; notice failed ones."""
        with self._pending_lock:
            batches = list(self._pending)
        done: list[_Pending] = []
        for pending in batches:
            outcome = pending.reap()
            if outcome:
                done.append(pending)
            elif outcome is False and not self._failed.is_set():
                self._on_error(pending.futures[pending.checked].exception)
        if not done:
            return
        with self._pending_lock:
            for pending in done:
                self._pending.remove(pending)
        for pending in done:
            self.delivered += len(pending.records)  # only this thread counts
            if pending.whole:
                pending.committer.mark_all_processed()
            else:
                for record in pending.records:
                    pending.committer.mark_processed(record)

    def _reap_loop(self) -> None:
        while not self._closing.wait(self.REAP_INTERVAL_S):
            self._reap()
            if self._failed.is_set():
                try:
                    self._retry.call(self._recover, what="kafka sink recovery", stopping=self._closing)
                except Exception as exc:  # closing while the broker is away: records stay uncommitted
                    log.error("kafka sink: gave up recovering: %s", exc)
        self._reap()

    def _recover(self) -> None:
        """Replace the producer and send what was never acknowledged, in order."""
        with self._lock:
            old, self._producer = self._producer, None
            if old is not None:
                with contextlib.suppress(Exception):
                    old.close(timeout=0)  # fails what it still holds: it is all in _pending
            self._failed.clear()
            producer = self._new_producer()
            self._producer = producer
            self._reap()
            with self._pending_lock:
                again: deque[_Pending] = deque()
                for pending in self._pending:
                    left = pending.unacknowledged()
                    done = len(pending.records) - len(left)
                    if done:
                        sent = {id(r) for r in left}
                        for record in pending.records:
                            if id(record) not in sent:
                                pending.committer.mark_processed(record)
                        self.delivered += done
                    if left:
                        again.append(_Pending(pending.committer, left, whole=False))
                self._pending = again
            self._known_topics.clear()  # a broker that lost its log lost its topics too
            self.recoveries += 1
            waiting = sum(len(p.records) for p in again)
            log.warning("kafka sink: new producer; sending %d unacknowledged record(s) again", waiting)
            for pending in again:
                if not self._send(producer, pending):
                    raise RetriableError(f"Kafka still refuses records: {self.last_error}")
            self.resent += waiting

    def _create_topic(self, topic: str) -> None:
        if not self.settings["topic.creation.enable"]:
            self._known_topics.add(topic)
            return
        admin = KafkaAdminClient(bootstrap_servers=self._producer_kwargs["bootstrap_servers"])
        try:
            admin.create_topics(
                [
                    NewTopic(
                        topic,
                        self.settings["topic.creation.default.partitions"],
                        self.settings["topic.creation.default.replication.factor"],
                    )
                ]
            )
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        self._known_topics.add(topic)

    def flush(self, timeout: float) -> None:
        producer = self._producer
        if producer is not None:
            with contextlib.suppress(KafkaError):
                producer.flush(timeout)
        self._reap()

    def close(self, timeout: float = 10.0) -> None:
        self.flush(min(timeout, self.settings["sink.kafka.wait.message.delivery.timeout.ms"] / 1000))
        self._closing.set()
        if self._reaper is not None:
            self._reaper.join(timeout)
        with self._lock:
            if self._producer is not None:
                with contextlib.suppress(Exception):
                    self._producer.close(timeout=0)
                self._producer = None

    def metrics(self) -> dict[str, float]:
        with self._pending_lock:
            waiting = sum(len(p.records) - p.checked for p in self._pending)
        return {**super().metrics(), "in_flight": waiting, "recoveries": self.recoveries, "resent": self.resent}
