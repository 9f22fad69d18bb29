"""An engine's phase and positions as the control API reports them (server/status.py), on a
real engine running the synthetic source: no database kind is named on the way."""

from __future__ import annotations

import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.errors import OffsetError, RetriableError
from airflow_cdc.engine.server.status import instance_position
from airflow_cdc.engine.sources.synthetic import SequencePositions, SyntheticConnector, SyntheticTask
from airflow_cdc.engine.testing import EngineRunner, wait_until

CODEC = SequencePositions()


def synthetic(events: int, **extra: object) -> Engine:
    config = {
        "name": "syn",
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.max.events": events,
        "offset.storage": "memory",
        "offset.flush.interval.ms": 0,
        "poll.interval.ms": 20,
        **extra,
    }
    return Engine(config, consumer=lambda record: None)


def test_a_streaming_engine_reports_committed_and_current_positions_lag_and_targets() -> None:
    engine = synthetic(50, **{"tasks.max": 2})
    assert instance_position(engine, CODEC).phase == "starting"
    with EngineRunner(engine):
        position = wait_until(
            lambda: (p := instance_position(engine, CODEC, target="49")).caught_up and p, 30, "caught up"
        )
        assert (position.phase, position.lag, position.lag_unit, position.reached) == ("streaming", 0, "events", True)
        assert [(t.task, t.committed, t.current, t.partition) for t in position.tasks] == [
            ("syn-0", "49", "49", {"server": "syn", "task": 0}),
            ("syn-1", "49", "49", {"server": "syn", "task": 1}),
        ]
        assert instance_position(engine, CODEC, target="50").reached is False
        with pytest.raises(OffsetError, match="an event number"):
            instance_position(engine, CODEC, target="0/16B3748")
    stopped = instance_position(engine, CODEC)
    assert stopped.phase == "stopped" and {t.phase for t in stopped.tasks} == {"stopped"}
    assert stopped.tasks[0].committed == "49"  # what is committed outlives the run


def test_a_task_behind_the_source_is_not_caught_up_and_says_how_far() -> None:
    engine = synthetic(-1, **{"synthetic.rate": 50_000, "offset.flush.interval.ms": 60_000})
    with EngineRunner(engine):
        position = wait_until(
            lambda: (p := instance_position(engine, CODEC)).tasks[0].current is not None and p, 30, "events"
        )
        assert position.tasks[0].committed is None and position.caught_up is False and position.lag is None
        assert instance_position(engine, CODEC, target="0").reached is False  # nothing committed yet


class _FailingStart(SyntheticTask):
    def start(self, context: object) -> None:  # type: ignore[override]
        raise RetriableError("the database is not there")


class _FailingConnector(SyntheticConnector):
    def task_class(self) -> type[SyntheticTask]:
        return _FailingStart


def test_an_engine_whose_task_failed_reports_failed() -> None:
    engine = Engine(
        {"name": "bad", "topic.prefix": "bad", "offset.storage": "memory", "errors.max.retries": 0},
        consumer=lambda record: None,
        connector=_FailingConnector(),
    )
    runner = EngineRunner(engine).start()
    runner.join(30)
    position = instance_position(engine, CODEC)
    assert position.phase == "failed" and position.tasks[0].phase == "failed"
