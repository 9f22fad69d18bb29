"""What the sensors judge, as plain data without I/O or Airflow: a snapshot's notifications
(:class:`SnapshotWatch`) and an instance's positions (:class:`OffsetGoal`). The triggers feed
them the control API's answers; unit tests feed them recorded ones.

**A snapshot** is followed by its signal's id, which every notification about it carries. With
several databases (``database.names``) one signal starts one STARTED ... COMPLETED sequence per
task that captures a table it names, all under the same id; each sequence ends on its own. The
watch counts them: the snapshot is complete when at least one sequence completed and none is
open. A task that has not read the signal yet cannot be seen, so unless as many sequences
started as the instance has tasks, the watch waits ``settle`` seconds after the last one ended
for another STARTED (the engine routes a signal to every task concerned at once, and each reads
its share after every poll, so one task finishing a whole snapshot before another starts is
rare; the engine does not say how many tasks a signal went to).

**Debezium renames a running snapshot.** A second ``execute-snapshot`` while one runs adds its
tables to the running one, and Debezium then reports the whole snapshot under the *second*
signal's id (``AbstractIncrementalSnapshotContext.addDataCollectionNamesToSnapshot`` overwrites
its correlation id; no STARTED for it), and so does the embedded engine. So once the
watch has seen its snapshot start, an incremental snapshot's notification under another id that
names one of its tables is its snapshot's continuation: that id is followed too.

It fails at once on ABORTED, on a TABLE_SCAN_COMPLETED whose status is not accepted, or on the
signal's REJECTED; and after ``stall_timeout`` seconds without a new notification about the
snapshot (measured on this side's clock from the watch's start, so a skewed engine clock does
not matter; a PAUSED snapshot does not stall until it is RESUMED).

**While the instance retries** a fault (health RETRYING: a lost connection, a broker away) the
waits go on: it recovers on its own. A wait that ends meanwhile (a stall, a timeout) names the
cause retried (:func:`retry_note`), since that is what to look at.

**Offsets**: ``OffsetGoal`` is one of ``None`` (every task caught up with the source at the
moment of a check), ``"current"`` (every task's committed offset reached the position its
source stood at when the goal was fixed: the first answer that names one for every task), or a
position as the source writes it, passed through to the engine's codec (the sensor never
parses or compares positions itself).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_cdc.backends import InstancePosition, InstanceStatus, TaskPosition
from airflow_cdc.engine.health import RETRYING
from airflow_cdc.engine.notifications import INCREMENTAL, SIGNAL, Notification, NotificationPage
from airflow_cdc.engine.retry import Retrying
from airflow_cdc.engine.snapshots.chunks import EMPTY, SUCCEEDED

#: The default of ``accept_statuses``: any other table status fails the snapshot. An empty table
#: (or an empty filtered window) was read completely; the other statuses mean rows were not read.
ACCEPTED_STATUSES: tuple[str, ...] = (SUCCEEDED, EMPTY)
CURRENT = "current"


def tables_named(notification: Notification) -> set[str]:
    """The tables an incremental snapshot's notification names (being read, or scanned)."""
    data = notification.additional_data
    named = {t.strip() for t in str(data.get("data_collections") or "").split(",") if t.strip()}
    named |= {str(data[key]) for key in ("data_collection", "scanned_collection") if data.get(key)}
    return named


def retry_note(status: InstanceStatus) -> str:
    """``the instance is RETRYING since 12:00:03 UTC (attempt 7): task shop-0 poll: ...``, or ""
    when it does not retry."""
    if status.health != RETRYING:
        return ""
    sink = Retrying.from_json(status.sink.get("retrying"))
    retries = [t.retrying for t in status.tasks if t.retrying is not None] + ([sink] if sink else [])
    oldest = min(retries, key=lambda r: r.since_ms or 0, default=None)
    since = ""
    if oldest is not None and oldest.since_ms:
        since = f" since {datetime.fromtimestamp(oldest.since_ms / 1000, UTC):%H:%M:%S} UTC"
        since += f" (attempt {oldest.attempt})" if oldest.attempt else ""
    return f"the instance is RETRYING{since}: {status.cause or 'no cause given'}"


