"""The Kafka sink: one topic per table, Debezium's key and envelope as JSON.

Two client libraries, chosen by ``sink.kafka.client``: confluent-kafka, librdkafka's producer
(``kafka_confluent.py``, ``pip install 'airflow-cdc[confluent]'``), or kafka-python
(``kafka_python.py``). Unset, it is confluent-kafka when that can be imported and kafka-python
otherwise (``kafka_choice.py``). The delivery rules are the same for both and live here:

- Every record is sent asynchronously by an idempotent producer with ``acks=all`` (its retries
  neither duplicate nor reorder a partition's records) and is marked processed only from its
  acknowledgement, so an offset is committable only once Kafka holds that record and all
  earlier ones. Batches are marked whole, oldest first.
- When a producer gives up - records waited longer than ``delivery.timeout.ms`` (the broker was
  away that long), or the broker lost the producer's state (below) - the sink replaces it and
  sends again every batch from the oldest one not fully acknowledged, in order, acknowledged
  records included. Sending only the missing records would not do: a producer that gives up on
  some records may still deliver later ones (kafka-python bumps its epoch and goes on;
  librdkafka skips timed-out records the same way), and the missing ones would then land after
  newer changes of their keys. Sent again from there, the last event of every key is the newest.
  Nothing is dropped; a record may arrive twice (the at-least-once of Kafka Connect).
- While the broker is away the producer holds the records and retries. The engine's
  ``max.queue.size`` bounds what waits for an acknowledgement, and a full producer buffer
  (``buffer.memory``, librdkafka's ``queue.buffering.max.*``) blocks ``handle_batch``: memory
  stays bounded and the source is held back.

A broker that restarts, even after SIGKILL, keeps its log and the producers' state: the records
in flight are retried and nothing is replaced. The broker loses a producer's state
(``UnknownProducerId``, ``OutOfOrderSequence``) when retention or ``delete_records`` removed the
producer's last records, when it expired an idle producer id (``producer.id.expiration.ms``, a
day by default), or when it lost acknowledged data (an unclean leader election, a machine crash
with a single replica). Unless the producer was idle, kafka-python then bumps its epoch and fails
what was in flight, and librdkafka raises a fatal error that fails everything it holds; the
resend above repairs both.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from airflow_cdc.engine.config import ConfigDef, Field
from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.retry import RetryPolicy
from airflow_cdc.engine.sinks.base import Sink
from airflow_cdc.engine.sinks.kafka_choice import choose_client
from airflow_cdc.engine.sinks.kafka_client import Pending, ProducerClient, Topics
from airflow_cdc.engine.sinks.kafka_confluent import ConfluentClient
from airflow_cdc.engine.sinks.kafka_python import KafkaPythonClient

log = logging.getLogger(__name__)

CLIENTS: dict[str, type[ProducerClient[Any]]] = {c.name: c for c in (KafkaPythonClient, ConfluentClient)}

KAFKA_SINK_CONFIG = ConfigDef(
    [
        Field(
            "sink.kafka.producer.bootstrap.servers",
            doc="The Kafka brokers, host:port[,host:port...]. Every sink.kafka.producer.* key is "
            "passed to the producer (Java names, e.g. compression.type=lz4, linger.ms=20); its "
            "security.protocol, sasl.* and ssl.* keys to the topic-creating admin client too.",
            fix="set sink.kafka.producer.bootstrap.servers, e.g. sink.kafka.producer.bootstrap.servers=localhost:9092",
        ),
        Field(
            "sink.kafka.client",
            default=None,
            choices=tuple(CLIENTS),
            aliases={"confluent-kafka": "confluent", "confluent_kafka": "confluent", "librdkafka": "confluent"},
            doc="The producer library: confluent (confluent-kafka, librdkafka's producer; pip install "
            "'airflow-cdc[confluent]') or kafka-python. Unset: confluent when it can be imported and no "
            "sink.kafka.producer.* setting is one only kafka-python takes, else kafka-python (logged at start).",
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


class KafkaSink(Sink):
    type = "kafka"
    config = KAFKA_SINK_CONFIG

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(settings)
        #: The client library and why it was chosen (logged by ``start``).
        self.choice = choose_client(self.settings["sink.kafka.client"], settings or {})
        self.client: ProducerClient[Any] = CLIENTS[self.choice.name](settings or {})
        self._lock = threading.RLock()  # sends, and the replacement of a failed producer
        self._producer: Any = None
        # Batches sent (or parked) and not yet acknowledged, oldest first; after a failure all
        # of them are sent again, in this order.
        self._pending: deque[Pending] = deque()
        self._pending_lock = threading.Lock()
        self._drained = threading.Condition(self._pending_lock)  # notified when batches leave
        self._reap_lock = threading.Lock()
        self._failed = threading.Event()
        self._closing = threading.Event()
        self._topics = Topics(self._create_topic if self.settings["topic.creation.enable"] else None)
        self._retry = RetryPolicy(
            -1,
            self.settings["errors.retry.delay.initial.ms"] / 1000,
            self.settings["errors.retry.delay.max.ms"] / 1000,
        )
        self._reaper: threading.Thread | None = None
        self.recoveries = 0
        self.resent = 0
        self.last_error: str | None = None
        #: A record Kafka refuses for good: sending it again cannot help, the engine must stop.
        self.refused: CdcError | None = None

    def start(self) -> None:
        log.info("Kafka sink: client %s (%s)", self.choice.name, self.choice.reason)
        self._producer = self.client.new_producer()
        self._reaper = threading.Thread(target=self._reap_loop, name="kafka-sink-reaper", daemon=True)
        self._reaper.start()

    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        if self.refused is not None:
            raise self.refused
        with self._lock:
            pending = self.client.pending(committer, records)
            with self._pending_lock:
                self._pending.append(pending)
            if not self._failed.is_set():
                self._send(self._producer, pending)  # else parked: the new producer sends it
        committer.mark_batch_finished()

    def _send(self, producer: Any, pending: Pending) -> bool:
        """Send a batch in order; on the first failure stop (the rest stays for a new producer)."""
        if producer is None:
            self._failed.set()
            return False
        try:
            self.client.send(producer, pending, self._topics, self._stop_sending(pending.committer))
        except Exception as exc:  # broker unreachable for max.block.ms, a fatal producer state, ...
            self._on_error(exc, pending)
            return False
        return True

    def _stop_sending(self, committer: RecordCommitter) -> Callable[[], bool]:
        failed, closing, stopping = self._failed, self._closing, committer.stopping
        return lambda: failed.is_set() or closing.is_set() or stopping.is_set()

    def _on_error(self, exc: object, pending: Pending | None = None) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        fix = self.client.refusal(exc)
        if fix is not None:
            # Sent again it is refused again: the task stops (nothing from the record on is
            # committed) instead of the sink retrying forever.
            if self.refused is None:
                self.refused = CdcError(f"Kafka refuses a record for good ({self.last_error}): {fix}")
                log.error("kafka sink: %s", self.refused)
            if pending is not None:
                pending.committer.fail(self.refused)
            return
        if not self._failed.is_set():
            log.warning("kafka sink: delivery failed (%s); the records will be sent again", self.last_error)
        self._failed.set()

    def _reap(self, *, notice_failure: bool = True) -> None:
        """Mark the acknowledged batches at the head processed (later ones wait their turn: an
        offset is committed only after all before it anyway); notice a failed head."""
        with self._reap_lock:
            done: list[Pending] = []
            outcome: bool | None = None
            with self._pending_lock:
                while self._pending:
                    outcome = self._pending[0].reap()
                    if not outcome:
                        break
                    done.append(self._pending.popleft())
                failed = self._pending[0] if outcome is False else None
                if done:
                    self._drained.notify_all()
            if failed is not None and notice_failure:
                self._on_error(failed.error(), failed)
            for pending in done:
                self.delivered += len(pending.records)  # only under _reap_lock
                pending.committer.mark_all_processed()

    def _reap_loop(self) -> None:
        while not self._closing.is_set():
            self.client.serve(self._producer, self._closing)
            self._reap()
            if self._failed.is_set() and self.refused is None:
                try:
                    self._retry.call(self._recover, what="recovery", stopping=self._closing, watch=self.retrying)
                except Exception as exc:  # closing while the broker is away: records stay uncommitted
                    log.error("kafka sink: gave up recovering: %s", exc)
                    self._closing.wait(self._retry.max_delay_s)
        self._reap()

    def _recover(self) -> None:
        """Replace the producer and send every batch not acknowledged again, in order."""
        with self._lock:
            old, self._producer = self._producer, None
            if old is not None:
                with contextlib.suppress(Exception):
                    self.client.close_producer(old)  # fails what it still holds: it is all in _pending
            self._reap(notice_failure=False)  # what the old producer did deliver
            producer = self.client.new_producer()  # RetriableError while Kafka is away: retried
            with self._pending_lock:
                self._pending = deque(self.client.pending(p.committer, p.records) for p in self._pending)
                batches = list(self._pending)
            self._topics.forget()
            self._failed.clear()
            self._producer = producer
            self.recoveries += 1
            waiting = sum(len(p.records) for p in batches)
            log.warning("kafka sink: new producer; sending %d unacknowledged record(s) again", waiting)
            for pending in batches:
                if not self._send(producer, pending):
                    raise RetriableError(f"Kafka still refuses records: {self.last_error}")
            self.resent += waiting

    def _create_topic(self, topic: str) -> None:
        self.client.create_topic(
            topic,
            self.settings["topic.creation.default.partitions"],
            self.settings["topic.creation.default.replication.factor"],
        )

    def flush(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        producer = self._producer
        if producer is not None:
            self.client.flush(producer, timeout)
        self._reap()
        with self._drained:
            self._drained.wait_for(lambda: not self._pending, max(0.0, deadline - time.monotonic()))

    def close(self, timeout: float = 10.0) -> None:
        self.flush(min(timeout, self.settings["sink.kafka.wait.message.delivery.timeout.ms"] / 1000))
        self._closing.set()
        if self._reaper is not None:
            self._reaper.join(timeout)
        with self._lock:
            if self._producer is not None:
                with contextlib.suppress(Exception):
                    self.client.close_producer(self._producer)
                self._producer = None

    def metrics(self) -> dict[str, float]:
        with self._pending_lock:
            waiting = sum(p.waiting() for p in self._pending)
        return {**super().metrics(), "in_flight": waiting, "recoveries": self.recoveries, "resent": self.resent}
