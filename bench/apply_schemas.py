"""What Connect schemas in the change events cost the Spark apply job (issue 28, ADR 0025).

Since the job reads each table's schema from the changes (the JSON converter's
``{"schema":...,"payload":...}`` records), a user who wants target tables created and evolved
turns schemas on, and every record carries its table's whole schema. This bench measures what
that costs against the same events without schemas, in the same run.

The events are real and the same on both sides: bench/spark_apply.py's source table
(``public.items``, 9 columns) and load (an initial snapshot of N/2 rows, then 1000-change
transactions of updates, inserts, deletes with their tombstones), captured twice from the same
snapshot and WAL by our engine (``EngineInstance``, Kafka sink, 3 partitions), each instance
through a slot of its own:

- ``schemas``: ``key.converter.schemas.enable`` and ``value.converter.schemas.enable`` true,
  ``column.propagate.source.type=.*`` (what README "Schema changes" tells users to set);
- ``plain``: the engine's default, JSON without schemas.

Both instances snapshot, catch up and stop; the load runs while they are stopped; each starts
again and streams the backlog. Both topics must hold the number of records the load made.

The sides are ``apply.run`` (Spark's Kafka source, ``availableNow``, no per-batch limit, the
default policy ``lenient``) in one SparkSession (bench/spark_apply.py's ``start_session``,
``local[2]``; its start-up reported apart), each run into a fresh PostgreSQL database:

- ``plain``: into ``items`` created beforehand from the source's DDL, as users had to;
- ``schemas``: into nothing - the job creates ``items`` from the events' schema.

Each run is timed from ``run`` to its return, must read every record, and must leave ``items``
equal to the source table (row count and an md5 over all source columns, ordered by key), or
the bench fails (exit status 1, the differences printed). An untimed warm-up applies the first
~7,000 records of each partition of each topic first (a fresh JVM loads and compiles as it
goes); each timed run waits for the machine to settle (at most ``--settle-s``); the sides take
turns going first. Rates are medians; ``ratio`` = schemas / plain is the median of the rounds'
ratios (the baseline measured beside it, under the same machine load).

The schemas side's timed runs start with the schemas the warm-up learned, as every run of a
job after its first does (``cdc_schemas`` beside its checkpoint): the job then caches no schema
text. One more run, untimed in the ratio, is a job's very first (``cold_schemas_eps``).

Goal: ``ratio`` >= 0.9. Not 1.0: a schemas record is several times larger than a plain one (the
9 columns' schema in each key and value), so Kafka carries, Spark caches and the JSON parse
scans several times the text (``payload`` is found past the schema) - a cost the job cannot
avoid short of not reading the text. What the job adds itself must stay small: a hash per
record (``schema_batches.py``), one parse per table version, a pseudo-column per change, the
table's creation once. Below 0.9, the schema handling costs more than reading the bigger text.

The output: events/s per side, ``ratio``, the records' average bytes per side (key, value,
both), each side's phases (``phases_s`` of ``apply.run``: read, transform, write; ``learn``
and ``ddl``, the schema step the job does not time itself - learning new schemas, the target's
DDL - timed by the bench (``SchemaStep``); the rest of the run as ``outside``; medians over the
rounds), the table the job created. The last line is one JSON object.

    CDC_JARS=... python bench/apply_schemas.py --quick      # ~200k events, 3 rounds (full: ~1M, 4)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apply_capture import current_lsn, read_topic, run_engine, warm_copy
from apply_sides import apply_job, differences, fresh_target, run_ours_phases
from apply_vs_jdbc_sink import WARM_PER_PARTITION, quiet_session, settle
from spark_apply import (
    PARTITIONS,
    TXN_RECORDS,
    change_load,
    checksum,
    engine_props,
    fill_source,
    topic_size,
)

from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer

SIDES = ("plain", "schemas")
#: The engine settings of each side's capture: JsonConverter's schemas, with the source's types.
CONVERTERS: dict[str, dict[str, str]] = {
    "plain": {},
    "schemas": {
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "column.propagate.source.type": ".*",
    },
}


@dataclass
class Captured:
    topics: dict[str, str]
    events: int
    ops: dict[str, int]
    capture_s: float
    #: Per side: the records' average key, value and total bytes (a tombstone's value is 0).
    record_bytes: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Bench:
    pg: PostgresServer
    bootstrap: str
    work: Path
    source_db: str
    captured: Captured
    args: argparse.Namespace
    spark: Any = None
    want: tuple[int, str] = (0, "")
    runs: int = 0
    seconds: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})
    phases: dict[str, list[dict[str, float]]] = field(default_factory=lambda: {side: [] for side in SIDES})
    schema_step: Any = None
    created_table: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    #: The warm-up's ``cdc_schemas`` (the schemas side's timed runs start knowing them).
    learned: Path | None = None
    cold_seconds: float | None = None


# --- the capture: one source, two engine instances ---------------------------------------------


def side_props(pg: PostgresServer, database: str, bootstrap: str, work: Path, side: str) -> dict[str, Any]:
    """spark_apply's engine, with a slot, publication, topic prefix and state of the side's own."""
    return {
        **engine_props(pg, database, bootstrap, work / f"state-{side}"),
        "name": f"bench-{side}-{database}",
        "topic.prefix": f"{database}_{side}",
        "slot.name": f"slot_{side}_{database}",
        "publication.name": f"pub_{side}_{database}",
        "slot.drop.on.stop": False,  # the load runs while the instance is stopped
        **CONVERTERS[side],
    }


def record_bytes(bootstrap: str, topic: str) -> dict[str, int]:
    records = read_topic(bootstrap, topic)
    keys = sum(len(m.key() or b"") for m in records)
    values = sum(len(m.value() or b"") for m in records)
    n = max(1, len(records))
    return {"key": keys // n, "value": values // n, "record": (keys + values) // n}


def capture(pg: PostgresServer, bootstrap: str, database: str, events: int, work: Path) -> Captured:
    rows = events // 2
    transactions = (events - rows) // TXN_RECORDS
    fill_source(pg, database, rows)
    started = time.perf_counter()
    props = {side: side_props(pg, database, bootstrap, work, side) for side in SIDES}
    topics = {side: f"{props[side]['topic.prefix']}.public.items" for side in SIDES}
    for side in SIDES:  # each snapshot whole before the load: the same rows on both sides
        snapshot_lsn, topic = current_lsn(pg, database), topics[side]

        def snapshotted(instance: Any, lsn: str = snapshot_lsn, topic: str = topic) -> bool:
            return bool(instance.position(target=lsn).reached) and topic_size(bootstrap, topic) >= rows

        run_engine(props[side], snapshotted)
    changes = change_load(pg, database, rows, transactions)
    lsn = current_lsn(pg, database)
    for side in SIDES:
        run_engine(props[side], lambda i: i.position(target=lsn).reached)
    expected = rows + changes.total() + changes["d"]  # snapshot reads, changes, a tombstone per delete
    sizes = {side: topic_size(bootstrap, topic) for side, topic in topics.items()}
    if any(size != expected for size in sizes.values()):
        raise SystemExit(f"apply_schemas: the load made {expected:,} records {dict(changes)}; the topics hold {sizes}")
    ops = {"r": rows, **changes, "tombstones": changes["d"]}
    captured = Captured(topics, expected, ops, time.perf_counter() - started)
    captured.record_bytes = {side: record_bytes(bootstrap, topic) for side, topic in topics.items()}
    return captured


# --- the apply runs ----------------------------------------------------------------------------


class SchemaStep:
    """The seconds a run spends on the changes' schemas between a batch's read and its transform:
    ``learn``, the schemas not seen yet (``SchemaBook.of_batch``: one more pass over the cached
    batch), and ``ddl``, the target's tables created and evolved (``SqlTarget.prepare``).
    ``apply.run``'s ``phases_s`` leave this step out - it would count as ``outside`` - so the
    bench times the two methods by wrapping them on the driver, where ``foreachBatch`` calls
    them; they run as they are."""

    def __init__(self) -> None:
        from airflow_cdc.spark.schema_batches import SchemaBook
        from airflow_cdc.spark.targets.sql_target import SqlTarget

        self.seconds = {"learn": 0.0, "ddl": 0.0}
        for owner, name, step in ((SchemaBook, "of_batch", "learn"), (SqlTarget, "prepare", "ddl")):
            setattr(owner, name, self._timed(getattr(owner, name), step))

    def _timed(self, method: Any, step: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds[step] += time.perf_counter() - started

        return timed

    def split(self, phases: dict[str, float]) -> dict[str, float]:
        """``phases`` with the step's seconds (``learn``, ``ddl``) taken out of ``outside``; reset."""
        steps = {step: round(seconds, 2) for step, seconds in self.seconds.items()}
        self.seconds = dict.fromkeys(self.seconds, 0.0)
        outside = round(phases.pop("outside") - sum(steps.values()), 2)
        return {**phases, **steps, "outside": outside}


