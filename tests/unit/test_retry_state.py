"""While the engine retries a fault a person must see it: the retry state of a call
(``RetryWatch``), of each task (``retrying`` in its status) and the engine's ``health`` /
``cause`` - RETRYING while it retries, RUNNING once the call succeeds - with ``state`` keeping its
meaning (POLLING_TASKS: it recovers on its own)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.engine import Engine, EngineFailedError, RetriableError
from airflow_cdc.engine.retry import Retrying, RetryPolicy, RetryWatch
from airflow_cdc.engine.server.status import instance_health
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .scripted import ScriptedConnector, config
from .test_kafka_sink_delivery import ScriptedClient


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_watch_shows_each_failed_attempt_until_the_call_succeeds() -> None:
    clock = Clock()
    watch = RetryWatch("task shop-0", clock)
    seen: list[Retrying | None] = []
    outcomes: list[Exception | str] = [RetriableError("connection lost"), RetriableError("still lost"), "records"]

    def poll() -> str:
        seen.append(watch.current())  # what a status call sees while this attempt runs
        clock.now += 1
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    policy = RetryPolicy(-1, 0.25, 1.0)
    assert policy.call(poll, what="poll", stopping=threading.Event(), watch=watch) == "records"
    assert seen == [
        None,
        Retrying("connection lost", "poll", attempt=1, since_ms=1_001_000, next_attempt_ms=1_001_250),
        # The first failure's time stays: the fault lasts since then.
        Retrying("still lost", "poll", attempt=2, since_ms=1_001_000, next_attempt_ms=1_002_500),
    ]
    assert watch.current() is None  # the call succeeded: nothing retried any more


def test_a_watch_forgets_a_call_given_up_and_counts_retries_after_a_first_failure() -> None:
    watch = RetryWatch()
    calls = []

    def broken() -> None:
        calls.append(watch.current())
        raise RetriableError("down")

    policy = RetryPolicy(2, 0.001, 0.001)
    with pytest.raises(RetriableError, match="down"):
        policy.call(broken, what="consumer", stopping=threading.Event(), watch=watch, first_failure=RetriableError("x"))
    assert len(calls) == 2  # errors.max.retries=2 after the failure the caller saw: two retries
    assert [c.attempt for c in calls if c is not None] == [1, 2]
    assert watch.current() is None  # given up: the error, not a retry, is what shows now

    stopping = threading.Event()
    stopping.set()
    with pytest.raises(RetriableError):
        RetryPolicy(-1, 5, 5).call(broken, what="poll", stopping=stopping, watch=watch)
    assert watch.current() is None  # a stop ends the retry too


def test_a_watch_shows_the_oldest_of_retries_on_several_threads() -> None:
    clock = Clock()
    watch = RetryWatch("task t-0", clock)
    watch.failed("consumer", RetriableError("first"), 3, 1.0)
    clock.now += 5
    other = threading.Thread(target=watch.failed, args=("consumer", RetriableError("second"), 1, 1.0))
    other.start()
    other.join()
    assert watch.current() == Retrying("first", "consumer", 3, 1_000_000, 1_001_000)
    watch.ended("consumer")  # this thread's retry succeeded; the other thread's goes on
    assert watch.current() == Retrying("second", "consumer", 1, 1_005_000, 1_006_000)


class Gate:
    """A scripted source's fault, on until ``mend()``."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.mended = threading.Event()

    def __call__(self, *args: Any) -> None:
        if not self.mended.is_set():
            raise RetriableError(self.message)

    def mend(self) -> None:
        self.mended.set()


def retrying_config(**overrides: Any) -> dict[str, object]:
    # A visible backoff: a status call finds the task between two attempts.
    return config(errors_retry_delay_initial_ms=50, errors_retry_delay_max_ms=50, **overrides)


def test_an_engine_retrying_polls_says_retrying_with_the_cause_then_running() -> None:
    fault = Gate("replication connection lost: server closed the connection unexpectedly")
    seen: list[Any] = []
    engine = Engine(
        retrying_config(), consumer=seen.append, connector=ScriptedConnector(total=20, batch=5, on_poll=fault)
    )
    with EngineRunner(engine):
        status = wait_until(lambda: (now := engine.status())["health"] == "RETRYING" and now, 10, "RETRYING")
        assert status["state"] == "POLLING_TASKS" and status["error"] is None  # the state keeps its meaning
        assert status["cause"] == "task test-engine-0 poll: " + fault.message
        [task] = status["tasks"]
        assert task["retrying"]["what"] == "poll" and task["retrying"]["cause"] == fault.message
        assert task["retrying"]["attempt"] >= 1 and task["retrying"]["next_attempt_ms"] > task["retrying"]["since_ms"]
        fault.mend()
        status = wait_until(lambda: (now := engine.status())["health"] == "RUNNING" and now, 10, "RUNNING")
        assert status["cause"] is None and status["tasks"][0]["retrying"] is None
        wait_until(lambda: len(seen) == 20, 10, "every record")


def test_a_start_retried_shows_as_retrying_while_the_engine_is_starting() -> None:
    fault = Gate("cannot connect to PostgreSQL: Connection refused")
    engine = Engine(retrying_config(), consumer=lambda r: None, connector=ScriptedConnector(on_start=fault))
    running = threading.Thread(target=engine.run, daemon=True)  # EngineRunner would wait for POLLING_TASKS
    running.start()
    try:
        status = wait_until(lambda: (now := engine.status())["health"] == "RETRYING" and now, 10, "RETRYING")
        assert status["state"] == "STARTING_TASKS"
        assert status["cause"] == "task test-engine-0 start: " + fault.message
        assert status["tasks"][0]["retrying"]["what"] == "start"
        fault.mend()
        wait_until(lambda: engine.status()["health"] == "RUNNING", 10, "RUNNING")
    finally:
        engine.close(30)
        running.join(30)


