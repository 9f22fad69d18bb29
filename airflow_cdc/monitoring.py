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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.notifications import INITIAL, SIGNAL, Notification, NotificationPage
from airflow_cdc.engine.server.models import InstanceStatus

if TYPE_CHECKING:
    from airflow_cdc.backends import EngineBackend

#: Notifications a monitor keeps for "recent notifications" (the instance keeps many more).
RECENT = 50
#: Snapshots a monitor keeps: the running ones and the latest ended ones.
SNAPSHOTS = 20
RUNNING, PAUSED, COMPLETED = "running", "paused", "completed"
ABORTED, REJECTED, FAILED = "aborted", "rejected", "failed"
#: Table statuses that do not make a snapshot "failed": every row was read, or a person took the
#: table out with a stop-snapshot signal (SKIPPED: asked for, so shown as a note, not a failure).
GOOD_TABLE_STATUSES = ("SUCCEEDED", "EMPTY", "SKIPPED")


@dataclass
class TableScan:
    table: str
    rows: int
    status: str


@dataclass
class SnapshotView:
    """One snapshot, as its notifications tell it."""

    id: str
    kind: str
    state: str = RUNNING
    tables: list[str] = field(default_factory=list)
    current_table: str = ""
    last_key: str = ""
    max_key: str = ""
    rows_scanned: int = 0
    estimated_rows: int | None = None
    eta_seconds: int | None = None
    scanned: list[TableScan] = field(default_factory=list)
    started_ms: int | None = None
    updated_ms: int | None = None
    problem: str | None = None

    @property
    def percent(self) -> float | None:
        """Rows scanned of the estimate, 0-100 (100 once completed; None without an estimate)."""
        if self.state == COMPLETED:
            return 100.0
        if not self.estimated_rows:
            return None
        return min(100.0, 100.0 * self.rows_scanned / self.estimated_rows)

    @property
    def active(self) -> bool:
        return self.state in (RUNNING, PAUSED)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "tables": list(self.tables),
            "current_table": self.current_table,
            "last_key": self.last_key,
            "max_key": self.max_key,
            "rows_scanned": self.rows_scanned,
            "estimated_rows": self.estimated_rows,
            "eta_seconds": self.eta_seconds,
            "percent": None if self.percent is None else round(self.percent, 1),
            "scanned": [{"table": s.table, "rows": s.rows, "status": s.status} for s in self.scanned],
            "started_ms": self.started_ms,
            "updated_ms": self.updated_ms,
            "problem": self.problem,
        }


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

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


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

    @property
    def health(self) -> str:
        """One word for the badge: ``unreachable``, ``failed``, ``paused``, ``running``,
        ``stopped`` or ``starting``."""
        if not self.reachable:
            return "unreachable"
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


# -- snapshots from notifications ----------------------------------------------------------------


class SnapshotFold:
    """Snapshots folded from notifications in the order the instance published them."""

    def __init__(self, keep: int = SNAPSHOTS) -> None:
        self.keep = keep
        self._by_id: dict[str, SnapshotView] = {}
        #: The initial snapshot's id (its STARTED notification's) per connector name.
        self._initial: dict[str, str] = {}

    def feed(self, notifications: Iterable[Notification]) -> None:
        for notification in notifications:
            self._take(notification)
        ended = [s for s in self._by_id.values() if not s.active]
        for old in ended[: max(0, len(self._by_id) - self.keep)]:
            del self._by_id[old.id]

    def views(self) -> tuple[SnapshotView, ...]:
        """Running and paused snapshots first, then the rest, newest first (copies)."""
        ordered = sorted(self._by_id.values(), key=lambda s: (not s.active, -(s.started_ms or 0)))
        return tuple(replace(s, tables=list(s.tables), scanned=list(s.scanned)) for s in ordered)

    def _take(self, notification: Notification) -> None:
        if notification.aggregate_type == SIGNAL:
            if notification.type == "REJECTED":
                self._rejected(notification)
            return
        if "Snapshot" not in notification.aggregate_type:
            return
        snapshot_id = self._snapshot_id(notification)
        if snapshot_id is None:
            return
        view = self._by_id.get(snapshot_id)
        if view is None:
            view = self._by_id[snapshot_id] = SnapshotView(snapshot_id, notification.aggregate_type)
            view.started_ms = _ms(notification)
        view.updated_ms = _ms(notification)
        step = _STEPS.get(notification.type)
        if step is not None:
            step(view, notification.additional_data)

    def _snapshot_id(self, notification: Notification) -> str | None:
        """The snapshot a notification tells about: the signal's id, which all of its notifications
        carry; but each ``Initial Snapshot`` notification has an id of its own (as Debezium's), so
        those belong to the one their connector's last STARTED began. SKIPPED is no snapshot."""
        if notification.aggregate_type != INITIAL:
            return notification.id
        connector = notification.additional_data.get("connector_name", "")
        if notification.type == "STARTED":
            self._initial[connector] = notification.id
        elif notification.type == "SKIPPED":
            return None
        return self._initial.get(connector)

    def _rejected(self, notification: Notification) -> None:
        data = notification.additional_data
        signal_id = data.get("signal_id") or notification.id
        view = self._by_id.setdefault(signal_id, SnapshotView(signal_id, SIGNAL))
        view.state, view.problem = REJECTED, data.get("problem") or "the instance rejected the signal"
        view.started_ms = view.started_ms or _ms(notification)


