"""One scenario run: the scenario's own servers, the engine instance as a process of its own, the
write load, and the seeded schedule of faults - each injected under load, held while the load
goes on, healed; then the load pauses and the target must equal the source, row by row (the time
that takes, from the heal, is the recovery time). At the end: the last catch-up, the committed
position back near the source's, a clean stop, nothing leaked."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

from tests.chaos import checks
from tests.chaos.faults import Fault, schedule
from tests.chaos.harness import CATCH_UP_S, Harness, Scenario, ScenarioFailure
from tests.chaos.results import FaultRecord, RunResult
from tests.chaos.servers import Servers
from tests.chaos.workload import APPLICATION, setup

__all__ = ["Scenario", "ScenarioFailure", "run"]


def run_fault(h: Harness, fault: Fault, result: RunResult) -> None:
    record = FaultRecord(fault.name)
    result.faults.append(record)
    before, restarts = dict(h.replay.repeated), h.restarts
    h.fault, h.engine_down = fault, fault.stops_engine
    fault.inject(h)
    fault.hold(h)
    fault.heal(h)
    h.engine_down = False
    healed = time.monotonic()
    h.load.pause()
    h.load.probe()
    h.catch_up(result, f"after {fault.name}")
    record.recovery_s = round(time.monotonic() - healed, 2)
    h.fault = None
    record.repeated_changes = h.replay.repeated["changes"] - before.get("changes", 0)
    record.repeated_reads = h.replay.repeated["reads"] - before.get("reads", 0)
    record.engine_restarts = h.restarts - restarts
    if record.repeated_changes and not fault.repeats:
        raise ScenarioFailure(f"{fault.name} made the engine deliver {record.repeated_changes} change events again")
    h.sample()
    h.load.resume()


def start_incremental_snapshot(h: Harness) -> str:
    signal_id = f"chaos-{h.rng.randrange(1 << 30)}"
    prefix = "public" if h.scenario.source == "postgres" else h.servers.database
    data = {"data-collections": [f"{prefix}.{t}" for t in ("accounts", "ledger", "docs")], "type": "incremental"}
    with contextlib.closing(h.servers.flavour.connect()) as conn:
        with conn.cursor() as cur:
            cur.execute(
                "insert into debezium_signal values (%s, 'execute-snapshot', %s)", (signal_id, json.dumps(data))
            )
        conn.commit()
    reads = h.replay.reads

    def under_way() -> bool:
        h.reader.read(h.replay)
        return h.replay.reads >= reads + 200

    h.wait(under_way, 120, "the snapshot under way")
    return signal_id


def snapshot_completed(h: Harness, signal_id: str) -> bool:
    path = h.engine.state / "notifications.jsonl"
    if not path.exists():
        return False
    for line in path.read_text().splitlines():
        note = json.loads(line).get("notification", {})
        if note.get("id") == signal_id and note.get("type") in ("COMPLETED", "ABORTED"):
            if note["type"] != "COMPLETED":
                raise ScenarioFailure(f"the incremental snapshot was aborted: {note}")
            return True
    return False


def run(scenario: Scenario, seed: int, run_index: int, work: Path) -> RunResult:
    """The run's result; ScenarioFailure (after writing the result) when a check fails."""
    started = time.monotonic()
    result = RunResult(scenario.name, scenario.source, seed, run_index, expected_failure=scenario.defect)
    try:
        with Servers.started(scenario, work) as servers, harness(scenario, seed, run_index, work, servers) as h:
            try:
                _run(h, result)
            finally:
                result.transactions, result.events = h.load.transactions, h.replay.events
                result.repeated_changes = h.replay.repeated["changes"]
                result.repeated_reads = h.replay.repeated["reads"]
                result.samples = {str(pid): counts for pid, counts in h.samples.items()}
        result.outcome = "passed"
    except BaseException as exc:
        result.error = str(exc)[:2000]
        raise
    finally:
        result.finish(started)
        result.write()
    return result


@contextlib.contextmanager
def harness(scenario: Scenario, seed: int, run_index: int, work: Path, servers: Servers) -> Iterator[Harness]:
    setup(servers.flavour, f"{seed}/{run_index}")
    h = Harness(scenario, seed, run_index, work, servers)
    try:
        yield h
    finally:
        with contextlib.suppress(Exception):
            h.load.stop()
        if h.apply is not None:
            h.apply.close()
        h.engine.close()
        h.close()


def _run(h: Harness, result: RunResult) -> None:
    h.start_engine()
    if h.apply is not None:
        h.apply.start()
    h.catch_up(result, "after the initial snapshot")
    h.sample()
    h.load.start()
    signal_id = start_incremental_snapshot(h) if h.scenario.incremental else ""
    for number, fault in enumerate(schedule(h.scenario.pool, h.scenario.faults, h.rng)):
        if number or not signal_id:  # the first fault of an incremental run hits the snapshot at once
            wanted = h.rng.randint(50, 200)
            h.wait(h.load.progressed(wanted), 120, f"{wanted} transactions before {fault.name}")
        run_fault(h, fault, result)
    h.load.pause()
    h.load.probe()
    h.load.stop()
    h.catch_up(result, "at the end")
    if signal_id:
        h.wait(lambda: snapshot_completed(h, signal_id), CATCH_UP_S, "the incremental snapshot completed")
    result.lost = 0
    lag: list[int | None] = [None]

    def near_zero() -> bool:
        lag[0] = h.lag()
        return lag[0] is not None and lag[0] <= checks.LAG_NEAR_ZERO

    try:
        h.wait(near_zero, 60, "the committed position back near the source's", interval=0.25)
    except TimeoutError:
        raise ScenarioFailure(f"the committed position stayed {lag[0]} bytes behind the source's") from None
    finally:
        result.slot_lag_bytes = lag[0]
    h.sample()
    leaks = checks.growth(h.samples, ("threads", "descriptors", "server connections"), checks.GROWTH_SLACK)
    leaks += [f"engine child processes {h.engine.children()}"] if h.engine.children() else []
    code = h.engine.stop()
    if code != 0:
        raise ScenarioFailure(f"the engine's clean stop exited with {code}:\n{h.engine.tail()}")
    leaks += h.servers.leaks(h.admin(), h.slot, APPLICATION)
    leaks += checks.temp_files(h.engine.state, h.work / "changelog", h.work / "offsets", h.engine.tmp)
    result.leaks = leaks
    if leaks:
        raise ScenarioFailure(f"leaked: {leaks}")
