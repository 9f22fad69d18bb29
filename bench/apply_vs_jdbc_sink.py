"""Our apply job against Debezium's JDBC sink connector, on the same change load (issue 27).

The anchor is what a user would wire up instead of our Spark job: Debezium's JDBC sink
(``io.debezium:debezium-connector-jdbc``, a plugin of the test Connect worker: ``jvm/``) in upsert
mode, deletes enabled, the primary key from the record key, into a fresh PostgreSQL database.

The events (``apply_capture.py``): bench/spark_apply.py's table and mixed load (an initial
snapshot of N/2 rows, then 1000-change transactions of inserts, updates, deletes) plus key
changes, captured twice from the same snapshot and WAL: by our engine (its Kafka sink: JSON
without schemas) and by Debezium's PostgreSQL connector on the same Connect worker (JSON with
schemas, which the JDBC sink needs: it cannot read our engine's schemaless records). Both
topics have 3 partitions, keyed by the primary key. Our engine's capture rate is measured from
the broker's append times (``capture_eps``), with the load made while it is stopped.

The sides (``apply_sides.py``), each into a fresh database with the table created from the source's
DDL, each checked row by row against the source afterwards (a side that does not match has no
figure: its mismatch is printed and the bench exits 1):

- ``jdbc_sink``: ``tasks.max`` 2 (``--jdbc-tasks``) against our ``local[2]``, every other setting
  at its default (``--jdbc-setting KEY=VALUE`` adds one); from the connector's creation until
  the target equals the source (a fingerprint polled 4x a second near the end);
- ``ours``: the apply job with Spark's Kafka source (``local[2]``, availableNow, no per-batch
  limit) in one SparkSession started beforehand (``session_start_s``, reported apart); from
  ``run`` to its return.

An untimed warm-up runs each side on the first ~7,000 records of each partition first (a
fresh JVM path loads and compiles), and each timed run waits until the machine is quiet
(``settle``: what the run before left behind - the Connect worker's offset commits and garbage
collection, Spark's cleanup - would be timed as the next side's). Sides take turns going first
over four rounds; rates are medians, ``ratio`` (ours / JDBC sink, goal >= 2.0) the median of
the rounds' ratios; ``capture_ratio`` = our apply rate / the engine's capture rate of the same
events (goal >= 0.5). A last, untimed run of ours
reports its phases (read, transform, write, the rest). The last line is one JSON object.

    CDC_JARS=... python bench/apply_vs_jdbc_sink.py --quick    # ~200k events (full: ~1M)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apply_capture import Captured, capture, warm_copy
from apply_sides import (
    apply_job,
    differences,
    fingerprint,
    fresh_target,
    jdbc_sink_config,
    run_jdbc_sink,
    run_ours,
    run_ours_phases,
)
from spark_apply import start_session

from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.local import KafkaBroker, KafkaConnectWorker
from airflow_cdc.local.postgres import PostgresServer

SIDES = ("jdbc_sink", "ours")
JDBC_SINK = "io.debezium.connector.jdbc.JdbcSinkConnector"
WARM_PER_PARTITION = 7_000


@dataclass
class Bench:
    pg: PostgresServer
    bootstrap: str
    client: ConnectClient
    work: Path
    source_db: str
    captured: Captured
    args: argparse.Namespace
    spark: Any = None
    want: tuple[int, int] = (0, 0)
    seconds: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})
    first_row_s: list[float] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    runs: int = 0


def _busy_cores(interval: float = 1.0) -> float:
    """Cores the machine kept busy over ``interval`` (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    busy0, total0 = sample()
    time.sleep(interval)
    busy1, total1 = sample()
    return (os.cpu_count() or 1) * (busy1 - busy0) / max(1, total1 - total0)


def settle(limit: float = 0.25, deadline_s: float = 60.0) -> float:
    """Waits until the machine is quiet (under ``limit`` cores busy over a second) before a timed
    run: the side before it leaves work behind - the Connect worker commits offsets and collects
    garbage after the sink matched, Spark cleans up its shuffles - which would be timed as the
    next side's. Returns the seconds waited (the deadline ends the wait, quiet or not)."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s and _busy_cores() > limit:
        pass
    return time.monotonic() - started


def run_side(bench: Bench, side: str, topic: str, timed: bool, phases: bool = False) -> dict[str, Any]:
    """One run into a fresh database; checked row by row when ``timed``."""
    bench.runs += 1
    database = fresh_target(bench.pg)
    if timed:
        waited = settle()
        if waited > 1.5:
            print(f"  (waited {waited:.0f} s for the machine to settle before {side})", flush=True)
    try:
        if side == "jdbc_sink":
            config = jdbc_sink_config(bench.pg, database, topic, bench.args.jdbc_tasks, bench.args.extra)
            out = run_jdbc_sink(
                bench.client, bench.bootstrap, bench.pg, config, f"jdbc-{bench.runs}", bench.want if timed else None
            )
        else:
            job = apply_job(bench.pg, bench.bootstrap, database, topic, bench.work / f"checkpoint-{bench.runs}")
            out = (run_ours_phases if phases else run_ours)(bench.spark, job)
            if timed and out["records"] != bench.captured.events:
                out["mismatch"] = f"the job read {out['records']:,} records of {bench.captured.events:,}"
        if timed:
            found = differences(bench.pg, bench.source_db, database)
            if found or out.get("seconds") is None or out.get("mismatch"):
                out["mismatch"] = "; ".join(filter(None, (out.get("mismatch"), found))) or "never matched"
                out["seconds"] = None
        return out
    finally:
        bench.pg.drop_database(database)


def timed_round(bench: Bench, number: int, topics: dict[str, str]) -> None:
    for side in SIDES[number % 2 :] + SIDES[: number % 2]:
        out = run_side(bench, side, topics[side], timed=True)
        if out.get("mismatch"):
            message = f"round {number} {side}: {out['mismatch']}"
            print(f"  MISMATCH {message}", flush=True)
            bench.mismatches.append(message)
            continue
        bench.seconds[side].append(out["seconds"])
        if out.get("first_row_s") is not None:
            bench.first_row_s.append(out["first_row_s"])
        first = f", first row after {out['first_row_s']:.2f} s" if out.get("first_row_s") else ""
        rate = bench.captured.events / out["seconds"]
        print(f"round {number} {side:>9}: {rate:,.0f} events/s ({out['seconds']:.2f} s{first})", flush=True)


def quiet_session(memory: str) -> tuple[Any, float]:
    """spark_apply's session, without the console progress bar (it would bury the bench's lines)."""
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", f"--driver-memory {memory} --conf spark.ui.showConsoleProgress=false pyspark-shell"
    )
    return start_session(memory)


def measure(bench: Bench) -> dict[str, Any]:
    """Warm-up, timed rounds, the phase run; the session's start-up and the phases."""
    captured = bench.captured
    topics = {"jdbc_sink": captured.theirs, "ours": captured.ours}
    warm = {side: warm_copy(bench.bootstrap, topic, WARM_PER_PARTITION) for side, topic in topics.items()}
    bench.want = fingerprint(bench.pg, bench.source_db)
    bench.spark, session_start = quiet_session(bench.args.driver_memory)
    try:
        print(f"session started in {session_start:.2f} s; warm-up", flush=True)
        for side in SIDES:
            print(f"  warm-up {side}: {run_side(bench, side, warm[side], timed=False)['seconds']:.2f} s", flush=True)
        for number in range(max(1, bench.args.rounds)):
            timed_round(bench, number, topics)
        out = run_side(bench, "ours", captured.ours, timed=True, phases=True)
    finally:
        bench.spark.stop()
    if out.get("mismatch"):
        bench.mismatches.append(f"phase run: {out['mismatch']}")
    print(f"ours, phases of one run ({out.get('batches')} batch(es)): {out.get('phases')}", flush=True)
    return {"session_start_s": round(session_start, 2), "phases": out.get("phases")}


