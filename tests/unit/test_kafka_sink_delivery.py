"""The Kafka sink's delivery rules, on a scripted client (no broker): batches are marked in order,
and a failed producer is replaced and every batch from the oldest unacknowledged one is sent
again, in order, acknowledged ones included."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from airflow_cdc.engine import JsonSerializer
from airflow_cdc.engine.offsets import OffsetTracker
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.sinks.kafka_client import Pending, ProducerClient, Topics
from airflow_cdc.engine.sources.synthetic import make_record
from airflow_cdc.engine.testing import wait_until


class Scripted(Pending):
    """Acknowledged (or failed) when the test says so."""

    __slots__ = ("outcome",)

    def __init__(self, committer: RecordCommitter, records: list[SerializedRecord]) -> None:
        super().__init__(committer, records)
        self.outcome: bool | None = None

    def reap(self) -> bool | None:
        return self.outcome

    def waiting(self) -> int:
        return 0 if self.outcome else len(self.records)

    def error(self) -> object:
        return "scripted failure"


class ScriptedClient(ProducerClient[Scripted]):
    name = "scripted"

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.bootstrap_servers = "scripted:9092"
        self.producers = 0
        self.sent: list[tuple[int, Scripted]] = []  # (producer, batch), in the order sent

    def new_producer(self) -> int:
        self.producers += 1
        return self.producers

    def pending(self, committer: RecordCommitter, records: list[SerializedRecord]) -> Scripted:
        return Scripted(committer, records)

    def send(self, producer: int, pending: Scripted, topics: Topics, stop: Callable[[], bool]) -> None:
        self.sent.append((producer, pending))

    def serve(self, producer: Any, stopping: threading.Event) -> None:
        stopping.wait(0.001)

    def close_producer(self, producer: int) -> None:
        pass

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        pass


@pytest.fixture
def sink() -> Iterator[tuple[KafkaSink, ScriptedClient]]:
    kafka = KafkaSink(
        {
            "sink.kafka.producer.bootstrap.servers": "scripted:9092",
            "topic.creation.enable": False,
            "errors.retry.delay.initial.ms": 1,
            "sink.kafka.wait.message.delivery.timeout.ms": 0,
        }
    )
    client = ScriptedClient({})
    kafka.client = client
    kafka.start()
    yield kafka, client
    kafka.close(timeout=5)


def batches(tracker: OffsetTracker, sizes: list[int]) -> list[tuple[list[SerializedRecord], RecordCommitter]]:
    serializer, out, seq = JsonSerializer(), [], 0
    for size in sizes:
        records = [serializer.serialize(make_record("t", ["s.t"], 10, 0, {"task": 0}, seq + n)) for n in range(size)]
        seq += size
        out.append((records, RecordCommitter(tracker.track([r.record for r in records]), records, range(size))))
    return out


def test_batches_are_marked_in_order(sink: tuple[KafkaSink, ScriptedClient]) -> None:
    kafka, client = sink
    tracker = OffsetTracker()
    for records, committer in batches(tracker, [2, 3]):
        kafka.handle_batch(records, committer)
    first, second = (pending for _, pending in client.sent)
    second.outcome = True
    wait_until(lambda: kafka.metrics()["in_flight"] == 2, 5, "the second batch acknowledged")
    assert kafka.delivered == 0  # waits for the first
    first.outcome = True
    wait_until(lambda: tracker.committed_seq == 5, 5, "both batches marked")
    assert kafka.metrics() == {"delivered": 5, "in_flight": 0, "recoveries": 0, "resent": 0}


def test_a_failure_resends_every_batch_from_the_oldest_unacknowledged_in_order(
    sink: tuple[KafkaSink, ScriptedClient],
) -> None:
    kafka, client = sink
    tracker = OffsetTracker()
    given = batches(tracker, [1, 2, 3, 4])
    for records, committer in given:
        kafka.handle_batch(records, committer)
    acked, failed, later_acked, waiting = (pending for _, pending in client.sent)
    acked.outcome = True
    later_acked.outcome = True  # acknowledged after a failure: kafka-python and librdkafka both may
    failed.outcome = False
    wait_until(lambda: client.producers == 2 and len(client.sent) == 7, 5, "a new producer sending again")
    again = client.sent[4:]
    assert [producer for producer, _ in again] == [2, 2, 2]
    assert [pending.records for _, pending in again] == [records for records, _ in given[1:]]
    assert tracker.committed_seq == 1
    assert kafka.recoveries == 1
    assert kafka.resent == 9
    for _, pending in again:
        pending.outcome = True
    wait_until(lambda: tracker.committed_seq == 10, 5, "everything marked once")
    assert kafka.delivered == 10
    assert waiting.outcome is None  # the old producer's batches are no longer looked at


def test_a_batch_handed_over_while_the_producer_is_failed_waits_for_the_new_one(
    sink: tuple[KafkaSink, ScriptedClient],
) -> None:
    kafka, client = sink
    tracker = OffsetTracker()
    (first, first_committer), (second, second_committer) = batches(tracker, [1, 1])
    with kafka._lock:  # the reaper cannot recover while a batch is being handed over
        kafka.handle_batch(first, first_committer)
        client.sent[0][1].outcome = False
        wait_until(kafka._failed.is_set, 5, "the failure noticed")
        kafka.handle_batch(second, second_committer)
        assert len(client.sent) == 1  # parked, not sent to the failed producer
    wait_until(lambda: len(client.sent) == 3, 5, "both sent by the new producer")
    assert [(producer, pending.records) for producer, pending in client.sent[1:]] == [(2, first), (2, second)]