def test_a_consumer_retried_shows_in_its_tasks_status() -> None:
    fault = Gate("the changelog's disk is full")

    def consume(record: Any) -> None:
        fault()

    engine = Engine(retrying_config(), consumer=consume, connector=ScriptedConnector(total=3, batch=3))
    with EngineRunner(engine):
        status = wait_until(lambda: (now := engine.status())["health"] == "RETRYING" and now, 10, "RETRYING")
        assert status["cause"] == "task test-engine-0 consumer: the changelog's disk is full"
        fault.mend()
        wait_until(lambda: engine.status()["health"] == "RUNNING", 10, "RUNNING")


def test_paused_failed_and_stopped_engines_say_so() -> None:
    engine = Engine(retrying_config(), consumer=lambda r: None, connector=ScriptedConnector())
    assert engine.status()["health"] == "STARTING"
    with EngineRunner(engine):
        wait_until(lambda: engine.status()["health"] == "RUNNING", 10, "RUNNING")
        engine.pause()
        assert engine.status()["health"] == "PAUSED"
    assert (engine.status()["health"], engine.status()["cause"]) == ("STOPPED", None)

    broken = Engine(
        retrying_config(errors_max_retries=1),
        consumer=lambda r: None,
        connector=ScriptedConnector(on_poll=Gate("database is down")),
    )
    with pytest.raises(EngineFailedError):
        broken.run()
    status = broken.status()
    assert status["health"] == "FAILED" and "database is down" in status["cause"]
    assert status["tasks"][0]["retrying"] is None  # it gave up: the error says the rest


@pytest.fixture
def away_kafka() -> Iterator[tuple[KafkaSink, ScriptedClient, Gate]]:
    """A Kafka sink whose new producers fail while the broker is "away" (a scripted client)."""
    broker_away = Gate("NoBrokersAvailable: cannot reach kafka:9092")
    kafka = KafkaSink(
        {
            "sink.kafka.producer.bootstrap.servers": "scripted:9092",
            "topic.creation.enable": False,
            "errors.retry.delay.initial.ms": 50,
            "errors.retry.delay.max.ms": 50,
            "sink.kafka.wait.message.delivery.timeout.ms": 0,
        }
    )
    client = ScriptedClient({})
    original = client.new_producer

    def new_producer() -> int:
        if client.producers:  # the first one, at start, is made while the broker is there
            broker_away()
        return original()

    client.new_producer = new_producer  # type: ignore[method-assign]
    kafka.client = client
    kafka.start()
    yield kafka, client, broker_away
    kafka.close(timeout=5)


def test_a_kafka_sink_replacing_its_producer_makes_the_instance_retrying(
    away_kafka: tuple[KafkaSink, ScriptedClient, Gate],
) -> None:
    kafka, client, broker_away = away_kafka
    engine = Engine(retrying_config(), batch_handler=kafka, connector=ScriptedConnector(total=10, batch=10))
    with EngineRunner(engine):
        wait_until(lambda: client.sent, 10, "a batch sent")
        client.sent[0][1].outcome = False  # the producer gave up on it: the sink replaces the producer
        health = wait_until(lambda: (now := instance_health(engine, kafka, None)).health == "RETRYING" and now, 10)
        assert health.cause == "kafka sink recovery: NoBrokersAvailable: cannot reach kafka:9092"
        assert engine.status()["health"] == "RUNNING"  # the tasks themselves poll on
        broker_away.mend()
        wait_until(lambda: instance_health(engine, kafka, None).health == "RUNNING", 10, "RUNNING")
        assert kafka.retrying.current() is None and kafka.recoveries == 1


class KeptAlive(ScriptedConnector):
    """A scripted source whose keep-alive (``idle()``, while paused) fails until ``fault`` is mended."""

    def __init__(self, fault: Gate) -> None:
        super().__init__(total=10, batch=10)
        self.fault = fault

    def task_class(self) -> type[Any]:
        fault = self.fault

        class Task(super().task_class()):  # type: ignore[misc]
            def idle(self) -> None:
                fault()

        return Task


def test_a_keep_alive_failing_while_paused_is_retried_not_fatal() -> None:
    fault = Gate("replication connection lost while confirming 0/16B3748")
    engine = Engine(retrying_config(), consumer=lambda r: None, connector=KeptAlive(fault))
    with EngineRunner(engine):
        engine.pause()
        status = wait_until(lambda: (now := engine.status())["health"] == "RETRYING" and now, 10, "RETRYING")
        assert status["cause"] == f"task test-engine-0 keep-alive: {fault.message}"
        wait_until(lambda: engine.status()["tasks"][0]["retrying"]["attempt"] >= 3, 10, "tried again")
        assert engine.error is None  # a paused task that lost its connection is not failed for it
        fault.mend()
        wait_until(lambda: engine.status()["health"] == "PAUSED", 10, "PAUSED, kept alive again")
        fault.mended.clear()  # lost again, then resumed: the polls take over, the keep-alive's retry ends
        wait_until(lambda: engine.status()["health"] == "RETRYING", 10, "RETRYING")
        engine.resume()
        wait_until(lambda: engine.status()["health"] == "RUNNING", 10, "RUNNING")
