"""Shared by the kill -9 tests of the database sources: run the engine child until its log has
grown, kill it, and judge how many events each crash made the next run deliver again.

The bound: a crash repeats what the engine delivered after its last offset commit. Commits come
every ``offset.flush.interval.ms`` (F), checked once per poll loop (L, slack for a loaded
machine), so the repeats are at most what was delivered in any F + L seconds - the delivery rate
times F + L - plus the batch in hand (B). The rate is the engine's own, not the write load's:
after a restart it catches up at full speed. A crash before the initial snapshot's end was
committed repeats the snapshot instead (as Debezium does).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_cdc.engine.testing import wait_until

from .pg_support import child_stderr, start_child

LOOP_SLACK_S = 0.5

#: One delivered change event as (delivery time, identity).
Delivery = tuple[float, tuple[Any, ...]]
#: What tells one change event from another: its position in the log, its key and its op.
Identity = Callable[[dict[str, Any]], tuple[Any, ...]]


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_after_progress(config: dict[str, Any], log: Path, offsets: Path, target: int) -> dict[str, Any]:
    """Run the engine until the log has ``target`` lines, kill -9 it; the offset it had committed."""
    child = start_child(config, log, offsets)
    wait_until(lambda: lines(log) >= target or child.poll() is not None, 60, "events flowing")
    assert child.poll() is None, child_stderr(log)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    return next(iter(json.loads(offsets.read_text()).values())) if offsets.exists() else {}


def runs(log: Path, identity: Identity) -> list[list[Delivery]]:
    """Per run, each delivered change event as (delivery time, identity); tombstones left out."""
    out: list[list[Delivery]] = []
    delivered_at = 0.0
    data = log.read_bytes()
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        if line.startswith(b"run "):
            out.append([])
        elif line.startswith(b"batch "):
            delivered_at = float(line.split()[1])
        elif line.startswith(b"{"):
            try:
                event = json.loads(line)
            except ValueError:
                continue  # cut by the kill: never marked processed, so never committed
            if event["value"] is not None:
                out[-1].append((delivered_at, identity(event)))
    return out


def most_in_any_window(run: list[Delivery], seconds: float) -> int:
    times = [t for t, _ in run]
    most, start = 0, 0
    for end, t in enumerate(times):
        while times[start] < t - seconds:
            start += 1
        most = max(most, end - start + 1)
    return most


def duplicate_bound(
    run: list[Delivery], flush_s: float, committed: dict[str, Any], snapshot_rows: int, batch: int
) -> int:
    """What the crash that ended ``run`` may make the next run deliver again: what it delivered
    in its last flush interval (and poll loop) - at most its busiest such window - and the batch
    in hand; the whole snapshot if the snapshot's end was not committed."""
    window = most_in_any_window(run, flush_s + LOOP_SLACK_S)
    snapshot = snapshot_rows if committed.get("snapshot") or not committed else 0
    return max(window, snapshot) + batch


def duplicates_per_crash(
    delivered: list[list[Delivery]],
    committed_at_kill: list[dict[str, Any]],
    flush_s: float,
    *,
    snapshot_rows: int,
    batch: int,
) -> list[tuple[int, int, int]]:
    """Per crash: (events the next run repeated, their bound, the busiest flush interval alone -
    the typical repeats)."""
    report = []
    for index, committed in enumerate(committed_at_kill):
        before = {identity for _, identity in delivered[index]}
        repeated = sum(1 for _, identity in delivered[index + 1] if identity in before)
        bound = duplicate_bound(delivered[index], flush_s, committed, snapshot_rows=snapshot_rows, batch=batch)
        report.append((repeated, bound, most_in_any_window(delivered[index], flush_s)))
    return report


def delivery_rate(run: list[Delivery]) -> float:
    """Change events per second over a run's deliveries (first batch to last)."""
    if len(run) < 2 or run[-1][0] <= run[0][0]:
        return 0.0
    return len(run) / (run[-1][0] - run[0][0])
