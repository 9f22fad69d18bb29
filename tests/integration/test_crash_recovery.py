"""kill -9 the engine at random points; after a final restart every record was seen, the
committed offset never passed a record the consumer had not seen, and duplicates stay within
the uncommitted window.

That window is what a task delivered after its last commit: commits come every flush interval,
checked once per poll loop (slack for a loaded machine), so at most the rate times the interval
plus the slack, and the batches in hand (one being consumed, one before it not yet committed).
The synthetic source delivers at most its configured rate, so the bound is computed up front.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from airflow_cdc.engine.testing import wait_until

CHILD = Path(__file__).with_name("crash_child.py")
TASKS, EVENTS, RATE, BATCH, FLUSH_MS = 2, 12_000, 8_000, 256, 50
LOOP_SLACK_S = 0.5


def duplicate_bound(rate: int, flush_ms: int, batch: int, loop_slack_s: float = LOOP_SLACK_S) -> int:
    """What one crash can make a task deliver again (see the module docstring)."""
    return int(rate * (flush_ms / 1000 + loop_slack_s)) + 2 * batch


WINDOW = duplicate_bound(RATE, FLUSH_MS, BATCH)


def read_runs(state: Path) -> list[list[tuple[int, int]]]:
    runs: list[list[tuple[int, int]]] = []
    for line in (state / "seen.log").read_text().splitlines():
        if line.startswith("run "):
            runs.append([])
        elif line.endswith("."):  # whole lines only (crash_child.py says why)
            task, seq = line.removesuffix(".").split()
            runs[-1].append((int(task), int(seq)))
    return runs


def committed(state: Path) -> dict[int, int]:
    path = state / "offsets.json"
    if not path.exists():
        return {}
    out = {}
    for key, offset in json.loads(path.read_text()).items():
        _, partition = json.loads(key)
        out[partition["task"]] = offset["seq"]
    return out


def start(state: Path, mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(CHILD),
            "--state",
            str(state),
            "--mode",
            mode,
            "--events",
            str(EVENTS),
            "--tasks",
            str(TASKS),
            "--rate",
            str(RATE),
            "--batch",
            str(BATCH),
            "--flush-ms",
            str(FLUSH_MS),
        ],
        stderr=subprocess.PIPE,
    )


def lines_seen(state: Path) -> int:
    path = state / "seen.log"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_at_random_point(state: Path, mode: str, rng: random.Random) -> None:
    target = lines_seen(state) + rng.randint(300, 6000)
    child = start(state, mode)
    wait_until(lambda: lines_seen(state) >= target or child.poll() is not None, 60, "progress")
    child.send_signal(signal.SIGKILL)
    child.wait(30)


def seen_per_task(runs: list[list[tuple[int, int]]]) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = defaultdict(list)
    for run in runs:
        for task, seq in run:
            seen[task].append(seq)
    return seen


def assert_commit_never_passed_an_unseen_record(state: Path) -> None:
    seen = seen_per_task(read_runs(state))
    for task, seq in committed(state).items():
        missing = set(range(seq + 1)) - set(seen[task])
        assert not missing, f"task {task} committed {seq} but never delivered {sorted(missing)[:5]}"


def assert_each_restart_resumed_after_its_commit(
    runs: list[list[tuple[int, int]]], resumed_from: list[dict[int, int]]
) -> list[int]:
    """The duplicates of each restart of each task; each within WINDOW."""
    delivered_before: dict[int, set[int]] = defaultdict(set)
    counted = []
    for run, start_offsets in zip(runs, resumed_from, strict=True):
        for task, seqs in seen_per_task([run]).items():
            assert min(seqs) == start_offsets.get(task, -1) + 1, "a restart must resume right after the commit"
            duplicates = sum(1 for s in seqs if s in delivered_before[task])
            assert duplicates <= WINDOW, f"task {task}: {duplicates} duplicates after one crash (bound {WINDOW})"
            counted.append(duplicates)
            delivered_before[task].update(seqs)
    return counted


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ordered", "unordered", "batch"])
def test_kill_9_at_random_points_loses_nothing(tmp_path: Path, mode: str) -> None:
    rng = random.Random(f"crash-{mode}")
    resumed_from: list[dict[int, int]] = []
    for _ in range(4):
        resumed_from.append(committed(tmp_path))
        kill_at_random_point(tmp_path, mode, rng)
        assert_commit_never_passed_an_unseen_record(tmp_path)

    resumed_from.append(committed(tmp_path))
    assert any(resumed_from[1:]), "no run was killed after its first commit: the test proved nothing"
    everything_committed = {t: EVENTS - 1 for t in range(TASKS)}
    child = start(tmp_path, mode)
    wait_until(lambda: committed(tmp_path) == everything_committed, 120, "catch-up")
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 0, child.stderr.read().decode() if child.stderr else ""

    runs = read_runs(tmp_path)
    assert len(runs) == 5
    seen = seen_per_task(runs)
    for task in range(TASKS):
        assert set(seen[task]) == set(range(EVENTS)), f"task {task} lost records"
    duplicates = assert_each_restart_resumed_after_its_commit(runs, resumed_from)
    print(f"{mode}: duplicates per restart and task {duplicates}, bound {WINDOW}")
    assert committed(tmp_path) == everything_committed