def target_for(bench: Bench, side: str) -> str:
    """A fresh database: with ``items`` created from the source's DDL (plain), or empty (schemas)."""
    return fresh_target(bench.pg) if side == "plain" else bench.pg.create_database()


def created_columns(pg: PostgresServer, database: str) -> list[str]:
    """``items``' columns as the job created them: ``name type`` in order."""
    with pg.connect(database) as conn:
        rows = conn.execute(
            "select a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull from pg_attribute a "
            "where a.attrelid = 'public.items'::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum"
        ).fetchall()
    return [f"{name} {kind}{' not null' if not_null else ''}" for name, kind, not_null in rows]


def run_side(bench: Bench, side: str, topic: str, timed: bool, cold: bool = False) -> dict[str, Any]:
    """One run into a fresh database; checked against the source when ``timed``. The schemas
    side starts with the schemas the warm-up learned (``cdc_schemas`` beside the checkpoint, as
    a job's earlier runs leave them), unless ``cold`` (a job's very first run)."""
    bench.runs += 1
    database = target_for(bench, side)
    checkpoint = bench.work / f"checkpoint-{bench.runs}"
    try:
        if timed and bench.args.settle_s > 0:
            waited = settle(deadline_s=bench.args.settle_s)
            if waited > 1.5:
                print(f"  (waited {waited:.0f} s for the machine to settle before {side})", flush=True)
        if side == "schemas" and not cold and bench.learned is not None:
            shutil.copytree(bench.learned, checkpoint / "cdc_schemas")
        job = apply_job(bench.pg, bench.bootstrap, database, topic, checkpoint)
        out = run_ours_phases(bench.spark, job)
        out["phases"] = bench.schema_step.split(out["phases"])
        if not timed:
            return out
        if out["records"] != bench.captured.events:
            out["mismatch"] = f"the job read {out['records']:,} records of {bench.captured.events:,}"
        elif checksum(bench.pg, database, "items") != bench.want:
            out["mismatch"] = differences(bench.pg, bench.source_db, database) or "the md5 differs"
        if side == "schemas" and not bench.created_table:
            bench.created_table = created_columns(bench.pg, database)
        return out
    finally:
        bench.pg.drop_database(database)