def median_rate(bench: Bench, side: str) -> float | None:
    seconds = bench.seconds[side]
    return bench.captured.events / statistics.median(seconds) if seconds else None


def summary(bench: Bench, extra: dict[str, Any], loadavg: tuple[float, float]) -> dict[str, Any]:
    captured = bench.captured
    ours, theirs = median_rate(bench, "ours"), median_rate(bench, "jdbc_sink")
    pairs = list(zip(bench.seconds["jdbc_sink"], bench.seconds["ours"], strict=False))
    capture_eps = captured.events / captured.capture_s
    return {
        "benchmark": "apply_vs_jdbc_sink",
        "events": captured.events,
        "ours_eps": round(ours) if ours else None,
        "jdbc_sink_eps": round(theirs) if theirs else None,
        "capture_eps": round(capture_eps),
        "ratio": round(statistics.median(t / o for t, o in pairs), 3) if pairs else None,
        "capture_ratio": round(ours / capture_eps, 3) if ours else None,
        "seconds": {side: [round(s, 2) for s in bench.seconds[side]] for side in SIDES},
        "jdbc_sink_first_row_s": [round(s, 2) for s in bench.first_row_s],
        "capture_s": round(captured.capture_s, 2),
        "capture_wall_s": round(captured.capture_wall_s, 2),
        "ops": captured.ops,
        "value_bytes": captured.value_bytes,
        "jdbc_sink": {"version": bench.args.jdbc_version, "tasks": bench.args.jdbc_tasks, "settings": bench.args.extra},
        "loadavg_before_after": [round(v, 1) for v in loadavg],
        "mismatches": bench.mismatches,
        **extra,
    }