def _started(view: SnapshotView, data: Mapping[str, str]) -> None:
    view.state = RUNNING
    view.tables = _split(data.get("data_collections"))


def _in_progress(view: SnapshotView, data: Mapping[str, str]) -> None:
    view.tables = _split(data.get("data_collections")) or view.tables
    view.current_table = data.get("current_collection_in_progress") or view.current_table
    view.last_key, view.max_key = data.get("last_processed_key", ""), data.get("maximum_key", "")
    view.rows_scanned = _int(data.get("rows_scanned")) or view.rows_scanned
    view.estimated_rows = _int(data.get("estimated_total_rows")) or view.estimated_rows
    view.eta_seconds = _int(data.get("eta_seconds"))


def _table_scanned(view: SnapshotView, data: Mapping[str, str]) -> None:
    table = data.get("scanned_collection") or data.get("data_collection") or "?"
    status = data.get("status", "")
    view.scanned.append(TableScan(table, _int(data.get("total_rows_scanned")) or 0, status))
    # IN_PROGRESS does not follow a table's last chunk, and the initial snapshot's counts no rows.
    view.rows_scanned = max(view.rows_scanned, sum(s.rows for s in view.scanned))
    if view.current_table == table:
        view.current_table = ""
    if status not in GOOD_TABLE_STATUSES and view.problem is None:
        view.problem = f"table {table} ended with status {status}"


def _completed(view: SnapshotView, data: Mapping[str, str]) -> None:
    view.state = FAILED if view.problem else COMPLETED
    scanned = max(view.rows_scanned, sum(s.rows for s in view.scanned))
    view.rows_scanned = _int(data.get("total_rows_scanned")) or scanned
    view.current_table, view.eta_seconds = "", None


def _aborted(view: SnapshotView, data: Mapping[str, str]) -> None:
    view.state, view.eta_seconds = ABORTED, None
    view.problem = view.problem or "aborted: a stop-snapshot signal, or its task stopped"


def _paused(view: SnapshotView, data: Mapping[str, str]) -> None:
    view.state = PAUSED


def _resumed(view: SnapshotView, data: Mapping[str, str]) -> None:
    view.state = RUNNING


_STEPS: dict[str, Callable[[SnapshotView, Mapping[str, str]], None]] = {
    "STARTED": _started,
    "IN_PROGRESS": _in_progress,
    "TABLE_SCAN_COMPLETED": _table_scanned,
    "PAUSED": _paused,
    "RESUMED": _resumed,
    "COMPLETED": _completed,
    "ABORTED": _aborted,
}


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _int(text: str | None) -> int | None:
    try:
        return int(str(text))
    except (TypeError, ValueError):
        return None


def _ms(notification: Notification) -> int | None:
    return _int(notification.timestamp)


def _with_task_estimates(views: tuple[SnapshotView, ...], status: InstanceStatus) -> tuple[SnapshotView, ...]:
    """A running snapshot without an estimate yet (its first IN_PROGRESS comes after its first
    chunk) takes the one its tasks report (``snapshot_total_rows``), when it is the only one."""
    active = [view for view in views if view.active]
    estimate = sum(int(task.source.get("snapshot_total_rows") or 0) for task in status.tasks)
    if len(active) == 1 and active[0].estimated_rows is None and estimate:
        active[0].estimated_rows = estimate
    return views


# -- errors and what to do about them -------------------------------------------------------------

#: (substring of an error, what to do): the engine's errors mostly say it themselves; these are
#: the ones whose cause lies outside the instance.
FIXES: tuple[tuple[str, str], ...] = (
    ("wal_level", "set wal_level = logical in postgresql.conf and restart PostgreSQL"),
    ("replication slot", "drop the stale slot (pg_drop_replication_slot) or give the instance its own slot.name"),
    ("password authentication failed", "check database.user / database.password of the instance's config"),
    ("Connection refused", "is the database (or broker) up and reachable from the instance's host?"),
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

    def __init__(self, label: str, client: Callable[[], EngineBackend], *, recent: int = RECENT) -> None:
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
            )
            for task in status.tasks
        )
        error = status.error or next((task.error for task in status.tasks if task.error), None)
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
            fix=fix_for(error),
            snapshots=_with_task_estimates(self._snapshots.views(), status),
            notifications=tuple(reversed(self._recent)),
            observed_at=now,
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