def timed_round(bench: Bench, number: int) -> None:
    for side in SIDES[number % 2 :] + SIDES[: number % 2]:
        out = run_side(bench, side, bench.captured.topics[side], timed=True)
        if out.get("mismatch"):
            message = f"round {number} {side}: {out['mismatch']}"
            print(f"  MISMATCH {message}", flush=True)
            bench.mismatches.append(message)
            continue
        bench.seconds[side].append(out["seconds"])
        bench.phases[side].append(out["phases"])
        rate = bench.captured.events / out["seconds"]
        print(
            f"round {number} {side:>7}: {rate:,.0f} events/s ({out['seconds']:.2f} s, {out['batches']} batch(es); "
            f"phases {out['phases']})",
            flush=True,
        )


def measure(bench: Bench) -> float:
    """Warm-up and timed rounds; the session's start-up seconds."""
    topics = bench.captured.topics
    warm = {side: warm_copy(bench.bootstrap, topic, WARM_PER_PARTITION) for side, topic in topics.items()}
    bench.want = checksum(bench.pg, bench.source_db, "items")
    bench.spark, session_start = quiet_session(bench.args.driver_memory)
    bench.schema_step = SchemaStep()
    try:
        print(f"session started in {session_start:.2f} s; warm-up", flush=True)
        for side in SIDES:
            print(f"  warm-up {side}: {run_side(bench, side, warm[side], timed=False)['seconds']:.2f} s", flush=True)
            if side == "schemas":
                bench.learned = bench.work / f"checkpoint-{bench.runs}" / "cdc_schemas"
        for number in range(max(1, bench.args.rounds)):
            timed_round(bench, number)
        # A job's first run ever: it learns the schemas, caching their text for the batch.
        cold = run_side(bench, "schemas", bench.captured.topics["schemas"], timed=True, cold=True)
        if cold.get("mismatch"):
            bench.mismatches.append(f"cold schemas: {cold['mismatch']}")
        else:
            bench.cold_seconds = cold["seconds"]
            print(f"cold schemas run: {bench.captured.events / cold['seconds']:,.0f} events/s", flush=True)
    finally:
        bench.spark.stop()
    return session_start


