"""Where an engine stands, the same way for every source: each task's phase (from the task
runner and ``SourceTask.position()``) and its committed and current positions, printed and
compared by the connector's position codec. Nothing here knows a database kind.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from airflow_cdc.engine.health import Health, judge
from airflow_cdc.engine.positions import PHASE_ORDER, Phase, PositionCodec, SourcePosition
from airflow_cdc.engine.records import Offset
from airflow_cdc.engine.server.models import InstancePosition, TaskPosition
from airflow_cdc.engine.state import EngineState
from airflow_cdc.engine.storage.base import OffsetStore

if TYPE_CHECKING:
    from airflow_cdc.engine.engine import Engine
    from airflow_cdc.engine.sinks.base import Sink
    from airflow_cdc.engine.task_runner import TaskRunner

log = logging.getLogger(__name__)


def instance_position(engine: Engine, codec: PositionCodec, target: str | None = None) -> InstancePosition:
    """Every task's position; with ``target`` (a position as users write it, parsed by
    ``codec``: OffsetError if it is not one) also whether each has reached it."""
    goal = None if target is None else codec.parse(target)
    tasks = tuple(task_position(r, codec, engine.offset_store, goal) for r in engine.tasks)
    lags = [t.lag for t in tasks if t.lag is not None]
    return InstancePosition(
        phase=_instance_phase(engine, tasks),
        lag_unit=codec.lag_unit,
        lag=max(lags) if lags else None,
        caught_up=every(t.caught_up for t in tasks),
        target=None if goal is None else codec.format(goal),
        reached=None if goal is None else every(t.reached for t in tasks),
        tasks=tasks,
    )


def instance_health(engine: Engine, sink: Sink, error: str | None) -> Health:
    """The engine's health with the sink's own retries counted as the tasks' are: a Kafka sink
    replacing its producer while the broker is away delivers nothing meanwhile either."""
    retrying = engine.retrying()
    sink_retry = sink.retrying.current()
    if sink_retry is not None:
        retrying.append((sink.retrying.owner, sink_retry))
    return judge(engine.state.value, paused=engine.paused, error=error, retrying=retrying)


def task_position(runner: TaskRunner, codec: PositionCodec, store: OffsetStore, target: Offset | None) -> TaskPosition:
    source = _source_position(runner)
    committed = None if source.partition is None else store.read(source.partition)
    current = source.current
    caught_up = None
    if current is not None:
        caught_up = committed is not None and codec.caught_up(committed, current)
    return TaskPosition(
        task=runner.task_id,
        phase=_task_phase(runner, source).value,
        partition=source.partition,
        committed=None if committed is None else codec.format(committed),
        current=None if current is None else codec.format(current),
        lag=None if committed is None or current is None else codec.lag(committed, current),
        caught_up=caught_up,
        reached=None if target is None else committed is not None and codec.reached(committed, target),
    )


def _source_position(runner: TaskRunner) -> SourcePosition:
    try:
        return runner.task.position()
    except Exception as exc:  # a status call must never fail because of a source
        log.debug("task %s: position failed: %s", runner.task_id, exc)
        return SourcePosition(Phase.STARTING)


def _task_phase(runner: TaskRunner, source: SourcePosition) -> Phase:
    if runner.error is not None or runner.start_error is not None:
        return Phase.FAILED
    if not runner.started.is_set():
        return Phase.STARTING
    if runner.thread.ident is not None and not runner.thread.is_alive():
        return Phase.STOPPED
    return source.phase


def _instance_phase(engine: Engine, tasks: tuple[TaskPosition, ...]) -> str:
    state = engine.state
    if engine.error is not None:
        return Phase.FAILED.value
    if state in (EngineState.STOPPING, EngineState.STOPPED):
        return Phase.STOPPED.value
    if state is not EngineState.POLLING_TASKS or not tasks:
        return Phase.STARTING.value
    return min((Phase(t.phase) for t in tasks), key=PHASE_ORDER.index).value


def every(answers: Iterable[bool | None]) -> bool | None:
    """False if any task says no, None if any cannot tell (or there is none), else True."""
    seen = list(answers)
    if False in seen:
        return False
    if not seen or None in seen:
        return None
    return True


def stopped_position() -> InstancePosition:
    """The position of a serving instance whose engine has not run yet."""
    return InstancePosition(phase="stopped", lag_unit="", lag=None, caught_up=None, target=None, reached=None, tasks=())
