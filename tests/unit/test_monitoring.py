"""What a watcher sees of an instance: snapshots folded from the notifications a real instance
published (``data/notifications_recorded.json``, from ``data/record_notifications.py``), and a
Monitor's events/s, cursor and unreachable instances, against a replayed control API."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from airflow_cdc import monitoring
from airflow_cdc.engine.notifications import Notification, NotificationPage
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.models import InstanceStatus, TaskStatus
from airflow_cdc.monitoring import Monitor, SnapshotFold, SnapshotView

RECORDED = [
    Notification.from_dict(n)
    for n in json.loads((Path(__file__).parent / "data" / "notifications_recorded.json").read_text())
]


def folded(notifications: list[Notification], keep: int = monitoring.SNAPSHOTS) -> dict[str, SnapshotView]:
    fold = SnapshotFold(keep)
    fold.feed(notifications)
    return {view.id: view for view in fold.views()}


def up_to(predicate: Callable[[Notification], bool]) -> list[Notification]:
    """The recording up to and with the first notification ``predicate`` accepts."""
    index = next(i for i, n in enumerate(RECORDED) if predicate(n))
    return RECORDED[: index + 1]


def first(kind: str, snapshot_id: str, nth: int = 1) -> Callable[[Notification], bool]:
    """Accepts the ``nth`` notification of ``kind`` about ``snapshot_id``."""
    seen = [0]

    def accept(n: Notification) -> bool:
        if n.id == snapshot_id and n.type == kind:
            seen[0] += 1
        return seen[0] == nth

    return accept


def test_the_recorded_run_folds_into_one_view_per_snapshot() -> None:
    views = folded(RECORDED)
    initial = next(v for v in views.values() if v.kind == "Initial Snapshot")
    assert set(views) == {initial.id, "snap-1", "snap-2", "snap-3", "bad-1"}
    assert (initial.state, initial.rows_scanned, initial.problem) == ("completed", 1010, None)
    assert initial.tables == ["public.debezium_signal", "public.empty", "public.nopk", "public.t"]
    assert [(s.table, s.rows, s.status) for s in initial.scanned][-2:] == [
        ("public.nopk", 10, "SUCCEEDED"),
        ("public.t", 1000, "SUCCEEDED"),
    ]
    snap_1 = views["snap-1"]
    assert (snap_1.kind, snap_1.state, snap_1.rows_scanned, snap_1.percent) == (
        "Incremental Snapshot",
        "completed",
        1000,
        100.0,
    )
    assert (snap_1.tables, snap_1.current_table, snap_1.eta_seconds, snap_1.problem) == (
        ["public.empty", "public.t"],
        "",
        None,
        None,
    )
    assert [(s.table, s.rows, s.status) for s in snap_1.scanned] == [
        ("public.empty", 0, "EMPTY"),
        ("public.t", 1000, "SUCCEEDED"),
    ]
    assert (views["snap-2"].state, views["snap-2"].problem) == (
        "failed",
        "table public.nopk ended with status NO_PRIMARY_KEY",
    )
    assert views["snap-3"].state == "aborted" and "aborted" in str(views["snap-3"].problem)
    assert (views["bad-1"].state, views["bad-1"].kind) == ("rejected", "Signal")
    assert "no captured table matches ['public.nope']" in str(views["bad-1"].problem)
    assert not any(v.active for v in views.values())


def test_a_snapshot_as_it_goes_paused_resumed_in_progress_each_table_completed() -> None:
    paused = folded(up_to(first("PAUSED", "snap-1")))["snap-1"]
    assert (paused.state, paused.active, paused.rows_scanned, paused.estimated_rows) == ("paused", True, 0, None)
    assert paused.tables == ["public.empty", "public.t"] and paused.percent is None
    assert folded(up_to(first("RESUMED", "snap-1")))["snap-1"].state == "running"

    going = folded(up_to(first("IN_PROGRESS", "snap-1")))["snap-1"]
    assert (going.state, going.current_table, going.last_key, going.max_key) == ("running", "public.t", "300", "1000")
    assert (going.rows_scanned, going.estimated_rows, going.eta_seconds, going.percent) == (300, 1000, 1, 30.0)
    assert [(s.table, s.status) for s in going.scanned] == [("public.empty", "EMPTY")]

    # No IN_PROGRESS follows a table's last chunk: its TABLE_SCAN_COMPLETED counts the rest.
    read = folded(up_to(first("TABLE_SCAN_COMPLETED", "snap-1", nth=2)))["snap-1"]
    assert (read.state, read.rows_scanned, read.current_table, read.percent) == ("running", 1000, "", 100.0)


def test_the_initial_snapshot_is_one_snapshot_while_it_runs_and_skipped_is_none() -> None:
    def initial(notifications: list[Notification]) -> list[SnapshotView]:
        return [v for v in folded(notifications).values() if v.kind == "Initial Snapshot"]

    reading_t = up_to(
        lambda n: n.type == "IN_PROGRESS" and n.additional_data.get("current_collection_in_progress") == "public.t"
    )
    [view] = initial(reading_t)
    assert (view.state, view.current_table, view.rows_scanned) == ("running", "public.t", 10)
    assert view.id == RECORDED[0].id  # its STARTED's
    skipped = Notification("Initial Snapshot", "SKIPPED", {"connector_name": "shop"})
    assert initial([skipped]) == []
    assert len(initial([*RECORDED, skipped])) == 1


def test_a_rejected_signal_and_table_problems() -> None:
    rejected = Notification("Signal", "REJECTED", {"signal_id": "s-9", "problem": "unknown signal type"}, id="s-9")
    assert (folded([rejected])["s-9"].state, folded([rejected])["s-9"].problem) == ("rejected", "unknown signal type")
    skipped = [
        Notification("Incremental Snapshot", "STARTED", {"data_collections": "public.a, public.b"}, id="x"),
        Notification(
            "Incremental Snapshot",
            "TABLE_SCAN_COMPLETED",
            {"scanned_collection": "public.a", "status": "SQL_EXCEPTION"},
            id="x",
        ),
        Notification("Incremental Snapshot", "COMPLETED", {}, id="x"),
    ]
    assert (folded(skipped)["x"].state, folded(skipped)["x"].problem) == (
        "failed",
        "table public.a ended with status SQL_EXCEPTION",
    )
    blocking = [
        Notification("Blocking Snapshot", "STARTED", {"data_collections": "public.a"}, id="b"),
        Notification("Blocking Snapshot", "COMPLETED", {"total_rows_scanned": "42"}, id="b"),
    ]
    assert (folded(blocking)["b"].state, folded(blocking)["b"].rows_scanned) == ("completed", 42)


def test_running_snapshots_come_first_and_only_ended_ones_are_forgotten() -> None:
    def note(kind: str, snapshot_id: str, ms: int) -> Notification:
        return Notification("Incremental Snapshot", kind, {}, id=snapshot_id, timestamp=str(ms))

    notes = [note("STARTED", "running", 1), note("STARTED", "old", 2), note("COMPLETED", "old", 3)]
    notes += [note("STARTED", "new", 4), note("ABORTED", "new", 5), note("STARTED", "newest", 6)]
    notes += [note("COMPLETED", "newest", 7)]
    assert list(folded(notes, keep=2)) == ["running", "newest"]
    assert list(folded(notes)) == ["running", "newest", "new", "old"]


# -- Monitor -----------------------------------------------------------------------------------


class ReplayedInstance:
    """A control API answering from what the test sets; the requests it got."""

    def __init__(self) -> None:
        self.status = InstanceStatus("shop", "run-1", "POLLING_TASKS", "streaming", uptime_s=10.0)
        self.pages: list[NotificationPage] = []
        self.cursors: list[str | None] = []
        self.down = False

    def read(self, records: int, run_id: str = "run-1", uptime_s: float = 10.0) -> None:
        """The instance has polled ``records`` (and committed all but 5 of them)."""
        self.status = InstanceStatus(
            "shop",
            run_id,
            "POLLING_TASKS",
            "streaming",
            uptime_s=uptime_s,
            tasks=(TaskStatus("0", polled=records, committed_records=records - 5),),
        )

    def answer(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path == "/status":
            return httpx.Response(200, json=self.status.to_json())
        self.cursors.append(request.url.params.get("cursor"))
        page = self.pages.pop(0) if self.pages else NotificationPage(self.status.run_id, "run-1:99")
        return httpx.Response(200, json=page.to_json())

    def client(self) -> EngineClient:
        return EngineClient("http://engine:1", "token", transport=httpx.MockTransport(self.answer))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    now = [1000.0]
    monkeypatch.setattr(monitoring, "time", SimpleNamespace(time=lambda: now[0]))
    yield now


def test_events_per_second_is_the_polled_counts_slope_and_the_average_on_a_first_look(clock: list[float]) -> None:
    instance = ReplayedInstance()
    monitor = Monitor("shop", instance.client)
    instance.read(100, uptime_s=10.0)
    assert monitor.observe().events_per_s == 10.0  # 100 records in its 10 s
    clock[0] += 2
    instance.read(160, uptime_s=12.0)
    view = monitor.observe()
    assert (view.events_per_s, view.committed_records, view.observed_at) == (30.0, 155, 1002.0)
    clock[0] += 2
    instance.read(20, run_id="run-2", uptime_s=4.0)  # restarted: its counters start again
    assert monitor.observe().events_per_s == 5.0
    clock[0] += 1
    instance.read(20, run_id="run-2", uptime_s=5.0)
    assert monitor.observe().events_per_s == 0.0


def test_notifications_are_read_after_the_last_cursor_and_folded_across_pages(clock: list[float]) -> None:
    instance = ReplayedInstance()
    half = len(RECORDED) // 2
    instance.pages = [
        NotificationPage("run-1", "run-1:12", tuple(RECORDED[:half])),
        NotificationPage("run-1", "run-1:25", tuple(RECORDED[half:])),
    ]
    monitor = Monitor("shop", instance.client, recent=3)
    first_view = monitor.observe()
    assert any(s.id == "snap-1" and s.active for s in first_view.snapshots)
    view = monitor.observe()
    assert instance.cursors == [None, "run-1:12"]
    assert {s.id: s.state for s in view.snapshots}["snap-1"] == "completed"
    assert [n.id for n in view.notifications] == [n.id for n in reversed(RECORDED[-3:])]  # newest first


def test_an_unreachable_instance_is_a_view_saying_why_never_an_exception(clock: list[float]) -> None:
    instance = ReplayedInstance()
    monitor = Monitor("shop", instance.client)
    instance.down = True
    view = monitor.observe()
    assert (view.reachable, view.health, view.url) == (False, "unreachable", "http://engine:1")
    assert "GET http://engine:1/status" in str(view.problem) and "connection refused" in str(view.problem)
    instance.down = False
    assert monitor.observe().health == "running"

    def no_connection() -> EngineClient:
        raise KeyError("cdc_missing")

    broken = Monitor("cdc_missing", no_connection).observe()
    assert (broken.reachable, broken.problem) == (False, "KeyError: 'cdc_missing'")


def test_a_table_taken_out_by_stop_snapshot_does_not_fail_the_snapshot() -> None:
    from airflow_cdc.monitoring import COMPLETED, SnapshotFold

    fold = SnapshotFold()
    fold.feed(
        [
            Notification("Incremental Snapshot", "STARTED", {"data_collections": "public.a, public.b"}, id="s1"),
            Notification(
                "Incremental Snapshot",
                "TABLE_SCAN_COMPLETED",
                {"data_collection": "public.a", "total_rows_scanned": "10", "status": "SUCCEEDED"},
                id="s1",
            ),
            Notification(
                "Incremental Snapshot",
                "TABLE_SCAN_COMPLETED",
                {"data_collection": "public.b", "total_rows_scanned": "0", "status": "SKIPPED"},
                id="s1",
            ),
            Notification("Incremental Snapshot", "COMPLETED", {}, id="s1"),
        ]
    )
    (view,) = fold.views()
    assert view.state == COMPLETED and view.problem is None
    assert [(s.table, s.status) for s in view.scanned] == [("public.a", "SUCCEEDED"), ("public.b", "SKIPPED")]


def test_a_running_snapshot_without_an_estimate_takes_its_tasks_figure() -> None:
    from airflow_cdc.engine.server.models import InstanceStatus, TaskStatus
    from airflow_cdc.monitoring import SnapshotFold, _with_task_estimates

    fold = SnapshotFold()
    fold.feed([Notification("Incremental Snapshot", "STARTED", {"data_collections": "public.a"}, id="s1")])
    status = InstanceStatus(
        "shop", "run", "POLLING_TASKS", "snapshotting", tasks=(TaskStatus("t0", source={"snapshot_total_rows": 500}),)
    )
    (view,) = _with_task_estimates(fold.views(), status)
    assert view.estimated_rows == 500 and view.percent == 0.0
