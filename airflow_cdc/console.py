"""The terminal's view of engine instances: ``airflow-cdc status`` and ``airflow-cdc snapshot
watch``, rendered with rich (installed with Airflow) from the same :class:`InstanceView` the
Airflow UI page shows.

Rendering is pure - an :class:`InstanceView` or :class:`SnapshotView` in, a rich renderable or a
line of text out - so it is tested on built data. The two loops (:func:`show_status`,
:func:`follow_snapshot`) observe through a callable and return the exit code. On a terminal they
redraw in place (``rich.live``); piped into a file or a CI log they print a line whenever
something changed instead, because a log cannot be redrawn. Words, numbers and snapshots are
rendered by ``console_parts`` (re-exported here).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from airflow_cdc.console_parts import (
    BAR_WIDTH,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    SNAPSHOT_STYLES,
    _int,
    _styled,
    count,
    duration,
    lag_text,
    pick_snapshot,
    rate,
    snapshot_cell,
    snapshot_exit_code,
    snapshot_line,
    snapshot_name,
    snapshot_progress,
    snapshot_rows,
)
from airflow_cdc.engine.notifications import INITIAL, Notification
from airflow_cdc.monitoring import InstanceView, SnapshotView

__all__ = [
    "BAR_WIDTH",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "HEALTH_STYLES",
    "SNAPSHOT_STYLES",
    "count",
    "duration",
    "follow_snapshot",
    "instance_details",
    "instances_table",
    "lag_text",
    "pick_snapshot",
    "rate",
    "show_status",
    "snapshot_cell",
    "snapshot_exit_code",
    "snapshot_line",
    "snapshot_name",
    "snapshot_progress",
    "snapshot_rows",
    "unknown_snapshot",
]

#: Seconds between two observations (two small API calls each).
INTERVAL = 1.0
#: Seconds ``snapshot watch --id`` waits for an id the instance does not know: one signalled a
#: moment ago shows up within a poll or two; a mistyped one never does.
UNKNOWN_ID_WAIT = 10.0

HEALTH_STYLES = {
    "running": "green",
    "paused": "yellow",
    "starting": "cyan",
    "retrying": "bold yellow",
    "stopped": "dim",
    "failed": "bold red",
    "unreachable": "bold red",
}

Sleep = Callable[[float], object]


# -- instances --------------------------------------------------------------------------------------


def _problem(view: InstanceView) -> Text:
    """What is wrong (the instance cannot be reached, it failed, or it retries a fault, with
    since when) and what to do about it."""
    if view.reachable and not view.error and view.health == "retrying":
        since = view.retrying.since_ms if view.retrying else None
        when = f" since {datetime.fromtimestamp(since / 1000):%H:%M:%S}" if since else ""
        fix = f" (if it persists: {view.fix})" if view.fix else ""
        return Text(f"retrying{when}: {view.cause}{fix}", style="yellow")
    what = (view.problem or "unreachable") if not view.reachable else view.error
    if not what:
        return Text("")
    return Text(f"{what}{f' (fix: {view.fix})' if view.fix else ''}", style="red")


def instances_table(views: Sequence[InstanceView]) -> RenderableType:
    """One row per instance (health, phase, lag, events/s, committed, the running snapshot), then
    what is wrong with each that has a problem, in full: an error does not fit in a column."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("instance", "health", "phase", "lag", "events/s", "committed", "snapshot"):
        table.add_column(column, justify="right" if column in ("events/s", "committed") else "left", no_wrap=True)
    for view in views:
        running = next((s for s in view.snapshots if s.active), None)
        table.add_row(
            view.label,
            _styled(view.health, HEALTH_STYLES),
            view.phase or "-",
            lag_text(view.lag, view.lag_unit, view.caught_up),
            rate(view.events_per_s),
            count(view.committed_records) if view.reachable else "-",
            snapshot_cell(running) if running else "",
        )
    problems = [Text.assemble(f"{view.label}: ", _problem(view)) for view in views if _problem(view).plain]
    return Group(table, *problems) if problems else table