# --- the report --------------------------------------------------------------------------------


def median_phases(runs: list[dict[str, float]]) -> dict[str, float]:
    names = dict.fromkeys(name for run in runs for name in run)
    return {name: round(statistics.median(run.get(name, 0.0) for run in runs), 2) for name in names}


def summary(bench: Bench, extra: dict[str, Any]) -> dict[str, Any]:
    captured = bench.captured
    eps = {side: captured.events / statistics.median(s) if s else None for side, s in bench.seconds.items()}
    pairs = list(zip(bench.seconds["plain"], bench.seconds["schemas"], strict=False))
    plain_bytes, schemas_bytes = captured.record_bytes["plain"]["record"], captured.record_bytes["schemas"]["record"]
    return {
        "benchmark": "apply_schemas",
        "events": captured.events,
        **{f"{side}_eps": round(eps[side]) if eps[side] else None for side in SIDES},
        "ratio": round(statistics.median(p / s for p, s in pairs), 3) if pairs else None,
        # A job's first run: the schemas learned from the batch itself (the timed runs start
        # knowing them, as a job's runs after its first do).
        "cold_schemas_eps": round(captured.events / bench.cold_seconds) if bench.cold_seconds else None,
        "record_bytes": captured.record_bytes,
        "size_ratio": round(schemas_bytes / max(1, plain_bytes), 2),
        "phases_s": {side: median_phases(bench.phases[side]) for side in SIDES},
        "seconds": {side: [round(s, 2) for s in bench.seconds[side]] for side in SIDES},
        "rounds": len(pairs),
        "ops": captured.ops,
        "capture_s": round(captured.capture_s, 2),
        "created_table": bench.created_table,
        "baseline": "the same events captured without schemas, into a table created beforehand",
        "mismatches": bench.mismatches,
        **extra,
    }


def report(out: dict[str, Any]) -> None:
    for side in SIDES:
        value, size = out[f"{side}_eps"], out["record_bytes"][side]
        rate = f"{value:,} events/s (median)" if value else "no figure (see the mismatch)"
        sizes = f"key {size['key']}, value {size['value']}"
        print(f"{side:>7}: {rate}; records {size['record']} bytes on average ({sizes})")
        print(f"         phases (medians): {out['phases_s'][side]}")
    print(
        f"ratio (schemas / plain) {out['ratio']} (goal >= 0.9); records {out['size_ratio']}x the size; "
        f"{out['events']:,} events; session start-up {out['session_start_s']} s; load average "
        f"{out['loadavg_before_after'][0]} before, {out['loadavg_before_after'][1]} after"
    )
    print(f"the table the job created: {', '.join(out['created_table'])}")
    print(json.dumps(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="~200k events, 3 rounds (default ~1M, 4)")
    parser.add_argument("--events", type=int, help="about this many events instead (a smaller trial)")
    parser.add_argument("--rounds", type=int, help="timed rounds, sides taking turns to go first")
    parser.add_argument("--driver-memory", default="4g", help="the Spark driver's (local mode: everything's) memory")
    parser.add_argument("--settle-s", type=float, default=10.0, help="at most this long a quiet wait per run (0: none)")
    args = parser.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 4)
    # SIGTERM as Ctrl-C: unwind, so the servers are stopped and the databases dropped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    loadavg = os.getloadavg()[0]
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="apply-schemas-") as tmp,
        PostgresServer.from_env() as pg,
        KafkaBroker.from_env() as broker,
    ):
        source_db = pg.create_database()
        try:
            events = args.events or (200_000 if args.quick else 1_000_000)
            captured = capture(pg, broker.bootstrap_servers, source_db, events, Path(tmp))
            print(
                f"captured {captured.events:,} events {captured.ops} twice in {captured.capture_s:.1f} s; "
                f"bytes per record {captured.record_bytes}",
                flush=True,
            )
            bench = Bench(pg, broker.bootstrap_servers, Path(tmp), source_db, captured, args)
            session_start = measure(bench)
        finally:
            pg.drop_database(source_db)
    extra = {
        "session_start_s": round(session_start, 2),
        "partitions": PARTITIONS,
        "loadavg_before_after": [round(loadavg, 1), round(os.getloadavg()[0], 1)],
        "total_s": round(time.monotonic() - started),
    }
    report(summary(bench, extra))
    if bench.mismatches:
        print("apply_schemas: FAILED, a target differs from the source:\n- " + "\n- ".join(bench.mismatches))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
