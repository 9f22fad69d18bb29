"""kill -9 the engine process mid-stream, several times, under a running write load: after a
final restart and catch-up, replaying the captured events yields exactly the source table, and
each crash repeated no more events than its bound.

The bound: a crash repeats what the engine delivered after its last offset commit. Commits come
every ``offset.flush.interval.ms`` (F), checked once per poll loop (L, slack for a loaded
machine), so the repeats are at most what was delivered in any F + L seconds - the delivery rate
times F + L - plus the batch in hand (B). The rate is the engine's own, not the write load's:
after a restart it catches up at full speed. A crash before the initial snapshot's end was
committed repeats the snapshot instead (as Debezium does).
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine.testing import wait_until

from .pg_support import (
    WriteLoad,
    child_stderr,
    create_load_table,
    engine_config,
    source_image,
    start_child,
    wait_for_target,
)

ROWS, BATCH, LOOP_SLACK_S = 2000, 200, 0.5


def lines(path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_after_progress(config, log, offsets, target: int) -> dict[str, Any]:
    """Run the engine until the log has ``target`` lines, kill -9 it; the offset it had committed."""
    child = start_child(config, log, offsets)
    wait_until(lambda: lines(log) >= target or child.poll() is not None, 60, "events flowing")
    assert child.poll() is None, child_stderr(log)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    return next(iter(json.loads(offsets.read_text()).values())) if offsets.exists() else {}


def runs(log: Path) -> list[list[tuple[float, tuple[Any, ...]]]]:
    """Per run, each delivered change event as (delivery time, identity); tombstones left out."""
    out: list[list[tuple[float, tuple[Any, ...]]]] = []
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
            value = event["value"]
            if value is not None:
                identity = (value["source"]["lsn"], json.dumps(event["key"], sort_keys=True), value["op"])
                out[-1].append((delivered_at, identity))
    return out


def most_in_any_window(run: list[tuple[float, tuple[Any, ...]]], seconds: float) -> int:
    times = [t for t, _ in run]
    most, start = 0, 0
    for end, t in enumerate(times):
        while times[start] < t - seconds:
            start += 1
        most = max(most, end - start + 1)
    return most


def duplicate_bound(run: list[tuple[float, tuple[Any, ...]]], flush_s: float, committed: dict[str, Any]) -> int:
    """What the crash that ended ``run`` may make the next run deliver again: what it delivered
    in its last flush interval (and poll loop) - at most its busiest such window - and the batch
    in hand; the whole snapshot if the snapshot's end was not committed."""
    window = most_in_any_window(run, flush_s + LOOP_SLACK_S)
    snapshot = ROWS if committed.get("snapshot") or not committed else 0
    return max(window, snapshot) + BATCH


@pytest.mark.slow
def test_kill_9_under_write_load_loses_nothing_and_repeats_within_the_bound(pg_server, pg_database, tmp_path):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, ROWS)
    config = engine_config(pg_server, pg_database, **{"max.batch.size": BATCH})
    flush_s = config["offset.flush.interval.ms"] / 1000
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"
    rng = random.Random(3)
    committed_at_kill = []
    with WriteLoad(pg_server.dsn(pg_database), first_new_id=ROWS + 1) as load:
        for _ in range(3):
            target = max(lines(log), ROWS) + rng.randint(300, 3000)
            committed_at_kill.append(kill_after_progress(config, log, offsets, target))
        load.stop()
        assert load.transactions > 100
    child = start_child(config, log, offsets)
    with pg_server.connect(pg_database) as conn:
        expected = source_image(conn)
    wait_for_target(log, expected, child, 180)
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 0, child_stderr(log)
    with pg_server.connect(pg_database) as conn:
        active = conn.execute(
            "select active from pg_replication_slots where slot_name = %s", (config["slot.name"],)
        ).fetchone()
    assert active == (False,)

    delivered = runs(log)
    assert len(delivered) == 4
    report = []
    for index, committed in enumerate(committed_at_kill):
        before = {identity for _, identity in delivered[index]}
        repeated = sum(1 for _, identity in delivered[index + 1] if identity in before)
        bound = duplicate_bound(delivered[index], flush_s, committed)
        report.append((repeated, bound, most_in_any_window(delivered[index], flush_s)))
    # The third figure is the busiest flush interval alone (no slack): the typical repeats.
    print(f"duplicates per crash (measured, bound, busiest flush interval): {report}")
    assert all(repeated <= bound for repeated, bound, _ in report), report
