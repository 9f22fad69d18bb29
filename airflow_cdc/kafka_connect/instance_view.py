"""Kafka Connect's answers about one Debezium connector as the engine instance's models
(``InstanceStatus``, ``InstancePosition``, ``OffsetEntry``): pure functions over the answers of
``GET /connectors/{name}/status``, ``.../config`` and ``.../offsets``, no I/O, so that the sync
and the async backend share them and unit tests feed them recorded answers.

**States.** Connect's connector and task states become the engine's: RUNNING is POLLING_TASKS,
PAUSED is POLLING_TASKS with ``paused`` (as a paused embedded instance), STOPPED is STOPPED,
UNASSIGNED and RESTARTING (or a running connector without tasks yet) are STARTING_TASKS. A
FAILED connector is STOPPED, and a FAILED connector or task sets ``error`` (each trace's first
line and root cause; a task's whole trace is its ``TaskStatus.error``) and the phase ``failed``.

**Health.** What Connect's status API gives, mapped honestly: a connector or task RESTARTING is
RETRYING (Connect does not say why: the cause says so and points at the worker's log), and so is
a RUNNING task whose status carries a trace (the cause is the trace's summary). Debezium retries
most lost connections inside a RUNNING task without telling the status API (only its log and JMX
know), so a connector on Connect may look RUNNING while it retries; the counts and times of a
retry (``attempt``, ``since_ms``, ``next_attempt_ms``) are unknown there (None). UNASSIGNED is
STARTING: Connect gives it both to a task not placed yet and to one whose worker left.

**Phases.** Debezium tells snapshot from streaming only over JMX, which a REST client cannot
read; its committed offsets say it too, Debezium's own way (``CommonOffsetContext``): an
offset with ``snapshot`` set and no ``snapshot_completed: true`` is an unfinished snapshot.
Without any offset yet, the connector is snapshotting when its ``snapshot.mode`` takes one, else
streaming (a ``no_data`` connector commits its first offset with its first change). The phase
lags by Connect's offset flush interval (``offset.flush.interval.ms`` of the worker).

**Positions.** Committed offsets are printed and compared by the connector's position codec, as
the embedded instance's. Debezium's offset after a completed snapshot still says ``snapshot``
(with ``snapshot_completed: true``); everything up to its LSN is delivered, so the codec is
shown it without that flag. Debezium does not report the source's head position (``current``)
outside JMX: ``current``, ``lag`` and ``caught_up`` are None (logged once per client), so wait
for a target position, or for the consumer lag of the CDC topics, rather than "caught up".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_cdc.engine.config import is_secret_key
from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.health import judge
from airflow_cdc.engine.positions import OPAQUE_POSITIONS, PHASE_ORDER, Phase, PositionCodec, codec_for
from airflow_cdc.engine.records import Offset
from airflow_cdc.engine.retry import Retrying
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, TaskPosition, TaskStatus
from airflow_cdc.engine.server.status import every
from airflow_cdc.kafka_connect.client import FAILED, PAUSED, RESTARTING, RUNNING, STOPPED, ConnectorStatus, _summary

log = logging.getLogger(__name__)

#: ``snapshot.mode`` values that take no initial snapshot (Debezium's, old names included).
NO_SNAPSHOT_MODES = frozenset({"no_data", "never", "schema_only", "recovery", "schema_only_recovery"})
MASK = "********"
NO_CURRENT = (
    "Debezium on Kafka Connect does not report its source's current position (only over JMX): current, lag "
    "and caught_up are unknown; wait for a target position, or for the consumer lag of the CDC topics"
)


def codec_of(config: Mapping[str, Any]) -> PositionCodec:
    """The connector's position codec; JSON offsets (equal or not) for a class we do not know."""
    try:
        return codec_for(config)
    except OffsetError:
        return OPAQUE_POSITIONS


