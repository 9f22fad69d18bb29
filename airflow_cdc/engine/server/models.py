"""The control API's answers as typed models, shared by the server (``api.py`` builds its JSON
from them) and the client (``client.py`` reads the JSON into them), so the two cannot drift.

``to_json`` is the dataclass's fields (tuples become JSON arrays). ``from_json`` ignores keys it
does not know and fills defaults for keys an older server did not send: a client and an
instance of neighbouring versions still understand each other. Notifications and their pages
are ``airflow_cdc.engine.notifications``' own models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_cdc.engine.health import judge
from airflow_cdc.engine.notifications import Notification, NotificationPage
from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.retry import Retrying

__all__ = [
    "InstancePosition",
    "InstanceStatus",
    "Notification",
    "NotificationPage",
    "OffsetEntry",
    "Retrying",
    "StateChange",
    "TaskPosition",
    "TaskStatus",
]


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _bool_or_none(value: Any) -> bool | None:
    return None if value is None else bool(value)


class _Model:
    """A dataclass answer: its JSON is its fields."""

    def to_json(self) -> dict[str, Any]:
        fields: dict[str, Any] = asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass
        return fields


@dataclass(frozen=True)
class TaskPosition(_Model):
    """Where one task stands. Positions are printed by the connector's codec (an LSN like
    ``0/16B3748`` for PostgreSQL); ``current`` is the newest position the source has seen."""

    task: str
    phase: str
    partition: Partition | None = None
    committed: str | None = None
    current: str | None = None
    lag: int | None = None
    #: The committed offset covers ``current``; None when either is unknown.
    caught_up: bool | None = None
    #: The committed offset covers the asked-for target (``GET /position?target=``).
    reached: bool | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskPosition:
        return cls(
            task=str(data["task"]),
            phase=str(data["phase"]),
            partition=data.get("partition"),
            committed=data.get("committed"),
            current=data.get("current"),
            lag=_int_or_none(data.get("lag")),
            caught_up=_bool_or_none(data.get("caught_up")),
            reached=_bool_or_none(data.get("reached")),
        )


@dataclass(frozen=True)
class InstancePosition(_Model):
    """Where the instance stands: its least advanced phase, the largest lag, and whether every
    task is caught up (and has reached ``target``, when one was asked for)."""

    phase: str
    lag_unit: str = ""
    lag: int | None = None
    caught_up: bool | None = None
    target: str | None = None
    reached: bool | None = None
    tasks: tuple[TaskPosition, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InstancePosition:
        return cls(
            phase=str(data["phase"]),
            lag_unit=str(data.get("lag_unit") or ""),
            lag=_int_or_none(data.get("lag")),
            caught_up=_bool_or_none(data.get("caught_up")),
            target=data.get("target"),
            reached=_bool_or_none(data.get("reached")),
            tasks=tuple(TaskPosition.from_json(t) for t in data.get("tasks") or ()),
        )


@dataclass(frozen=True)
class TaskStatus(_Model):
    """One task's counters (``GET /status``'s ``tasks``)."""

    id: str
    paused: bool = False
    polled: int = 0
    pending: int = 0
    committed_records: int = 0
    commits: int = 0
    #: The offsets this run committed, by partition key.
    offsets: Mapping[str, Offset] = field(default_factory=dict)
    ms_behind_source: int | None = None
    #: The source's own figures (``SourceTask.metrics()``): lag_bytes, snapshot rows, ...
    source: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    #: What the task retries now (its start, a poll, a delivery), None when nothing.
    retrying: Retrying | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskStatus:
        return cls(
            id=str(data["id"]),
            paused=bool(data.get("paused")),
            polled=int(data.get("polled") or 0),
            pending=int(data.get("pending") or 0),
            committed_records=int(data.get("committed_records") or 0),
            commits=int(data.get("commits") or 0),
            offsets=dict(data.get("offsets") or {}),
            ms_behind_source=_int_or_none(data.get("ms_behind_source")),
            source=dict(data.get("source") or {}),
            error=data.get("error"),
            retrying=Retrying.from_json(data.get("retrying")),
        )


@dataclass(frozen=True)
class InstanceStatus(_Model):
    """``GET /status``: the engine's ``state`` (CREATING ... POLLING_TASKS ... STOPPED), the
    source-agnostic ``phase`` and ``position``, counters per task, the sink's figures, and first
    of all ``health`` (RUNNING, RETRYING, PAUSED, STARTING, STOPPED, FAILED) with its ``cause``
    (``airflow_cdc.engine.health``). Built without a health (an older server's answer), it is
    judged from the rest."""

    name: str
    run_id: str
    state: str
    phase: str
    paused: bool = False
    pid: int | None = None
    started_at: float | None = None
    uptime_s: float | None = None
    connector_class: str | None = None
    tasks: tuple[TaskStatus, ...] = ()
    sink: Mapping[str, Any] = field(default_factory=dict)
    api: str | None = None
    state_dir: str | None = None
    error: str | None = None
    position: InstancePosition | None = None
    health: str = ""
    cause: str | None = None

    def __post_init__(self) -> None:
        if not self.health:
            retrying = [(f"task {t.id}", t.retrying) for t in self.tasks if t.retrying is not None]
            judged = judge(self.state, paused=self.paused, error=self.error, retrying=retrying)
            object.__setattr__(self, "health", judged.health)  # frozen: filled in once, here
            object.__setattr__(self, "cause", self.cause or judged.cause)

    @property
    def running(self) -> bool:
        return self.state == "POLLING_TASKS" and self.error is None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["connector"] = {"class": out.pop("connector_class"), "type": "source"}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InstanceStatus:
        position = data.get("position")
        return cls(
            name=str(data["name"]),
            run_id=str(data.get("run_id") or ""),
            state=str(data["state"]),
            phase=str(data.get("phase") or ""),
            paused=bool(data.get("paused")),
            pid=_int_or_none(data.get("pid")),
            started_at=data.get("started_at"),
            uptime_s=data.get("uptime_s"),
            connector_class=(data.get("connector") or {}).get("class"),
            tasks=tuple(TaskStatus.from_json(t) for t in data.get("tasks") or ()),
            sink=dict(data.get("sink") or {}),
            api=data.get("api"),
            state_dir=data.get("state_dir"),
            error=data.get("error"),
            position=None if position is None else InstancePosition.from_json(position),
            health=str(data.get("health") or ""),
            cause=data.get("cause"),
        )


@dataclass(frozen=True)
class OffsetEntry(_Model):
    """One partition's committed offset (``GET /offsets``)."""

    partition: Partition
    offset: Offset

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OffsetEntry:
        return cls(partition=dict(data["partition"]), offset=dict(data["offset"]))


@dataclass(frozen=True)
class StateChange(_Model):
    """The answer of ``POST /stop|pause|resume``: the state asked for (it takes effect soon)."""

    name: str
    state: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StateChange:
        return cls(name=str(data["name"]), state=str(data["state"]))