def report(out: dict[str, Any]) -> None:
    for side in SIDES:
        value = out[f"{side}_eps"]
        print(f"{side:>9}: " + (f"{value:,} events/s (median)" if value else "no figure (see the mismatch)"))
    print(f"  capture: {out['capture_eps']:,} events/s (our engine, broker-timed)")
    print(
        f"ratio (ours / JDBC sink) {out['ratio']} (goal >= 2.0), capture_ratio (our apply / our capture) "
        f"{out['capture_ratio']} (goal >= 0.5); {out['events']:,} events; load average "
        f"{out['loadavg_before_after'][0]} before, {out['loadavg_before_after'][1]} after"
    )
    print(json.dumps(out))


def jdbc_sink_version(client: ConnectClient) -> str:
    """The sink's version on the worker, or a message naming the fix."""
    for plugin in client.plugins():
        if plugin.get("class") == JDBC_SINK:
            return str(plugin.get("version"))
    raise SystemExit(
        f"apply_vs_jdbc_sink: the Connect worker has no {JDBC_SINK}: run `bash scripts/setup` (or `mvn -f "
        "jvm/pom.xml package -Dcdc.jars=DIR` and CDC_JARS=DIR) so connect-plugins/debezium-connector-jdbc exists"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="~200k events (default ~1M)")
    parser.add_argument("--events", type=int, help="about this many events instead (a smaller trial)")
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds, sides taking turns to go first (4)")
    parser.add_argument("--driver-memory", default="4g", help="the Spark driver's (local mode: everything's) memory")
    parser.add_argument("--jdbc-tasks", type=int, default=2, help="the JDBC sink's tasks.max (2: as local[2])")
    parser.add_argument("--jdbc-setting", action="append", default=[], metavar="KEY=VALUE", help="another sink setting")
    args = parser.parse_args()
    args.extra = dict(item.split("=", 1) for item in args.jdbc_setting)
    # SIGTERM as Ctrl-C: unwind, so connectors are deleted and servers stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    loadavg = os.getloadavg()[0]
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="apply-vs-jdbc-") as tmp,
        PostgresServer.from_env() as pg,
        KafkaBroker.from_env() as broker,
        KafkaConnectWorker(broker) as connect,
        ConnectClient(connect.url) as client,
    ):
        args.jdbc_version = jdbc_sink_version(client)
        source_db = pg.create_database()
        events = args.events or (200_000 if args.quick else 1_000_000)
        try:
            captured = capture(pg, broker.bootstrap_servers, client, source_db, events, Path(tmp))
            client.delete(f"dbz_{source_db}")  # captured: nothing of it runs while the sides do
            print(
                f"captured {captured.events:,} events {captured.ops}; our engine: {captured.capture_s:.1f} s "
                f"broker-timed ({captured.capture_wall_s:.1f} s with start-ups); values {captured.value_bytes} bytes",
                flush=True,
            )
            bench = Bench(pg, broker.bootstrap_servers, client, Path(tmp), source_db, captured, args)
            extra = measure(bench)
        finally:
            pg.drop_database(source_db)
    extra["total_s"] = round(time.monotonic() - started)
    report(summary(bench, extra, (loadavg, os.getloadavg()[0])))
    if bench.mismatches:
        print("apply_vs_jdbc_sink: FAILED, a target differs from the source:\n- " + "\n- ".join(bench.mismatches))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
