"""Words, numbers and snapshots as the terminal shows them (``airflow_cdc.console`` renders
instances and runs the loops with these): pure, an :class:`SnapshotView` in, a rich renderable or
a line of text out.

Per-table bars: the engine estimates the rows of a whole snapshot (``estimated_total_rows``,
from the tables' statistics) and counts the rows it read, not each table's, so the table being
read has a bar of its own only when it is the last one (its share of the estimate is what is
left); otherwise it pulses beside its row count.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from airflow_cdc.engine.notifications import INITIAL
from airflow_cdc.monitoring import (
    ABORTED,
    COMPLETED,
    FAILED,
    GOOD_TABLE_STATUSES,
    PAUSED,
    REJECTED,
    RUNNING,
    InstanceView,
    SnapshotView,
)

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
BAR_WIDTH = 30
SNAPSHOT_STYLES = {
    RUNNING: "cyan",
    PAUSED: "yellow",
    COMPLETED: "green",
    FAILED: "bold red",
    ABORTED: "bold red",
    REJECTED: "bold red",
}


# -- words and numbers ------------------------------------------------------------------------------


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def duration(seconds: float | None) -> str:
    """``42s``, ``2m05s``, ``3h07m``."""
    if seconds is None:
        return "-"
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def lag_text(lag: int | None, unit: str, caught_up: bool | None = None) -> str:
    if lag is None:
        return "-"
    if unit == "bytes":
        amount, suffix = float(lag), "B"
        for bigger in ("KiB", "MiB", "GiB", "TiB"):
            if amount < 1024:
                break
            amount, suffix = amount / 1024, bigger
        text = f"{lag} B" if suffix == "B" else f"{amount:.1f} {suffix}"
    else:
        text = f"{lag:,} {unit}".strip()
    return f"{text} (caught up)" if caught_up else text


def rate(events_per_s: float | None) -> str:
    if events_per_s is None:
        return "-"
    return f"{events_per_s:,.1f}" if events_per_s < 100 else f"{events_per_s:,.0f}"


def _styled(word: str, styles: dict[str, str]) -> Text:
    return Text(word, style=styles.get(word, ""))


# -- snapshots --------------------------------------------------------------------------------------


def snapshot_name(snapshot: SnapshotView) -> str:
    """The signal's id; ``initial`` for the initial snapshot, whose id nobody chose."""
    return "initial" if snapshot.kind == INITIAL else snapshot.id


def snapshot_rows(snapshot: SnapshotView) -> str:
    """``1,500 of ~3,000 rows, 50%, eta 2s`` while it runs; ``3,000 rows`` once it ended."""
    text = f"{count(snapshot.rows_scanned)} rows"
    if not snapshot.active:
        return text
    if snapshot.estimated_rows:
        text = f"{count(snapshot.rows_scanned)} of ~{count(snapshot.estimated_rows)} rows"
    if snapshot.percent is not None:
        text += f", {snapshot.percent:.0f}%"
    if snapshot.eta_seconds is not None and snapshot.state == RUNNING:
        text += f", eta {duration(snapshot.eta_seconds)}"
    return text


def snapshot_line(snapshot: SnapshotView) -> str:
    """One line for a log or a table cell: id, state, the table being read, rows, problem."""
    if snapshot.state == REJECTED:
        return f"{snapshot.id} rejected: {snapshot.problem}"
    parts = [snapshot_name(snapshot), snapshot.state]
    if snapshot.active and snapshot.current_table:
        parts.append(snapshot.current_table)
    parts.append(snapshot_rows(snapshot))
    if not snapshot.active and snapshot.started_ms and snapshot.updated_ms:
        parts.append(f"in {duration((snapshot.updated_ms - snapshot.started_ms) / 1000)}")
    line = " ".join(parts)
    return f"{line}: {snapshot.problem}" if snapshot.problem else line


def snapshot_cell(snapshot: SnapshotView) -> str:
    """The short form for a table of instances: ``snap-1 46% eta 12s``, ``snap-1 paused 46%``."""
    parts = [snapshot_name(snapshot)] + ([snapshot.state] if snapshot.state != RUNNING else [])
    if snapshot.percent is not None:
        parts.append(f"{snapshot.percent:.0f}%")
    else:
        parts.append(f"{count(snapshot.rows_scanned)} rows")
    if snapshot.eta_seconds is not None and snapshot.state == RUNNING:
        parts.append(f"eta {duration(snapshot.eta_seconds)}")
    return " ".join(parts)