@dataclass(frozen=True)
class Verdict:
    """The end of a wait: ``success`` or ``failed``, and why."""

    status: str
    message: str

    @property
    def succeeded(self) -> bool:
        return self.status == "success"


@dataclass
class SnapshotWatch:
    """Follows the notifications of the snapshot of ``signal_id`` (see the module)."""

    signal_id: str
    stall_timeout: float
    accept_statuses: Sequence[str] = ACCEPTED_STATUSES
    #: How many tasks the instance has (None: unknown): as many STARTED as tasks ends the wait at once.
    tasks: int | None = None
    settle: float = 2.0
    clock: Callable[[], float] = time.monotonic
    started: int = 0
    completed: int = 0
    aborted: int = 0
    paused: bool = False
    #: The TABLE_SCAN_COMPLETED notifications seen, for the rows per table.
    scans: list[Notification] = field(default_factory=list)
    failure: str | None = None
    #: The tables its notifications named; the ids its snapshot continued under (Debezium's rename).
    tables: set[str] = field(default_factory=set)
    aliases: set[str] = field(default_factory=set)
    #: A notification of its snapshot running (progress, a table scanned) seen under its id or an
    #: alias: without a STARTED of its own, its signal joined a snapshot already running.
    seen_running: bool = False
    _last_seen: float = field(init=False)

    def __post_init__(self) -> None:
        self._last_seen = self.clock()
        self._announced: set[str] = set()

    def feed(self, page: NotificationPage) -> list[str]:
        """Take a page of notifications; what to log about the snapshot's progress."""
        lines: list[str] = []
        if page.reset:
            lines.append(
                f"the instance no longer knew the notification cursor: reading every notification it keeps again "
                f"(run {page.run_id})"
            )
            self._forget()
        for notification in page.notifications:
            if self._concerns(notification):
                lines.extend(self._take(notification))
        return lines

    def verdict(self) -> Verdict | None:
        """``success``, ``failed``, or None while the snapshot goes on."""
        now = self.clock()
        if self.failure is not None:
            return Verdict("failed", self.failure)
        if self.paused:  # a paused snapshot is waiting for its RESUMED, not stalled
            self._last_seen = now
        open_sequences = max(0, self.started - self.completed - self.aborted)
        if self.completed and not open_sequences:
            every_task = self.tasks is not None and self.started >= self.tasks
            if every_task or now - self._last_seen >= self.settle:
                return Verdict("success", f"snapshot {self.signal_id} completed: {self.rows_text()}")
            return None
        quiet = now - self._last_seen
        if quiet >= self.stall_timeout:
            where = "it never started" if not self.started else f"{self.started} task(s) started it"
            return Verdict(
                "failed",
                f"snapshot {self.signal_id}: no progress for {quiet:.0f}s (stall_timeout {self.stall_timeout:.0f}s; "
                f"{where}, {self.completed} completed). Is the instance streaming, and did a later execute-snapshot "
                "join it before this wait saw it start (it is then reported under that signal's id)? Raise "
                "stall_timeout for slow tables",
            )
        return None

    def rows_text(self) -> str:
        rows: dict[str, int] = {}
        for scan in self.scans:
            table = scan.additional_data.get("scanned_collection") or scan.additional_data.get("data_collection", "")
            rows[table] = rows.get(table, 0) + int(scan.additional_data.get("total_rows_scanned") or 0)
        return ", ".join(f"{table} {count} rows" for table, count in sorted(rows.items())) or "no table scanned"

    # -- one notification ----------------------------------------------------------------------
    def _concerns(self, notification: Notification) -> bool:
        if notification.id == self.signal_id or notification.id in self.aliases:
            return True
        if (
            self.tables
            and self._open()
            and notification.id
            and notification.aggregate_type == INCREMENTAL
            and self.tables & tables_named(notification)
        ):
            self.aliases.add(notification.id)  # Debezium goes on under the id of the signal that joined
            return True
        # A rejection names the signal in its data as well (its id is the signal's when it has one).
        return notification.aggregate_type == SIGNAL and notification.additional_data.get("signal_id") == self.signal_id

    def _open(self) -> bool:
        """Whether its snapshot is under way: started and not ended; or, for a signal that joined
        a running snapshot (no STARTED of its own), seen running and not ended. Another signal
        joining later renames it again (a chain of joins): only an open snapshot is followed."""
        if self.started:
            return self.started > self.completed + self.aborted
        return self.seen_running and not (self.completed or self.aborted)

    def _take(self, notification: Notification) -> list[str]:
        self._last_seen = self.clock()
        data = notification.additional_data
        kind = notification.type
        if kind == "REJECTED":
            self.failure = f"the instance rejected signal {self.signal_id}: {data.get('problem') or data}"
        elif kind == "STARTED":
            self.started += 1
            if notification.id == self.signal_id:
                self.tables |= tables_named(notification)
            return [
                f"snapshot {self.signal_id} started ({notification.aggregate_type}): {data.get('data_collections')}"
            ]
        elif kind == "IN_PROGRESS":
            self._running(notification)
            if notification.id in self.aliases and notification.id not in self._announced:
                self._announced.add(notification.id)
                return [
                    f"snapshot {self.signal_id} goes on under signal {notification.id}, which added tables to it "
                    "(Debezium reports a snapshot under the last signal's id)",
                    _progress_line(self.signal_id, data),
                ]
            return [_progress_line(self.signal_id, data)]
        elif kind == "TABLE_SCAN_COMPLETED":
            return self._scanned(notification)
        elif kind in ("PAUSED", "RESUMED"):
            self.paused = kind == "PAUSED"
            return [f"snapshot {self.signal_id} {kind.lower()}"]
        elif kind == "COMPLETED":
            self.completed += 1
            total = data.get("total_rows_scanned")
            return [f"snapshot {self.signal_id}: a task completed it" + (f" ({total} rows)" if total else "")]
        elif kind == "ABORTED":
            self.aborted += 1
            self.failure = (
                f"snapshot {self.signal_id} was ABORTED (a stop-snapshot signal, or the task stopped): "
                f"{self.rows_text()} before it; trigger it again"
            )
        return []

    def _running(self, notification: Notification) -> None:
        if notification.aggregate_type == INCREMENTAL:
            self.seen_running = True
            self.tables |= tables_named(notification)

    def _scanned(self, notification: Notification) -> list[str]:
        self._running(notification)
        self.scans.append(notification)
        data = notification.additional_data
        table = data.get("scanned_collection") or data.get("data_collection")
        status = data.get("status", "")
        if status not in self.accept_statuses and self.failure is None:
            self.failure = (
                f"snapshot {self.signal_id}: table {table} ended with status {status} "
                f"({_STATUS_HINTS.get(status, 'see the instance log')}); accepted: {', '.join(self.accept_statuses)}"
            )
        return [f"snapshot {self.signal_id}: {table} scanned, {data.get('total_rows_scanned', '?')} rows ({status})"]

    def _forget(self) -> None:
        self.tables, self.aliases, self._announced = set(), set(), set()
        self.seen_running = False
        self.started = self.completed = self.aborted = 0
        self.paused = False
        self.scans = []
        self.failure = None


