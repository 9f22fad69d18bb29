"""The terminal's rendering of instances and snapshots (``airflow-cdc status`` / ``snapshot
watch``), on built views and on the snapshots of a recorded run, rendered to a recording
console; the two loops driven by scripted observations; the command line's own checks."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from dataclasses import replace

import pytest
from rich.console import Console, RenderableType

from airflow_cdc import cli, console
from airflow_cdc.monitoring import InstanceView, SnapshotView, TableScan, TaskView
from tests.unit.test_monitoring import RECORDED, folded

WIDTH = 120


def text(renderable: RenderableType, width: int = WIDTH) -> str:
    screen = Console(file=io.StringIO(), record=True, width=width, force_terminal=False, color_system=None)
    screen.print(renderable)
    return screen.export_text()


def line_of(rendered: str, start: str) -> str:
    """The rendered line that starts with ``start``."""
    return next(line for line in rendered.splitlines() if line.startswith(start))


def two_tables(**changes: object) -> SnapshotView:
    """public.orders read (1,500 rows), public.customers being read: 2,300 of ~5,000 rows."""
    view = SnapshotView(
        "snap-1",
        "Incremental Snapshot",
        tables=["public.orders", "public.customers"],
        current_table="public.customers",
        rows_scanned=2300,
        estimated_rows=5000,
        eta_seconds=12,
        scanned=[TableScan("public.orders", 1500, "SUCCEEDED")],
        started_ms=1_000,
        updated_ms=5_000,
    )
    return replace(view, **changes)  # type: ignore[arg-type]


RECORDED_SNAPSHOTS = folded(RECORDED)


def instance(*snapshots: SnapshotView, **changes: object) -> InstanceView:
    view = InstanceView(
        "shop",
        url="http://127.0.0.1:8765",
        name="shop-instance",
        state="POLLING_TASKS",
        phase="streaming",
        connector="io.debezium.connector.postgresql.PostgresConnector",
        uptime_s=125,
        lag=2048,
        lag_unit="bytes",
        caught_up=False,
        committed_records=12_345,
        events_per_s=345.67,
        tasks=(TaskView("shop-0", "streaming", "0/16B3748", "0/16B3F48", 2048, False, 12_400, 12_345, 55, None),),
        snapshots=snapshots,
        notifications=tuple(reversed(RECORDED[-5:])),
    )
    return replace(view, **changes)  # type: ignore[arg-type]


UNREACHABLE = InstanceView(
    "other", reachable=False, problem="instance 'other' is not running", fix="start it: airflow-cdc engine start"
)


# -- words and numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"), [(None, "-"), (0, "0s"), (42.4, "42s"), (125, "2m05s"), (3600 * 3 + 7 * 60, "3h07m")]
)
def test_durations(seconds: float | None, shown: str) -> None:
    assert console.duration(seconds) == shown


def test_lag_in_its_unit() -> None:
    assert console.lag_text(None, "bytes") == "-"
    assert console.lag_text(512, "bytes") == "512 B"
    assert console.lag_text(3 * 1024 * 1024 + 100, "bytes", caught_up=False) == "3.0 MiB"
    assert console.lag_text(0, "bytes", caught_up=True) == "0 B (caught up)"
    assert console.lag_text(12_000, "events") == "12,000 events"


def test_rates_keep_a_decimal_only_while_small() -> None:
    assert [console.rate(r) for r in (None, 0.25, 99.94, 345.67, 23_090.4)] == ["-", "0.2", "99.9", "346", "23,090"]


# -- snapshots ---------------------------------------------------------------------------------


def test_a_running_snapshot_a_bar_per_table_and_one_for_all_with_rows_of_the_estimate_and_eta() -> None:
    rendered = text(console.snapshot_progress(two_tables(), "shop"))
    assert rendered.splitlines()[0] == "snapshot snap-1 (Incremental Snapshot on shop) running"
    orders = line_of(rendered, "public.orders")
    assert "━" * console.BAR_WIDTH in orders and "1,500 rows" in orders and orders.rstrip().endswith("succeeded")
    customers = line_of(rendered, "public.customers")  # the last table: what is left of the estimate
    assert "800 of ~3,500 rows" in customers and customers.rstrip().endswith("reading")
    assert "━" * console.BAR_WIDTH not in customers
    overall = line_of(rendered, "all tables")
    assert "2,300 of ~5,000 rows, 46%, eta 12s" in overall and overall.rstrip().endswith("running")
    assert "problem" not in rendered


def test_a_table_that_is_not_the_last_has_no_estimate_of_its_own() -> None:
    view = two_tables(
        tables=["public.orders", "public.customers", "public.items"], scanned=[], current_table="public.orders"
    )
    rendered = text(console.snapshot_progress(view))
    orders = line_of(rendered, "public.orders")
    assert "2,300 rows" in orders and "of ~" not in orders and orders.rstrip().endswith("reading")
    assert line_of(rendered, "public.items").rstrip().endswith("waiting")
    assert "2,300 of ~5,000 rows" in line_of(rendered, "all tables")


def test_a_paused_snapshot_says_so_and_gives_no_eta() -> None:
    rendered = text(console.snapshot_progress(two_tables(state="paused")))
    assert line_of(rendered, "public.customers").rstrip().endswith("paused")
    assert "eta" not in rendered and "2,300 of ~5,000 rows, 46%" in line_of(rendered, "all tables")
    assert (
        console.snapshot_line(two_tables(state="paused")) == "snap-1 paused public.customers 2,300 of ~5,000 rows, 46%"
    )


def test_the_recorded_snapshots_as_they_ended() -> None:
    completed = text(console.snapshot_progress(RECORDED_SNAPSHOTS["snap-1"]))
    assert "completed" in completed.splitlines()[0]
    assert "0 rows" in line_of(completed, "public.empty") and line_of(completed, "public.empty").rstrip().endswith(
        "empty"
    )
    assert "1,000 rows" in line_of(completed, "public.t")
    assert "━" * console.BAR_WIDTH in line_of(completed, "all tables")
    assert console.snapshot_exit_code(RECORDED_SNAPSHOTS["snap-1"]) == 0

    failed = text(console.snapshot_progress(RECORDED_SNAPSHOTS["snap-2"]))
    assert line_of(failed, "public.nopk").rstrip().endswith("no_primary_key")
    assert "problem: table public.nopk ended with status NO_PRIMARY_KEY" in failed
    assert console.snapshot_exit_code(RECORDED_SNAPSHOTS["snap-2"]) == 1

    assert console.snapshot_line(RECORDED_SNAPSHOTS["snap-3"]).startswith("snap-3 aborted 0 rows")
    aborted = text(console.snapshot_progress(RECORDED_SNAPSHOTS["snap-3"]))
    assert line_of(aborted, "public.t").rstrip().endswith("not read")
    assert "problem: aborted: a stop-snapshot signal" in aborted
    assert console.snapshot_exit_code(RECORDED_SNAPSHOTS["snap-3"]) == 1
    assert console.snapshot_line(RECORDED_SNAPSHOTS["bad-1"]) == (
        "bad-1 rejected: signal 'bad-1': no captured table matches ['public.nope'] "
        "(captured: public.empty, public.nopk, public.t)"
    )
    initial = next(v for v in RECORDED_SNAPSHOTS.values() if v.kind == "Initial Snapshot")
    assert console.snapshot_line(initial).startswith("initial completed 1,010 rows in ")


def test_which_snapshot_is_followed() -> None:
    running = two_tables(id="running")
    ended = RECORDED_SNAPSHOTS["snap-1"]
    assert console.pick_snapshot(instance(running, ended), None) is running
    assert console.pick_snapshot(instance(ended), None) is ended
    assert console.pick_snapshot(instance(running, ended), "snap-1") is ended
    assert console.pick_snapshot(instance(running), "later") is None
    assert console.pick_snapshot(instance(), None) is None


# -- instances ---------------------------------------------------------------------------------


def test_the_table_of_instances_and_what_is_wrong_with_each_below_it() -> None:
    failed = instance(
        label="orders", error='replication slot "x" is active for PID 4242', fix="drop the stale slot", snapshots=()
    )
    rendered = text(console.instances_table([instance(two_tables()), UNREACHABLE, failed]), width=100)
    header, shop, other, orders = rendered.splitlines()[:4]
    assert header.split() == ["instance", "health", "phase", "lag", "events/s", "committed", "snapshot"]
    assert shop.split() == [
        "shop",
        "running",
        "streaming",
        "2.0",
        "KiB",
        "346",
        "12,345",
        "snap-1",
        "46%",
        "eta",
        "12s",
    ]
    assert other.split() == ["other", "unreachable", "-", "-", "-", "-"]
    assert orders.split()[:3] == ["orders", "failed", "streaming"]
    below = " ".join(rendered.split())
    assert "other: instance 'other' is not running (fix: start it: airflow-cdc engine start)" in below
    assert 'orders: replication slot "x" is active for PID 4242 (fix: drop the stale slot)' in below


def test_one_instance_in_detail() -> None:
    rendered = text(console.instance_details(instance(RECORDED_SNAPSHOTS["snap-1"])))
    lines = rendered.splitlines()
    assert lines[0] == "shop (shop-instance) running  POLLING_TASKS · streaming · PostgresConnector"
    assert lines[1].split("   ") == [
        "url http://127.0.0.1:8765",
        "uptime 2m05s",
        "lag 2.0 KiB",
        "346 events/s",
        "committed 12,345",
    ]
    assert line_of(rendered, "shop-0").split() == [
        "shop-0",
        "streaming",
        "0/16B3748",
        "0/16B3F48",
        "2.0",
        "KiB",
        "12,345",
        "55",
    ]
    assert "  snap-1 completed 1,000 rows in " in rendered
    scanned = next(line for line in lines if "TABLE_SCAN_COMPLETED" in line)
    assert scanned.split()[3:] == ["TABLE_SCAN_COMPLETED", "snap-2", "public.nopk", "0", "rows", "NO_PRIMARY_KEY"]
    rejected = next(line for line in lines if "Signal REJECTED" in line)
    assert rejected.split()[3:6] == ["bad-1", "signal", "'bad-1':"]
    assert text(console.instance_details(UNREACHABLE)).strip() == (
        "other unreachable: instance 'other' is not running (fix: start it: airflow-cdc engine start)"
    )


# -- the loops ---------------------------------------------------------------------------------


class Script:
    """Observations in turn (the last one again if asked for more); ``sleep`` counts the waits
    and can be made to raise KeyboardInterrupt, as Ctrl-C does."""

    def __init__(self, *views: InstanceView, interrupt_after: int | None = None) -> None:
        self.views = list(views)
        self.sleeps = 0
        self.interrupt_after = interrupt_after

    def observe(self) -> InstanceView:
        return self.views.pop(0) if len(self.views) > 1 else self.views[0]

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if self.interrupt_after is not None and self.sleeps >= self.interrupt_after:
            raise KeyboardInterrupt


@pytest.fixture
def log() -> Iterator[Console]:
    """A console that is no terminal (a pipe, a CI log): one line per change."""
    yield Console(file=io.StringIO(), record=True, width=WIDTH, force_terminal=False, color_system=None)


def follow(script: Script, screen: Console, snapshot_id: str | None = "snap-1") -> int:
    return console.follow_snapshot(
        script.observe, screen, label="shop", snapshot_id=snapshot_id, interval=0, sleep=script.sleep
    )


def test_snapshot_watch_in_a_log_one_line_per_change_then_the_tables_exit_0(log: Console) -> None:
    completed = RECORDED_SNAPSHOTS["snap-1"]
    paused = replace(completed, state="paused", rows_scanned=0, estimated_rows=None, scanned=[], current_table="")
    going = replace(completed, state="running", rows_scanned=300, estimated_rows=1000, eta_seconds=1, scanned=[])
    going = replace(going, current_table="public.t")
    script = Script(instance(), instance(paused), instance(paused), instance(going), instance(completed))
    assert follow(script, log) == 0
    lines = log.export_text().splitlines()
    assert lines[:4] == [
        "waiting for snapshot snap-1 on shop (Ctrl-C to leave)",
        "snap-1 paused 0 rows",
        "snap-1 running public.t 300 of ~1,000 rows, 30%, eta 1s",
        f"{console.snapshot_line(completed)}",
    ]
    assert lines[4] == "snapshot snap-1 (Incremental Snapshot on shop) completed"
    assert "1,000 rows" in line_of("\n".join(lines), "public.t") and script.sleeps == 4


@pytest.mark.parametrize("ending", ["snap-2", "snap-3", "bad-1"])
def test_snapshot_watch_exits_1_when_the_snapshot_failed_was_aborted_or_rejected(log: Console, ending: str) -> None:
    assert follow(Script(instance(RECORDED_SNAPSHOTS[ending])), log, ending) == 1
    assert log.export_text().splitlines()[0] == console.snapshot_line(RECORDED_SNAPSHOTS[ending])


def test_snapshot_watch_without_an_id_keeps_to_the_snapshot_it_began_with(log: Console) -> None:
    first = two_tables(id="first")
    second = two_tables(id="second")
    done = replace(first, state="completed", scanned=[], rows_scanned=5000)
    assert follow(Script(instance(first), instance(second, done)), log, None) == 0  # "second" runs on
    assert log.export_text().splitlines()[1].startswith("first completed 5,000 rows")


def test_snapshot_watch_of_an_instance_it_never_reached_exits_1_at_once(log: Console) -> None:
    script = Script(UNREACHABLE)
    assert follow(script, log) == 1 and script.sleeps == 0
    assert log.export_text().strip() == (
        "shop unreachable: instance 'other' is not running (fix: start it: airflow-cdc engine start)"
    )


def test_snapshot_watch_waits_for_an_instance_that_went_away_and_came_back(log: Console) -> None:
    script = Script(instance(two_tables()), UNREACHABLE, instance(RECORDED_SNAPSHOTS["snap-1"]))
    assert follow(script, log) == 0
    assert log.export_text().splitlines()[1].startswith("shop unreachable: ")


def test_ctrl_c_leaves_snapshot_watch_with_130_and_the_snapshot_goes_on(log: Console) -> None:
    assert follow(Script(instance(two_tables()), interrupt_after=3), log) == 130
    assert log.export_text().splitlines()[-1] == "stopped watching; the snapshot goes on"


def test_snapshot_watch_on_a_terminal_redraws_and_leaves_the_last_picture() -> None:
    terminal = Console(file=io.StringIO(), record=True, width=WIDTH, force_terminal=True, color_system=None)
    script = Script(instance(two_tables()), instance(RECORDED_SNAPSHOTS["snap-1"]))
    assert follow(script, terminal) == 0
    shown = terminal.export_text()
    assert "snapshot snap-1 (Incremental Snapshot on shop) completed" in shown
    assert "1,000 rows" in shown and "waiting for" not in shown


def test_status_of_one_instance_exits_1_when_it_cannot_be_reached(log: Console) -> None:
    assert console.show_status(lambda: [UNREACHABLE], log, single=True) == 1
    assert console.show_status(lambda: [instance()], log, single=True) == 0
    assert console.show_status(lambda: [UNREACHABLE, instance()], log, single=False) == 0  # the list: 0
    assert "other unreachable" in log.export_text()


def test_status_json_is_the_instance_view_and_a_list_without_name(log: Console) -> None:
    view = instance(RECORDED_SNAPSHOTS["snap-1"])
    console.show_status(lambda: [view], log, single=True, as_json=True)
    console.show_status(lambda: [view, UNREACHABLE], log, single=False, as_json=True)
    one, many = log.export_text().splitlines()
    assert json.loads(one) == json.loads(json.dumps(view.to_json()))
    assert [v["label"] for v in json.loads(many)] == ["shop", "other"]
    assert json.loads(one)["snapshots"][0]["scanned"][1] == {"table": "public.t", "rows": 1000, "status": "SUCCEEDED"}


def test_status_watch_in_a_log_prints_each_refresh_until_ctrl_c(log: Console) -> None:
    script = Script(instance(), UNREACHABLE, interrupt_after=2)
    code = console.show_status(
        lambda: [script.observe()], log, single=True, as_json=True, watch=True, sleep=script.sleep
    )
    assert code == 1  # the last look could not reach it
    assert [json.loads(line)["reachable"] for line in log.export_text().splitlines()] == [True, False]


# -- the command line --------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_command_line_for_an_unreachable_url(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    assert cli.main(["status", "--url", url, "--json"]) == 1
    view = json.loads(capsys.readouterr().out)
    assert (view["label"], view["reachable"], view["health"]) == (url, False, "unreachable")
    assert "Connection refused" in view["problem"]
    assert cli.main(["snapshot", "watch", "--url", url, "--interval", "0"]) == 1
    assert capsys.readouterr().out.startswith(f"{url} unreachable: GET {url}/status")


def test_the_command_line_wants_one_instance_to_watch(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["snapshot", "watch"]) == cli.EXIT_CONFIG
    assert "give NAME (an Airflow connection id), --config FILE or --url URL" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["status", "shop", "--url", "http://127.0.0.1:1"])  # one instance, named once
    assert cli.main(["status", "--config", "/nonexistent/shop.yaml"]) == cli.EXIT_CONFIG
    assert "cannot read /nonexistent/shop.yaml" in capsys.readouterr().err
