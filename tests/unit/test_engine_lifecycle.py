import threading

import pytest

from airflow_cdc.engine import (
    ConfigError,
    Engine,
    EngineFailedError,
    EngineState,
    IllegalStateError,
    RetriableError,
)
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .scripted import ScriptedConnector, config


def test_close_while_tasks_are_starting_waits_for_every_task_to_finish_starting():
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow_start(task: int) -> None:
        entered.release()
        release.wait(10)

    connector = ScriptedConnector(tasks=2, on_start=slow_start)
    engine = Engine(config(tasks_max=2), consumer=lambda r: None, connector=connector)
    runner = threading.Thread(target=engine.run)
    runner.start()
    assert entered.acquire(timeout=10) and entered.acquire(timeout=10)
    assert engine.state is EngineState.STARTING_TASKS

    closer = threading.Thread(target=engine.close, args=(30,))
    closer.start()
    wait_until(lambda: engine._stop.is_set(), 5, "stop requested")
    # Both starts are still blocked: close() must neither return nor stop a task yet.
    assert closer.is_alive()
    assert engine.state is EngineState.STARTING_TASKS
    assert ("stop", 0) not in connector.events and ("stop", 1) not in connector.events

    release.set()
    closer.join(10)
    runner.join(10)
    assert not closer.is_alive() and engine.state is EngineState.STOPPED
    events = connector.events
    for task in (0, 1):
        assert events.index(("start-end", task)) < events.index(("stop", task))
    assert connector.polls == 0  # stopped before polling began


def test_a_stopped_engine_refuses_to_run_again():
    engine = Engine(config(), consumer=lambda r: None, connector=ScriptedConnector())
    with EngineRunner(engine):
        pass
    assert engine.state is EngineState.STOPPED
    with pytest.raises(IllegalStateError, match="build a new Engine"):
        engine.run()


def test_close_before_run_stops_without_running():
    engine = Engine(config(), consumer=lambda r: None, connector=ScriptedConnector())
    engine.close()
    assert engine.state is EngineState.STOPPED
    with pytest.raises(IllegalStateError):
        engine.run()


def test_a_task_failing_to_start_stops_every_task_after_all_finished_starting():
    release = threading.Event()

    def start(task: int) -> None:
        if task == 0:
            raise ValueError("cannot connect")
        release.wait(10)

    connector = ScriptedConnector(tasks=2, on_start=start)
    engine = Engine(config(tasks_max=2), consumer=lambda r: None, connector=connector)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except EngineFailedError as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: ("start-begin", 1) in connector.events, 5, "task 1 starting")
    assert engine.state is EngineState.STARTING_TASKS
    release.set()
    thread.join(10)
    assert engine.state is EngineState.STOPPED
    assert isinstance(failure[0].__cause__, ValueError)
    assert ("stop", 0) in connector.events and ("stop", 1) in connector.events


def test_retriable_errors_are_retried_until_the_poll_succeeds():
    failures = {"left": 3}

    def flaky(task: int, position: int) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise RetriableError("connection reset")

    seen = []
    engine = Engine(config(), consumer=seen.append, connector=ScriptedConnector(total=50, on_poll=flaky))
    with EngineRunner(engine):
        wait_until(lambda: len(seen) == 50, 10, "all records")
    assert failures["left"] == 0
    assert engine.error is None


def test_a_start_still_failing_at_the_task_timeout_names_its_cause():
    # A replication slot held by another engine: retried as long as errors.max.retries allows
    # (unlimited), so the task timeout ends the wait - and says why, not only that it took long.
    def busy(task: int) -> None:
        raise RetriableError("replication slot 'debezium' is active for PID 17707")

    connector = ScriptedConnector(on_start=busy)
    cfg = config(errors_max_retries=-1, task_management_timeout_ms=300)
    with pytest.raises(EngineFailedError) as failed:
        Engine(cfg, consumer=lambda r: None, connector=connector).run()
    message = str(failed.value.__cause__)
    assert message.startswith("task test-engine-0 could not start: replication slot 'debezium' is active"), message
    assert "still failing after task.management.timeout.ms=300" in message


def test_retries_run_out_then_the_engine_stops_cleanly():
    attempts = []

    def broken(task: int, position: int) -> None:
        attempts.append(position)
        raise RetriableError("database is down")

    connector = ScriptedConnector(on_poll=broken)
    engine = Engine(config(errors_max_retries=2), consumer=lambda r: None, connector=connector)
    with pytest.raises(EngineFailedError) as failed:
        engine.run()
    assert isinstance(failed.value.__cause__.__cause__, RetriableError)
    assert len(attempts) == 3  # the first try and two retries
    assert engine.state is EngineState.STOPPED
    assert ("stop", 0) in connector.events


def test_a_non_retriable_consumer_error_stops_the_engine_and_commits_what_was_delivered():
    delivered = []

    def consumer(record):
        if record.key["id"] == 37:
            raise ValueError("cannot write row 37")
        delivered.append(record.key["id"])

    connector = ScriptedConnector(total=100, batch=10)
    engine = Engine(config(), consumer=consumer, connector=connector)
    with pytest.raises(EngineFailedError, match="cannot write row 37"):
        engine.run()
    assert engine.state is EngineState.STOPPED
    assert delivered == list(range(37))
    (stored,) = engine.offset_store.entries()
    assert stored[1] == {"seq": 36}  # the last delivered record, never the failed one
    assert ("stop", 0) in connector.events


def test_close_called_from_the_consumer_does_not_deadlock():
    engine: Engine

    def consumer(record):
        if record.key["id"] == 5:
            engine.close()

    engine = Engine(config(), consumer=consumer, connector=ScriptedConnector(total=1000))
    thread = threading.Thread(target=engine.run)
    thread.start()
    thread.join(10)
    assert engine.state is EngineState.STOPPED


def test_invalid_configuration_lists_every_problem_at_once():
    with pytest.raises(ConfigError) as error:
        Engine(
            {
                "connector.class": "no.such.Connector",
                "tasks.max": 0,
                "record.processing.order": "SHUFFLED",
                "offset.storage": "file",
                "transforms": "route",
                "transforms.route.type": "org.example.Nope",
            },
            consumer=lambda r: None,
        )
    keys = {problem.key for problem in error.value.problems}
    assert keys == {
        "name",
        "connector.class",
        "tasks.max",
        "record.processing.order",
        "offset.storage.file.filename",
        "transforms.route.type",
    }
    assert "ORDERED, UNORDERED" in str(error.value)


def test_debezium_class_names_are_accepted_for_storage_and_commit_policy(tmp_path):
    engine = Engine(
        {
            "name": "x",
            "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
            "offset.storage.file.filename": str(tmp_path / "offsets.json"),
            "offset.commit.policy": "io.debezium.engine.spi.OffsetCommitPolicy$AlwaysCommitOffsetPolicy",
        },
        consumer=lambda r: None,
        connector=ScriptedConnector(total=20),
    )
    assert engine.settings["offset.storage"] == "file"
    assert engine.settings["offset.commit.policy"] == "always"


def test_engine_needs_exactly_one_consumer():
    with pytest.raises(TypeError):
        Engine(config(), connector=ScriptedConnector())