def masked(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with secrets masked: Connect shows passwords as they were given."""
    return {k: (MASK if is_secret_key(k) and v else v) for k, v in config.items()}


def task_name(connector: str, index: int) -> str:
    """Connect's task ``index`` by the embedded engine's task names."""
    return f"{connector}-{index}"


def snapshot_running(offset: Offset) -> bool:
    """Debezium's rule: ``snapshot`` set and the snapshot not completed."""
    snapshot = offset.get("snapshot")
    return snapshot not in (None, False, "false", "FALSE") and offset.get("snapshot_completed") is not True


def as_engine_offset(offset: Offset) -> Offset:
    """A Debezium offset as the codec reads it: one of a completed snapshot covers its position."""
    if offset.get("snapshot_completed") is True:
        return {k: v for k, v in offset.items() if k not in ("snapshot", "snapshot_completed", "last_snapshot_record")}
    return offset


def offset_entries(offsets: Iterable[Mapping[str, Any]]) -> list[OffsetEntry]:
    return [OffsetEntry(dict(o["partition"]), dict(o["offset"])) for o in offsets if o.get("offset") is not None]


def capture_phase(config: Mapping[str, Any], offsets: Sequence[OffsetEntry]) -> Phase:
    """What a running connector does, from its committed offsets (see the module)."""
    mode = str(config.get("snapshot.mode") or "initial").lower()
    if not offsets:
        return Phase.STREAMING if mode in NO_SNAPSHOT_MODES else Phase.SNAPSHOTTING
    if any(snapshot_running(e.offset) for e in offsets):
        return Phase.SNAPSHOTTING
    return Phase.FINISHED if mode == "initial_only" else Phase.STREAMING


def _task_phase(connect_state: str, capture: Phase) -> Phase:
    if connect_state == FAILED:
        return Phase.FAILED
    if connect_state == STOPPED:
        return Phase.STOPPED
    if connect_state in (RUNNING, PAUSED):
        return capture
    return Phase.STARTING  # UNASSIGNED, RESTARTING


def engine_state(status: ConnectorStatus) -> str:
    if status.state in (STOPPED, FAILED):
        return "STOPPED"
    if status.state in (RUNNING, PAUSED) and status.tasks:
        return "POLLING_TASKS"
    return "STARTING_TASKS"


def instance_position(
    status: ConnectorStatus,
    config: Mapping[str, Any],
    offsets: Sequence[OffsetEntry],
    target: str | None = None,
    current: str | None = None,
) -> InstancePosition:
    """Each partition's committed position; with ``target`` (parsed by the connector's codec:
    OffsetError if it is not one of its positions) whether it is reached; with ``current`` (the
    source database's position, read there) each one's lag and whether it caught up."""
    codec = codec_of(config)
    goal = None if target is None else codec.parse(target)
    head = None if current is None else codec.parse(current)
    capture = capture_phase(config, offsets)
    task_states = [t.state for t in status.tasks]
    if status.state in (FAILED, STOPPED):
        task_states = [status.state] * max(1, len(task_states))
    positions: list[TaskPosition] = []
    for index, entry in enumerate(offsets):
        # Connect does not say which task owns a partition: Debezium's PostgreSQL and MySQL
        # connectors have one task; otherwise the n-th partition is shown as the n-th task.
        owner = 0 if len(task_states) <= 1 else min(index, len(task_states) - 1)
        state = task_states[owner] if task_states else status.state
        committed = as_engine_offset(entry.offset)
        positions.append(
            TaskPosition(
                task=task_name(status.name, owner),
                phase=_task_phase(state, capture).value,
                partition=entry.partition,
                committed=codec.format(committed),
                current=None if head is None else codec.format(head),
                lag=None if head is None else codec.lag(committed, head),
                caught_up=None if head is None else codec.caught_up(committed, head),
                reached=None if goal is None else codec.reached(committed, goal),
            )
        )
    if not offsets:  # nothing committed yet: each task, without a position
        positions = [
            TaskPosition(task=task_name(status.name, i), phase=_task_phase(s, capture).value)
            for i, s in enumerate(task_states)
        ]
    lags = [t.lag for t in positions if t.lag is not None]
    return InstancePosition(
        phase=_instance_phase(status, positions),
        lag_unit=codec.lag_unit,
        lag=max(lags) if lags else None,
        caught_up=None if head is None else every(t.caught_up for t in positions),
        target=None if goal is None else codec.format(goal),
        reached=None if goal is None else every(t.reached for t in positions),
        tasks=tuple(positions),
    )


def _instance_phase(status: ConnectorStatus, tasks: Sequence[TaskPosition]) -> str:
    if status.failures:
        return Phase.FAILED.value
    if status.state == STOPPED:
        return Phase.STOPPED.value
    if engine_state(status) != "POLLING_TASKS" or not tasks:
        return Phase.STARTING.value
    return min((Phase(t.phase) for t in tasks), key=PHASE_ORDER.index).value


def failure_message(status: ConnectorStatus, url: str) -> str | None:
    """What failed, each trace summarised, and the fix; None when nothing did."""
    failures = status.failures
    if not failures:
        return None
    return (
        "; ".join(failures)
        + f" (whole traces: each task's error, or GET {url}/connectors/{status.name}/status). Mend the cause, then "
        "restart the failed tasks (restart(include_tasks=True, only_failed=True))"
    )


def connect_retrying(state: str, trace: str | None, url: str) -> Retrying | None:
    """A connector's or task's retry as far as Connect shows one (see the module)."""
    if state == RESTARTING:
        cause = _summary(trace) if trace else f"Kafka Connect does not say why; see the worker's log ({url})"
        return Retrying(cause=cause, what="restart")
    if state == RUNNING and trace:
        return Retrying(cause=_summary(trace), what="poll")
    return None


def instance_status(
    status: ConnectorStatus,
    config: Mapping[str, Any],
    offsets: Sequence[OffsetEntry],
    url: str,
    current: str | None = None,
) -> InstanceStatus:
    """``status()``'s answer for a connector (see the module)."""
    position = instance_position(status, config, offsets, current=current)
    tasks = tuple(
        TaskStatus(
            id=task_name(status.name, t.id),
            paused=t.state == PAUSED,
            error=(t.trace or "FAILED without a trace") if t.state == FAILED else None,
            retrying=connect_retrying(t.state, t.trace, url),
        )
        for t in status.tasks
    )
    error = failure_message(status, url)
    retrying = [(f"task {t.id}", t.retrying) for t in tasks if t.retrying is not None]
    own = connect_retrying(status.state, status.trace, url)
    if own is not None:
        retrying.insert(0, (f"connector {status.name}", own))
    state = engine_state(status)
    health = judge(state, paused=status.state == PAUSED, error=error, retrying=retrying)
    return InstanceStatus(
        name=status.name,
        run_id="",
        state=state,
        phase=Phase.FAILED.value if error else position.phase,
        paused=status.state == PAUSED,
        connector_class=str(config.get("connector.class") or "") or None,
        tasks=tasks,
        sink={"type": "kafka", "kafka_connect": url, "worker_id": status.worker_id},
        api=url,
        error=error,
        position=position,
        health=health.health,
        cause=health.cause,
    )