def _tasks_table(view: InstanceView) -> Table:
    """Per task: positions (committed, and read so far), lag, records committed and in flight."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("task", "phase", "committed", "current", "lag", "records", "pending"):
        table.add_column(column, justify="right" if column in ("records", "pending") else "left", no_wrap=True)
    for task in view.tasks:
        table.add_row(
            task.id,
            task.phase,
            task.committed or "-",
            task.current or "-",
            lag_text(task.lag, view.lag_unit),
            count(task.committed_records),
            count(task.pending),
        )
    return table


def _notification_line(note: Notification) -> Text:
    """``12:00:03 Incremental Snapshot IN_PROGRESS snap-1 public.t``: the id only where it names
    a signal (each initial-snapshot notification has an id of its own)."""
    data = note.additional_data
    when = datetime.fromtimestamp(_int(note.timestamp) / 1000).strftime("%H:%M:%S")
    parts = [when, note.aggregate_type, note.type]
    parts += [] if note.aggregate_type == INITIAL else [data.get("signal_id") or note.id]
    parts += [data.get("scanned_collection") or data.get("current_collection_in_progress") or ""]
    rows = data.get("total_rows_scanned") or data.get("rows_scanned")
    parts += [f"{count(_int(rows))} rows" if rows else "", data.get("status", ""), data.get("problem", "")]
    return Text("  " + " ".join(part for part in parts if part), no_wrap=True, overflow="ellipsis")


def instance_details(view: InstanceView, *, snapshots: int = 5, notifications: int = 5) -> RenderableType:
    """One instance: its line, tasks, latest snapshots, error and fix, recent notifications."""
    if not view.reachable:
        return Text.assemble((view.label, "bold"), " ", _styled(view.health, HEALTH_STYLES), ": ", _problem(view))
    head = Text.assemble(
        (view.label, "bold"),
        f" ({view.name}) " if view.name and view.name != view.label else " ",
        _styled(view.health, HEALTH_STYLES),
        f"  {view.state} · {view.phase} · {view.connector.rsplit('.', 1)[-1]}",
    )
    facts = (
        f"url {view.url}   uptime {duration(view.uptime_s)}   lag {lag_text(view.lag, view.lag_unit, view.caught_up)}"
        f"   {rate(view.events_per_s)} events/s   committed {count(view.committed_records)}"
    )
    parts: list[RenderableType] = [head, Text(facts)]
    if view.health == "retrying":
        parts.append(_problem(view))
    if view.error:
        parts.append(Text.assemble(("error: ", "bold red"), view.error))
        if view.fix:
            parts.append(Text.assemble(("fix: ", "bold"), view.fix))
    if view.tasks:
        parts += [Text(""), _tasks_table(view)]
    if view.snapshots:
        parts.append(Text("\nsnapshots", style="bold"))
        parts += [
            Text(f"  {snapshot_line(s)}", style=SNAPSHOT_STYLES.get(s.state, "")) for s in view.snapshots[:snapshots]
        ]
    if view.notifications:
        parts.append(Text("\nrecent notifications", style="bold"))
        parts += [_notification_line(note) for note in view.notifications[:notifications]]
    return Group(*parts)


# -- the loops --------------------------------------------------------------------------------------


def show_status(
    observe: Callable[[], list[InstanceView]],
    console: Console,
    *,
    single: bool,
    as_json: bool = False,
    watch: bool = False,
    interval: float = INTERVAL,
    sleep: Sleep = time.sleep,
) -> int:
    """``airflow-cdc status``: the instances once, or every ``interval`` s until Ctrl-C. With
    ``single`` (one NAME), an unreachable instance exits 1."""

    def render(views: list[InstanceView]) -> RenderableType:
        if as_json:
            return json.dumps(views[0].to_json() if single else [v.to_json() for v in views], default=str)
        if not views:
            return Text("no cdc_engine connections found; give NAME, --config FILE or --url URL")
        return instance_details(views[0]) if single else instances_table(views)

    views = observe()
    if watch and console.is_terminal and not as_json:
        with Live(render(views), console=console, auto_refresh=False) as live:
            try:
                while True:
                    sleep(interval)
                    views = observe()
                    live.update(render(views), refresh=True)
            except KeyboardInterrupt:
                pass
    else:
        _print(console, render(views))
        try:
            while watch:
                sleep(interval)
                views = observe()
                _print(console, render(views))
        except KeyboardInterrupt:
            pass
    return EXIT_FAILED if single and views and not views[0].reachable else EXIT_OK


def _print(console: Console, renderable: RenderableType) -> None:
    if isinstance(renderable, str):  # JSON: neither wrapped nor highlighted
        console.out(renderable, highlight=False)
    else:
        console.print(renderable)


def unknown_snapshot(view: InstanceView, snapshot_id: str, waited: float, listing: str = "") -> str:
    """Why ``snapshot watch --id`` gives up: the id, the ids the instance knows, how to list them."""
    known = ", ".join(f"{s.id} ({'initial, ' if s.kind == INITIAL else ''}{s.state})" for s in view.snapshots)
    how = f"; `{listing}` lists them" if listing else ""
    return (
        f"no snapshot {snapshot_id!r} on {view.label}: it knows none by that id, and none started in {waited:g}s; "
        f"its snapshots: {known or 'none'}{how}; --wait SECONDS waits longer for one signalled just now"
    )


class _Follower:
    """What ``snapshot watch`` knows between two observations."""

    def __init__(
        self, label: str, snapshot_id: str | None, wait: float, clock: Callable[[], float], listing: str
    ) -> None:
        self.label, self.snapshot_id = label, snapshot_id
        self.reached = False
        self.followed: SnapshotView | None = None
        self.wait, self.clock, self.listing = wait, clock, listing
        self.unknown_since: float | None = None  # when the instance was first seen not knowing the id

    def step(self, view: InstanceView) -> tuple[RenderableType, str, int | None]:
        """The display, its one-line form, and the exit code once there is one."""
        if not view.reachable:
            text = f"{self.label} unreachable: {_problem(view).plain}"
            if not self.reached:  # never reached: nothing to follow
                return Text(text, style="bold red"), text, EXIT_FAILED
            return Text(f"{text} (trying again; Ctrl-C to leave)", style="red"), text, None
        self.reached = True
        snapshot = pick_snapshot(view, self.snapshot_id)
        if snapshot is None and self.snapshot_id is not None:
            self.unknown_since = self.clock() if self.unknown_since is None else self.unknown_since
            if self.clock() - self.unknown_since >= self.wait:
                text = unknown_snapshot(view, self.snapshot_id, self.wait, self.listing)
                return Text(text, style="bold red"), text, EXIT_FAILED
        if snapshot is None:
            what = f"snapshot {self.snapshot_id}" if self.snapshot_id else "a snapshot"
            text = f"waiting for {what} on {self.label} (Ctrl-C to leave)"
            return Text(text, style="dim"), text, None
        self.snapshot_id = snapshot.id  # the one followed from now on, whatever starts later
        self.followed = snapshot
        return snapshot_progress(snapshot, self.label), snapshot_line(snapshot), snapshot_exit_code(snapshot)


def follow_snapshot(
    observe: Callable[[], InstanceView],
    console: Console,
    *,
    label: str,
    snapshot_id: str | None = None,
    interval: float = INTERVAL,
    sleep: Sleep = time.sleep,
    wait: float = UNKNOWN_ID_WAIT,
    clock: Callable[[], float] = time.monotonic,
    listing: str = "",
) -> int:
    """``airflow-cdc snapshot watch``: follow one snapshot until it ends. Exit 0 once it
    completed, 1 when it failed, was aborted or rejected, the instance was never reached, or it
    knew no ``snapshot_id`` for ``wait`` s (``listing``: the command that lists its snapshots),
    130 on Ctrl-C (the snapshot goes on)."""
    follower = _Follower(label, snapshot_id, wait, clock, listing)
    live = Live(console=console, auto_refresh=True, refresh_per_second=4) if console.is_terminal else None
    last_line = None
    try:
        if live is not None:
            live.start()
        while True:
            display, line, code = follower.step(observe())
            if live is not None:
                live.update(display)
            elif line != last_line:
                console.print(Text(line), soft_wrap=True)
                last_line = line
            if code is not None:
                break
            sleep(interval)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
        display = Text("stopped watching; the snapshot goes on", style="dim")
    finally:
        if live is not None:
            live.stop()
    if code == EXIT_INTERRUPTED or (live is None and follower.followed is not None):
        console.print(display)  # in a log: the tables as they ended, after the lines
    return code