_STATUS_HINTS = {
    "EMPTY": "no row matched: an empty table, or a filter that selects nothing; accept_statuses can allow EMPTY",
    "NO_PRIMARY_KEY": "the table has no primary key: give the snapshot a surrogate_key",
    "SKIPPED": "it left the snapshot: a stop-snapshot signal named it",
    "SQL_EXCEPTION": "the database refused the table's query: a bad filter, or a table dropped meanwhile",
    "UNKNOWN_SCHEMA": "the table is not captured, or its schema is unknown to the instance",
}


def _progress_line(signal_id: str, data: Any) -> str:
    rows, estimate, eta = data.get("rows_scanned"), data.get("estimated_total_rows"), data.get("eta_seconds")
    line = f"snapshot {signal_id}: {data.get('current_collection_in_progress') or '?'}"
    if rows:
        line += f", {rows} of ~{estimate or '?'} rows"
    if eta:
        line += f", ETA {eta}s"
    return line


# -- offsets -----------------------------------------------------------------------------------
@dataclass
class OffsetGoal:
    """Whether an instance's committed offsets reached ``target`` (see the module)."""

    target: str | None
    #: ``"current"``: each task's target, fixed by :meth:`fix_current`.
    per_task: dict[str, str] = field(default_factory=dict)

    @property
    def fixed(self) -> bool:
        """Whether the positions to ask the engine about are known."""
        return self.target != CURRENT or bool(self.per_task)

    def fix_current(self, position: InstancePosition) -> bool:
        """For ``"current"``: take each task's current position, once every task has one."""
        if not position.tasks or any(t.current is None for t in position.tasks):
            return False
        self.per_task = {t.task: str(t.current) for t in position.tasks}
        return True

    def targets(self) -> Sequence[str | None]:
        """The ``target`` of each ``GET /position`` to ask (None: no target, only caught_up)."""
        if self.target == CURRENT:
            return [*sorted(set(self.per_task.values()))]
        return [self.target]

    def judge(self, answers: Iterable[InstancePosition]) -> Verdict | None:
        """The answers to :meth:`targets`' questions, in order: success, failed, or None."""
        answers = list(answers)
        for answer in answers:
            failed = [t for t in answer.tasks if t.phase == "failed"] if answer.tasks else []
            if answer.phase == "failed" or failed:
                names = ", ".join(t.task for t in failed) or "the instance"
                return Verdict("failed", f"{names} failed: see the instance's status and log, mend it and restart it")
        if self.target is None:
            done = bool(answers) and answers[0].caught_up is True
        elif self.target == CURRENT:
            reached = {
                t.task: t.reached
                for target, answer in zip(self.targets(), answers, strict=True)
                for t in answer.tasks
                if self.per_task.get(t.task) == target
            }
            done = set(reached) == set(self.per_task) and all(reached.values())
        else:
            done = bool(answers) and answers[0].reached is True
        if not done:
            return None
        return Verdict("success", f"committed offsets reached {self.describe()}")

    def describe(self) -> str:
        if self.target is None:
            return "the source's current position (caught up)"
        if self.target == CURRENT:
            return "the source's position when the sensor started: " + ", ".join(
                f"{task} {position}" for task, position in sorted(self.per_task.items())
            )
        return f"position {self.target}"

    def waiting_line(self, answers: Sequence[InstancePosition]) -> str:
        tasks = [t for answer in answers[:1] for t in answer.tasks]
        return "waiting for " + self.describe() + ": " + ("; ".join(_task_line(t) for t in tasks) or "no task yet")


def _task_line(task: TaskPosition) -> str:
    return f"{task.task} {task.phase}, committed {task.committed}, current {task.current}, lag {task.lag}"


def positions_summary(goal: OffsetGoal, answers: Sequence[InstancePosition]) -> list[dict[str, Any]]:
    """Each task's committed position (JSON), for the sensor's XCom."""
    tasks = [t for answer in answers[:1] for t in answer.tasks]
    return [
        {
            "task": t.task,
            "partition": dict(t.partition) if t.partition else None,
            "committed": t.committed,
            "current": t.current,
            "target": goal.per_task.get(t.task) if goal.target == CURRENT else goal.target,
        }
        for t in tasks
    ]
