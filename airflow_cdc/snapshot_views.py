"""Snapshots as a person watching them sees them, folded from Debezium's notifications
(STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED, PAUSED/RESUMED, COMPLETED/ABORTED, a signal's
REJECTED), keyed by the signal id every one of them carries. Plain data for ``monitoring``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_cdc.engine.notifications import INITIAL, SIGNAL, Notification
from airflow_cdc.engine.server.models import InstanceStatus

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
