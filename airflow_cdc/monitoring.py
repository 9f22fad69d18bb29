"""What a person watching engine instances sees, as plain data: the Airflow UI page
(``airflow_cdc.ui``) and the terminal (``airflow-cdc status`` / ``snapshot watch``) render the
same :class:`InstanceView`. No Airflow import and no rendering here.

A :class:`Monitor` follows one instance through its control API: each :meth:`Monitor.observe`
reads ``GET /status`` and the notifications after the last cursor, so a page that refreshes
every few seconds costs two small calls, not a re-read of the 10,000 notifications an instance
keeps. Snapshots are folded from Debezium's notifications (STARTED, IN_PROGRESS,
TABLE_SCAN_COMPLETED, PAUSED/RESUMED, COMPLETED/ABORTED, a signal's REJECTED), keyed by the
signal id every one of them carries; events/s is the polled-records counter's slope between
two observations (the average since the start on the first one).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.notifications import Notification, NotificationPage
from airflow_cdc.engine.retry import Retrying
from airflow_cdc.engine.server.models import InstanceStatus
from airflow_cdc.snapshot_views import (
    ABORTED,
    COMPLETED,
    FAILED,
    GOOD_TABLE_STATUSES,
    PAUSED,
    REJECTED,
    RUNNING,
    SNAPSHOTS,
    SnapshotFold,
    SnapshotView,
    TableScan,
    _with_task_estimates,
)

__all__ = [
    "ABORTED",
    "COMPLETED",
    "FAILED",
    "GOOD_TABLE_STATUSES",
    "PAUSED",
    "REJECTED",
    "RUNNING",
    "SNAPSHOTS",
    "InstanceView",
    "Monitor",
    "SnapshotFold",
    "SnapshotView",
    "TableScan",
    "TaskView",
    "_with_task_estimates",
    "fix_for",
]

if TYPE_CHECKING:
    from typing import Self


class Observed(Protocol):
    """What a :class:`Monitor` reads of an instance: an engine backend
    (``airflow_cdc.backends.EngineBackend``), or the engine's API client for ``airflow-cdc
    status --url``; a context manager."""

    @property
    def url(self) -> str: ...

    def status(self) -> InstanceStatus: ...

    def notifications(self, cursor: str | None = None, limit: int = 1000) -> NotificationPage: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


#: Notifications a monitor keeps for "recent notifications" (the instance keeps many more).
RECENT = 50


@dataclass(frozen=True)
class TaskView:
    id: str
    phase: str
    committed: str | None
    current: str | None
    lag: int | None
    caught_up: bool | None
    polled: int
    committed_records: int
    pending: int
    error: str | None
    retrying: Retrying | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "retrying": None if self.retrying is None else self.retrying.to_json()}


@dataclass(frozen=True)
class InstanceView:
    """An instance as a person watching it needs it. ``reachable`` False: only ``label``,
    ``url`` and ``problem`` (what is wrong and what to do) mean anything."""

    label: str
    url: str = ""
    reachable: bool = True
    problem: str | None = None
    name: str = ""
    state: str = ""
    phase: str = ""
    paused: bool = False
    connector: str = ""
    uptime_s: float | None = None
    lag: int | None = None
    lag_unit: str = ""
    caught_up: bool | None = None
    committed_records: int = 0
    events_per_s: float | None = None
    sink: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[TaskView, ...] = ()
    error: str | None = None
    fix: str | None = None
    snapshots: tuple[SnapshotView, ...] = ()
    notifications: tuple[Notification, ...] = ()
    observed_at: float = 0.0
    #: The instance's own ``health`` (RUNNING, RETRYING, ...) and its cause; "" from an
    #: instance too old to say, then judged here from its state.
    status_health: str = ""
    cause: str | None = None
    #: The longest-running retry (a task's or the sink's), while the instance retries.
    retrying: Retrying | None = None

    @property
    def health(self) -> str:
        """One word for the badge: ``unreachable``, ``failed``, ``retrying``, ``paused``,
        ``running``, ``stopped`` or ``starting``."""
        if not self.reachable:
            return "unreachable"
        if self.status_health:
            return self.status_health.lower()
        if self.error:
            return "failed"
        if self.paused:
            return "paused"
        if self.state == "POLLING_TASKS":
            return "running"
        if self.state in ("STOPPING", "STOPPED"):
            return "stopped"
        return "starting"

    def snapshot(self, snapshot_id: str) -> SnapshotView | None:
        return next((s for s in self.snapshots if s.id == snapshot_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "url": self.url,
            "reachable": self.reachable,
            "problem": self.problem,
            "health": self.health,
            "cause": self.cause,
            "retrying": None if self.retrying is None else self.retrying.to_json(),
            "name": self.name,
            "state": self.state,
            "phase": self.phase,
            "paused": self.paused,
            "connector": self.connector,
            "uptime_s": self.uptime_s,
            "lag": self.lag,
            "lag_unit": self.lag_unit,
            "caught_up": self.caught_up,
            "committed_records": self.committed_records,
            "events_per_s": None if self.events_per_s is None else round(self.events_per_s, 1),
            "sink": self.sink,
            "tasks": [t.to_json() for t in self.tasks],
            "error": self.error,
            "fix": self.fix,
            "snapshots": [s.to_json() for s in self.snapshots],
            "notifications": [n.as_dict() for n in self.notifications],
            "observed_at": self.observed_at,
        }


# -- errors and what to do about them -------------------------------------------------------------

#: (substring of an error, what to do): the engine's errors mostly say it themselves; these are
#: the ones whose cause lies outside the instance.
FIXES: tuple[tuple[str, str], ...] = (
    ("wal_level", "set wal_level = logical in postgresql.conf and restart PostgreSQL"),
    ("replication slot", "drop the stale slot (pg_drop_replication_slot) or give the instance its own slot.name"),
    ("password authentication failed", "check database.user / database.password of the instance's config"),
    ("Connection refused", "is the database (or broker) up and reachable from the instance's host?"),
    (
        "server closed the connection",
        "is the database server up and reachable from the instance's host? The instance retries until it is",
    ),
    ("permission denied", "grant the capture user REPLICATION and SELECT on the captured tables"),
    ("isn't defined", "add the connection: type cdc_engine, host = the instance's API (or extra config_path)"),
    ("is not running", "start it: the CdcStartEngineOperator, or airflow-cdc engine start --config FILE"),
)


def fix_for(error: str | None) -> str | None:
    if not error:
        return None
    lowered = error.lower()
    for needle, fix in FIXES:
        if needle.lower() in lowered:
            return fix
    return None


# -- following an instance -----------------------------------------------------------------------


class Monitor:
    """Follows one instance. ``client`` is called for each observation (a fresh client: the
    instance's address may change when it restarts). Thread-safe: a web page's requests may
    observe at the same time."""

    def __init__(self, label: str, client: Callable[[], Observed], *, recent: int = RECENT) -> None:
        self.label = label
        self._client = client
        self._lock = threading.Lock()
        self._cursor: str | None = None
        self._run_id: str | None = None
        self._snapshots = SnapshotFold()
        self._recent: deque[Notification] = deque(maxlen=recent)
        self._last_count: tuple[str, float, int] | None = None  # run id, time, records polled

    def observe(self) -> InstanceView:
        """The instance now; an unreachable one (or a connection that cannot be used) is a view
        with ``reachable`` False and the problem, never an exception."""
        with self._lock:
            url = ""
            try:
                with self._client() as client:
                    url = client.url
                    status = client.status()
                    page = client.notifications(self._cursor, limit=10_000)
            except Exception as exc:  # a page shows every instance: one that cannot be reached says why
                problem = str(exc) if isinstance(exc, CdcError) else f"{type(exc).__name__}: {exc}"
                return InstanceView(
                    self.label, url, reachable=False, problem=problem, fix=fix_for(problem), observed_at=time.time()
                )
            self._take(page)
            return self._view(url, status)

    def _take(self, page: NotificationPage) -> None:
        if page.reset or (self._run_id is not None and page.run_id != self._run_id and self._cursor is None):
            self._snapshots, self._recent = SnapshotFold(), deque(maxlen=self._recent.maxlen)
        self._snapshots.feed(page.notifications)
        self._recent.extend(page.notifications)
        self._cursor, self._run_id = page.cursor, page.run_id

    def _view(self, url: str, status: InstanceStatus) -> InstanceView:
        now = time.time()
        committed = sum(task.committed_records for task in status.tasks)
        polled = sum(task.polled for task in status.tasks)
        position = status.position
        positions = {task.task: task for task in position.tasks} if position else {}
        tasks = tuple(
            TaskView(
                id=task.id,
                phase=positions[task.id].phase if task.id in positions else "",
                committed=positions[task.id].committed if task.id in positions else None,
                current=positions[task.id].current if task.id in positions else None,
                lag=positions[task.id].lag if task.id in positions else None,
                caught_up=positions[task.id].caught_up if task.id in positions else None,
                polled=task.polled,
                committed_records=task.committed_records,
                pending=task.pending,
                error=task.error,
                retrying=task.retrying,
            )
            for task in status.tasks
        )
        error = status.error or next((task.error for task in status.tasks if task.error), None)
        sink_retry = Retrying.from_json(status.sink.get("retrying"))
        retries = [t.retrying for t in status.tasks if t.retrying is not None] + ([sink_retry] if sink_retry else [])
        return InstanceView(
            label=self.label,
            url=url,
            name=status.name,
            state=status.state,
            phase=status.phase,
            paused=status.paused,
            connector=status.connector_class or "",
            uptime_s=status.uptime_s,
            lag=position.lag if position else None,
            lag_unit=position.lag_unit if position else "",
            caught_up=position.caught_up if position else None,
            committed_records=committed,
            events_per_s=self._rate(status, now, polled),
            sink=dict(status.sink),
            tasks=tasks,
            error=error,
            fix=fix_for(error or status.cause),
            snapshots=_with_task_estimates(self._snapshots.views(), status),
            notifications=tuple(reversed(self._recent)),
            observed_at=now,
            status_health=status.health,
            cause=status.cause,
            retrying=min(retries, key=lambda r: r.since_ms or 0) if retries else None,
        )

    def _rate(self, status: InstanceStatus, now: float, polled: int) -> float | None:
        """Records read from the source per second (committed ones move in steps, at each offset
        flush, so they would show bursts and zeros)."""
        last, self._last_count = self._last_count, (status.run_id, now, polled)
        if last is not None and last[0] == status.run_id and now > last[1]:
            return max(0.0, (polled - last[2]) / (now - last[1]))
        if status.uptime_s:  # the first look, or a new run: the average since it started
            return polled / status.uptime_s
        return None
