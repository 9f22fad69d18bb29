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
import itertools
import logging
import threading
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


class KafkaSink(Sink):
    type = "kafka"
    config = KAFKA_SINK_CONFIG

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(settings)
        self._producer_kwargs = producer_settings(settings or {})
        self._lock = threading.RLock()  # sends, and the replacement of a failed producer
        self._producer: KafkaProducer | None = None
        self._seq = itertools.count()
        # Sent and not yet acknowledged: sequence -> (committer, record). What a failed producer
        # leaves here is sent again, in sequence order.
        self._in_flight: dict[int, tuple[RecordCommitter, SerializedRecord]] = {}
        self._in_flight_lock = threading.Lock()
        self._failed = threading.Event()
        self._closing = threading.Event()
        self._known_topics: set[str] = set()
        self._retry = RetryPolicy(
            -1,
            self.settings["errors.retry.delay.initial.ms"] / 1000,
            self.settings["errors.retry.delay.max.ms"] / 1000,
        )
        self._recoverer: threading.Thread | None = None
        self.recoveries = 0
        self.resent = 0
        self.last_error: str | None = None

    def start(self) -> None:
        self._producer = self._new_producer()
        self._recoverer = threading.Thread(target=self._recover_loop, name="kafka-sink-recovery", daemon=True)
        self._recoverer.start()

    def _new_producer(self) -> KafkaProducer:
        try:
            return KafkaProducer(**self._producer_kwargs)
        except KafkaError as exc:
            servers = self._producer_kwargs.get("bootstrap_servers")
            raise RetriableError(f"cannot connect to Kafka at {servers}: {exc}") from exc

    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        with self._lock:
            for index, record in enumerate(records):
                if self._failed.is_set():
                    self._park(records[index:], committer)  # keep the order: wait for the new producer
                    break
                if not self._send(self._producer, committer, record):
                    self._park(records[index + 1 :], committer)
                    break
        committer.mark_batch_finished()

    def _send(self, producer: KafkaProducer | None, committer: RecordCommitter, record: SerializedRecord) -> bool:
        """Send one record; False if it could not be handed to the producer (it stays parked)."""
        seq = next(self._seq)
        with self._in_flight_lock:
            self._in_flight[seq] = (committer, record)
        if producer is None:
            self._failed.set()
            return False
        try:
            if record.topic not in self._known_topics:
                self._create_topic(record.topic)
            future = producer.send(record.topic, key=record.key, value=record.value, headers=list(record.headers))
        except Exception as exc:  # broker unreachable for max.block.ms, a fatal producer state, ...
            self._on_error(exc)
            return False
        future.add_callback(self._acked, seq)
        future.add_errback(self._on_error)
        return True

    def _park(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        with self._in_flight_lock:
            for record in records:
                self._in_flight[next(self._seq)] = (committer, record)
        self._failed.set()

    def _acked(self, seq: int, _metadata: object) -> None:
        with self._in_flight_lock:
            entry = self._in_flight.pop(seq, None)
        if entry is not None:
            entry[0].mark_processed(entry[1])
            self._count(1)

    def _on_error(self, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        if not self._failed.is_set():
            log.warning("kafka sink: delivery failed (%s); the records will be sent again", self.last_error)
        self._failed.set()

    def _recover_loop(self) -> None:
        while not self._closing.is_set():
            if not self._failed.wait(0.5):
                continue
            try:
                self._retry.call(self._recover, what="kafka sink recovery", stopping=self._closing)
            except Exception as exc:  # closing while the broker is away: records stay uncommitted
                log.error("kafka sink: gave up recovering: %s", exc)

    def _recover(self) -> None:
        """Replace the producer and send what was never acknowledged, in order."""
        with self._lock:
            old, self._producer = self._producer, None
            if old is not None:
                with contextlib.suppress(Exception):
                    old.close(timeout=0)  # fails what it still holds: it is all in _in_flight
            self._failed.clear()
            producer = self._new_producer()
            self._producer = producer
            with self._in_flight_lock:
                waiting = [entry for _, entry in sorted(self._in_flight.items())]
                self._in_flight.clear()
            self._known_topics.clear()  # a broker that lost its log lost its topics too
            self.recoveries += 1
            log.warning("kafka sink: new producer; sending %d unacknowledged record(s) again", len(waiting))
            for position, (committer, record) in enumerate(waiting):
                if not self._send(producer, committer, record):
                    with self._in_flight_lock:
                        for entry in waiting[position + 1 :]:
                            self._in_flight[next(self._seq)] = entry
                    raise RetriableError(f"Kafka still refuses records: {self.last_error}")
            self.resent += len(waiting)

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

    def close(self, timeout: float = 10.0) -> None:
        self.flush(min(timeout, self.settings["sink.kafka.wait.message.delivery.timeout.ms"] / 1000))
        self._closing.set()
        if self._recoverer is not None:
            self._recoverer.join(timeout)
        with self._lock:
            if self._producer is not None:
                with contextlib.suppress(Exception):
                    self._producer.close(timeout=0)
                self._producer = None

    def metrics(self) -> dict[str, float]:
        with self._in_flight_lock:
            waiting = len(self._in_flight)
        return {**super().metrics(), "in_flight": waiting, "recoveries": self.recoveries, "resent": self.resent}
