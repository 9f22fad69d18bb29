"""What each scenario run measured, one JSON line per run (``$CDC_CHAOS_RESULTS``), and the
README's table made from such lines: ``python -m tests.chaos.results FILE...``."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_ENV = "CDC_CHAOS_RESULTS"


@dataclass
class FaultRecord:
    fault: str
    #: Seconds from the heal to the target equal to the source (None: it never was).
    recovery_s: float | None = None
    repeated_changes: int = 0
    repeated_reads: int = 0
    engine_restarts: int = 0


@dataclass
class RunResult:
    scenario: str
    source: str
    seed: int
    run: int
    faults: list[FaultRecord] = field(default_factory=list)
    #: Rows that differ between target and source at the end (missing, extra or other values).
    lost: int | None = None
    repeated_changes: int = 0
    repeated_reads: int = 0
    events: int = 0
    transactions: int = 0
    slot_lag_bytes: int | None = None
    leaks: list[str] = field(default_factory=list)
    #: Per engine process: (threads, descriptors, server connections) at its first steady state
    #: and after each recovery.
    samples: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    outcome: str = "failed"
    error: str = ""
    expected_failure: str = ""
    duration_s: float = 0.0
    machine: dict[str, Any] = field(default_factory=dict)

    def finish(self, started: float) -> None:
        self.duration_s = round(time.monotonic() - started, 1)
        self.machine = {
            "cores": os.cpu_count(),
            "load": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(),
        }

    def write(self) -> None:
        path = os.environ.get(RESULTS_ENV)
        if not path:
            return
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as out:
            out.write(json.dumps(asdict(self), sort_keys=True) + "\n")


def read(paths: list[str]) -> list[dict[str, Any]]:
    runs = []
    for path in paths:
        runs += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return runs


def _seconds(values: list[float]) -> str:
    return f"{max(values):.1f} s" if values else "-"


def table(runs: list[dict[str, Any]]) -> str:
    """Markdown: scenario x runs x lost x max duplicates x time to recover, in first-run order."""
    by_scenario: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_scenario[run["scenario"]].append(run)
    lines = [
        "| scenario | faults per run | runs | lost rows | max duplicates (changes / snapshot reads) "
        "| time to recover (median / max) | outcome |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, group in by_scenario.items():
        recoveries = sorted(f["recovery_s"] for r in group for f in r["faults"] if f["recovery_s"] is not None)
        median = f"{recoveries[len(recoveries) // 2]:.1f} s" if recoveries else "-"
        lost = [r["lost"] for r in group if r["lost"] is not None]
        outcomes = sorted({_outcome(r) for r in group})
        faults = max(len(r["faults"]) for r in group)
        lines.append(
            f"| {name} | {faults} | {len(group)} | {sum(lost) if lost else '-'} "
            f"| {max(r['repeated_changes'] for r in group)} / {max(r['repeated_reads'] for r in group)} "
            f"| {median} / {_seconds(recoveries)} | {', '.join(outcomes)} |"
        )
    return "\n".join(lines)


def _outcome(run: dict[str, Any]) -> str:
    if run["outcome"] == "passed":
        return "passed"
    if not run["expected_failure"]:
        return "FAILED"
    return f"fails as expected ({run['expected_failure'].split(':')[0]})"


def main(argv: list[str]) -> int:
    runs = read(argv)
    if not runs:
        print("no results", file=sys.stderr)
        return 1
    print(table(runs))
    seeds = sorted({r["seed"] for r in runs})
    loads = [r["machine"]["load"][0] for r in runs]
    print(
        f"\nseed(s) {', '.join(map(str, seeds))}; {runs[0]['machine']['cores']} cores; "
        f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}; {sum(r['duration_s'] for r in runs):.0f} s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