def _table_names(snapshot: SnapshotView) -> list[str]:
    names = list(snapshot.tables)
    names += [scan.table for scan in snapshot.scanned if scan.table not in names]
    if snapshot.current_table and snapshot.current_table not in names:
        names.append(snapshot.current_table)
    return names


def _table_row(snapshot: SnapshotView, table: str, left: list[str]) -> tuple[ProgressBar, str, Text]:
    """The bar, rows and status of one table of the snapshot; ``left`` the tables not read yet."""
    scan = next((s for s in snapshot.scanned if s.table == table), None)
    if scan is not None:
        bar = ProgressBar(total=1, completed=1, width=BAR_WIDTH)
        style = "green" if scan.status in GOOD_TABLE_STATUSES else "bold red"
        return bar, f"{count(scan.rows)} rows", Text(scan.status.lower(), style=style)
    if table != snapshot.current_table or not snapshot.active:
        waiting = Text("waiting" if snapshot.active else "not read", style="dim")
        return ProgressBar(total=1, completed=0, width=BAR_WIDTH), "", waiting
    rows = snapshot.rows_scanned - sum(s.rows for s in snapshot.scanned)
    share = (snapshot.estimated_rows or 0) - sum(s.rows for s in snapshot.scanned)
    word = Text("paused", style="yellow") if snapshot.state == PAUSED else Text("reading", style="cyan")
    if left == [table] and share > 0:  # the last table: what is left of the estimate is its own
        total = max(share, rows)
        return ProgressBar(total=total, completed=rows, width=BAR_WIDTH), f"{count(rows)} of ~{count(total)} rows", word
    return ProgressBar(total=None, pulse=True, width=BAR_WIDTH), f"{count(rows)} rows", word


def snapshot_progress(snapshot: SnapshotView, label: str = "") -> RenderableType:
    """A bar per table, a bar for the whole snapshot (rows of the estimate, ETA) and its state."""
    title = Text.assemble(
        ("snapshot ", "bold"),
        (snapshot_name(snapshot), "bold"),
        f" ({snapshot.kind}{f' on {label}' if label else ''}) ",
        _styled(snapshot.state, SNAPSHOT_STYLES),
    )
    grid = Table.grid(padding=(0, 2))
    for _ in range(4):
        grid.add_column()
    names = _table_names(snapshot)
    scanned = {scan.table for scan in snapshot.scanned}
    left = [name for name in names if name not in scanned]
    for name in names:
        grid.add_row(name, *_table_row(snapshot, name, left))
    if snapshot.state == COMPLETED:
        overall = ProgressBar(total=1, completed=1, width=BAR_WIDTH)
    elif snapshot.estimated_rows:
        total = max(snapshot.estimated_rows, snapshot.rows_scanned)
        overall = ProgressBar(total=total, completed=snapshot.rows_scanned, width=BAR_WIDTH)
    elif snapshot.active:
        overall = ProgressBar(total=None, pulse=True, width=BAR_WIDTH)
    else:
        overall = ProgressBar(total=1, completed=0, width=BAR_WIDTH)
    grid.add_row(
        Text("all tables", style="bold"), overall, snapshot_rows(snapshot), _styled(snapshot.state, SNAPSHOT_STYLES)
    )
    parts: list[RenderableType] = [title, grid]
    if snapshot.problem:
        parts.append(Text(f"problem: {snapshot.problem}", style="bold red"))
    return Group(*parts)


def snapshot_exit_code(snapshot: SnapshotView) -> int | None:
    """None while it runs or is paused; 0 once completed; 1 when it failed, was aborted or rejected."""
    if snapshot.active:
        return None
    return EXIT_OK if snapshot.state == COMPLETED else EXIT_FAILED


def pick_snapshot(view: InstanceView, snapshot_id: str | None) -> SnapshotView | None:
    """The snapshot ``snapshot_id``, else the running one (the first running or paused), else the
    latest one that ended."""
    if snapshot_id is not None:
        return view.snapshot(snapshot_id)
    return view.snapshots[0] if view.snapshots else None
