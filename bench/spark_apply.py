"""Throughput of the Spark apply job into PostgreSQL, per source, against Spark's file source.

The events are real: a throwaway PostgreSQL table ``public.items`` (9 columns: int key, text,
numeric, bigint, timestamp, timestamptz, date, bool, text) is captured by our engine
(``EngineInstance``, Kafka sink, a topic of 3 partitions): an initial snapshot of N/2 rows
(``r``), then 1000-change transactions of updates on a hot quarter of the keys (each updated
two to three times), inserts, updates of the previous transaction's inserts and deletes (each
followed by its tombstone), so "the last change per key" has work to do. The same records, read
back from the topic, are written as changelog segments (50,000 lines) whose key and value are
JSON strings, the records' text as the Kafka sources give it (``line``): the baseline reads the
very same events in the same shape.

One SparkSession built by ``apply.session()`` (``local[2]``, the connector jars; the driver's
memory, 4g by default, through ``PYSPARK_SUBMIT_ARGS`` as spark-submit would set it: a 1M-event
batch fails at the default 1g); its start-up is reported apart (``session_start_s``). Each side
is ``apply.run`` with ``availableNow`` and no per-batch limit (with one, the Python source reads
a single batch per availableNow run), into a fresh target table, timed from ``run`` to its
return:

- ``native``: Spark's Kafka source (spark-sql-kafka-0-10);
- ``python``: our Python data source on kafka-python (``--source kafka-python``);
- ``file``: the baseline, Spark's JSON file source on the changelog.

An untimed warm-up first applies about 20,000 of the events (every n-th) every way: a fresh JVM
loads and compiles as it goes, and the first large run would pay for the others. Sides take
turns going first across rounds; rates are medians, ratios the medians of the rounds' ratios (the
machine's load moves). Every run must read every event and leave a table equal to the source
table (row count and an md5 over all columns), or the bench fails (exit status 1, the failure
printed after the JSON line). ``ratio`` = python / file (target >= 0.7), ``native_ratio`` =
native / file (target >= 1.0). If the Python source fails, its error is printed and native and
file are still measured (``python_error`` in the JSON). The last line is one JSON object.

    python bench/spark_apply.py --quick      # ~200k events, 3 rounds (full: ~1M events)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.spark.reading import SourceOptions

SIDES = ("native", "python", "file")
KINDS = {"native": "kafka", "python": "kafka-python", "file": "changelog"}
PARTITIONS = 3
SEGMENT_LINES = 50_000  # the changelog sink's segment.max.records default
WARM_EVENTS = 20_000  # about; every (events // WARM_EVENTS)-th record by offset
COLUMNS = "id, name, price, qty, seen, at, day, ok, note"
DDL = (
    "create table {} (id int primary key, name text, price numeric(12,2), qty bigint, seen timestamp, "
    "at timestamptz, day date, ok boolean, note text)"
)
FILL = (
    "insert into items select g, 'item ' || g, g * 1.25, g::bigint * 1000003, "
    "timestamp '2026-01-01 10:00:00.123456' + g * interval '1 second', "
    "timestamptz '2026-01-01 10:00:00+02' + g * interval '1 minute', date '2026-01-01' + (g %% 3650), "
    "g %% 2 = 0, repeat('n', 40) || g from generate_series(%s::int, %s::int) g"
)
#: One transaction of the change load: 1000 changes and 100 tombstones.
TXN_HOT_UPDATES, TXN_INSERTS, TXN_FRESH_UPDATES, TXN_DELETES = 600, 200, 100, 100
TXN_RECORDS = TXN_HOT_UPDATES + TXN_INSERTS + TXN_FRESH_UPDATES + 2 * TXN_DELETES


@dataclass
class Captured:
    topic: str
    warm_topic: str
    changelog: Path
    events: int
    ops: dict[str, int]
    capture_s: float


@dataclass
class Results:
    seconds: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})
    errors: dict[str, str] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)


# --- the source table and its capture ----------------------------------------------------------


def fill_source(pg: PostgresServer, database: str, rows: int) -> None:
    with pg.connect(database) as conn:
        conn.execute(DDL.format("items"))
        for start in range(1, rows + 1, 100_000):
            conn.execute(FILL, (start, min(start + 99_999, rows)))
        conn.execute("vacuum analyze items")


HOT_UPDATE = (
    "update items set qty = qty + 1, name = name || '+', price = price + 0.01, "
    "seen = seen + interval '1 second', ok = not ok where id between %s and %s"
)
FRESH_UPDATE = "update items set note = 'changed ' || id, at = at + interval '1 hour' where id between %s and %s"
DELETE = "delete from items where id between %s and %s or id between %s and %s"


def transaction(rows: int, txn: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """(op, statement, parameters) of one transaction of the change load: updates of 600 hot keys
    (the first quarter of the table, cycling), 200 inserts, updates of the previous
    transaction's first 100 inserts, deletes of 10 keys just updated and 90 untouched ones."""
    hot = rows // 4
    first = 1 + (txn * TXN_HOT_UPDATES) % (hot - TXN_HOT_UPDATES)
    new = rows + txn * TXN_INSERTS
    cold = rows // 2 + txn * (TXN_DELETES - 10)
    statements = [
        ("u", HOT_UPDATE, (first, first + TXN_HOT_UPDATES - 1)),
        ("c", FILL, (new + 1, new + TXN_INSERTS)),
        ("u", FRESH_UPDATE, (new - TXN_INSERTS + 1, new - TXN_INSERTS + TXN_FRESH_UPDATES)),
        ("d", DELETE, (first, first + 9, cold + 1, cold + TXN_DELETES - 10)),
    ]
    return statements if txn else statements[:2] + statements[3:]


def change_load(pg: PostgresServer, database: str, rows: int, transactions: int) -> Counter[str]:
    """The change load, one transaction after another; the changes it made per op."""
    counts = Counter[str]()
    with pg.connect(database, autocommit=False) as conn:
        for txn in range(transactions):
            for op, statement, params in transaction(rows, txn):
                counts[op] += conn.execute(statement, params).rowcount
            conn.commit()
    return counts


def engine_props(pg: PostgresServer, database: str, bootstrap: str, state: Path) -> dict[str, Any]:
    return {
        "name": f"bench-{database}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": database,
        "database.hostname": pg.host,
        "database.port": pg.port,
        "database.user": pg.user,
        **({"database.password": pg.password} if pg.password else {}),
        "database.dbname": database,
        "slot.name": f"slot_{database}",
        "publication.name": f"pub_{database}",
        "table.include.list": "public.items",
        "snapshot.mode": "initial",
        "state.dir": str(state),
        "api.enabled": False,
        "offset.flush.interval.ms": 100,
        "poll.interval.ms": 50,
        "slot.drop.on.stop": True,
        "sink.type": "kafka",
        "sink.kafka.producer.bootstrap.servers": bootstrap,
        "sink.kafka.client": confluent_or_default(),
        "topic.creation.default.partitions": PARTITIONS,
    }


def confluent_or_default() -> str:
    """librdkafka's producer when installed (15x kafka-python's): capture is not what we time."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "kafka-python"
    return "confluent"


def topic_size(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        return sum(consumer.end_offsets([TopicPartition(topic, p) for p in parts]).values())
    finally:
        consumer.close()


def capture(
    pg: PostgresServer, broker: KafkaBroker, database: str, rows: int, transactions: int, work: Path
) -> tuple[str, Counter[str]]:
    """The engine captures the snapshot, then the change load; the topic and the load's changes."""
    topic = f"{database}.public.items"
    bootstrap = broker.bootstrap_servers
    instance = EngineInstance(engine_props(pg, database, bootstrap, work / "state"))
    thread = threading.Thread(target=instance.run, name="bench-engine", daemon=True)
    thread.start()
    try:
        # The whole snapshot first, so every key has its ``r`` event before the stream.
        wait_until(lambda: topic_size(bootstrap, topic) >= rows, 600, "snapshot in Kafka", interval=0.5)
        changes = change_load(pg, database, rows, transactions)
        with pg.connect(database) as conn:
            lsn = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        wait_until(lambda: instance.position(target=lsn).reached, 600, "every change in Kafka", interval=0.2)
    finally:
        instance.request_stop()
        thread.join(60)
    return topic, changes


# --- the same events as a changelog, and a small warm-up copy ---------------------------------


def topic_records(bootstrap: str, topic: str) -> Iterator[Any]:
    """Every record of ``topic``, partition after partition, each in offset order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=8 << 20)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = consumer.end_offsets(parts)
        for part in parts:
            consumer.assign([part])
            consumer.seek_to_beginning(part)
            while consumer.position(part) < ends[part]:
                for batch in consumer.poll(timeout_ms=1000).values():
                    yield from batch
    finally:
        consumer.close()


def line(record: Any, seq: int) -> bytes:
    """A changelog line for a record read back from Kafka, its key and value as JSON *strings*:
    the shape the Kafka sources hand the job (the record's text). The engine's own line
    (``record_line``) nests the envelope, and Spark's JSON reader re-serialises a nested object
    to fill a string column, a cost the Kafka sides do not pay; the baseline must not pay it
    either, or ``ratio`` flatters them."""
    fields = {"topic": record.topic, "key": _text(record.key), "value": _text(record.value), "seq": seq}
    return orjson.dumps({**fields, "ts_ms": record.timestamp}) + b"\n"


def _text(blob: bytes | None) -> str | None:
    return None if blob is None else blob.decode("utf-8")


class Changelog:
    """Writes a topic's segments as the changelog sink lays them out."""

    def __init__(self, root: Path, topic: str) -> None:
        self.directory = root / topic
        self.directory.mkdir(parents=True)
        self.seq = 0
        self.lines: list[bytes] = []

    def add(self, record: Any) -> None:
        self.lines.append(line(record, self.seq))
        self.seq += 1
        if len(self.lines) == SEGMENT_LINES:
            self.publish()

    def publish(self) -> None:
        if self.lines:
            first = self.seq - len(self.lines)
            (self.directory / f"{first:020d}.jsonl").write_bytes(b"".join(self.lines))
            self.lines = []


def copy_out(bootstrap: str, topic: str, warm_topic: str, root: Path, stride: int) -> int:
    """The changelog of ``topic``; every ``stride``-th record (by offset) also to ``warm_topic``
    and its changelog. Returns the number of records."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(warm_topic, PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    main, warm = Changelog(root, topic), Changelog(root, warm_topic)
    for record in topic_records(bootstrap, topic):
        main.add(record)
        if record.offset % stride == 0:
            warm.add(record)
            producer.send(warm_topic, key=record.key, value=record.value)
    producer.flush()
    producer.close()
    main.publish()
    warm.publish()
    return main.seq


def prepare(pg: PostgresServer, broker: KafkaBroker, database: str, events: int, work: Path) -> Captured:
    rows = events // 2
    transactions = (events - rows) // TXN_RECORDS
    started = time.perf_counter()
    fill_source(pg, database, rows)
    topic, changes = capture(pg, broker, database, rows, transactions, work)
    capture_s = time.perf_counter() - started
    expected = rows + changes.total() + changes["d"]  # snapshot reads, changes, a tombstone per delete
    stride = max(1, expected // WARM_EVENTS)
    count = copy_out(broker.bootstrap_servers, topic, f"{topic}.warm", work / "changelog", stride)
    if count != expected:
        raise SystemExit(f"spark_apply: the topic holds {count} records, the load made {expected} ({changes})")
    ops = {"r": rows, **changes, "tombstones": changes["d"]}
    return Captured(topic, f"{topic}.warm", work / "changelog", count, ops, capture_s)


# --- the apply runs ----------------------------------------------------------------------------


@dataclass
class Bench:
    """What every run needs: the servers, the events, the session, and what the runs found."""

    pg: PostgresServer
    bootstrap: str
    work: Path
    captured: Captured
    source_db: str
    target_db: str
    spark: Any = None
    results: Results = field(default_factory=Results)


def target_url(pg: PostgresServer, database: str) -> str:
    password = f":{quote(pg.password, safe='')}" if pg.password else ""
    return f"postgresql://{quote(pg.user, safe='')}{password}@{pg.host}:{pg.port}/{database}"


def checksum(pg: PostgresServer, database: str, table: str) -> tuple[int, str]:
    with pg.connect(database) as conn:
        row = conn.execute(
            f"select count(*), md5(coalesce(string_agg(t::text, '|' order by id), '')) "
            f"from (select {COLUMNS} from {table}) t"
        ).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def source_options(bench: Bench, side: str, topic: str) -> SourceOptions:
    if side == "file":
        return SourceOptions(kind="changelog", changelog_dir=str(bench.captured.changelog), topics=(topic,))
    return SourceOptions(kind=KINDS[side], bootstrap_servers=bench.bootstrap, topics=(topic,))


def apply_once(bench: Bench, options: SourceOptions, table: str) -> tuple[float, int]:
    """A fresh target table, then one availableNow run into it: its seconds and records read."""
    from airflow_cdc.spark.apply import ApplyJob, run

    with bench.pg.connect(bench.target_db) as conn:
        conn.execute(f"drop table if exists {table}")
        conn.execute(DDL.format(table))
    job = ApplyJob(
        source=options,
        target_url=target_url(bench.pg, bench.target_db),
        checkpoint=str(bench.work / f"checkpoint-{table}"),
        table_map={"public.items": f"public.{table}"},
    )
    started = time.perf_counter()
    result = run(bench.spark, job)
    seconds = time.perf_counter() - started
    print(f"    {table}: {result['records']:,} records in {result['batches']} batch(es), {seconds:.2f} s", flush=True)
    return seconds, int(result["records"])


def run_side(bench: Bench, side: str, topic: str, table: str) -> tuple[float, int] | None:
    """One run; None after a failure of the Python source (reported; it is not run again)."""
    try:
        return apply_once(bench, source_options(bench, side, topic), table)
    except Exception as exc:
        if side != "python":
            raise
        bench.results.errors[side] = f"{type(exc).__name__}: {str(exc).strip()[:2000]}"
        print(f"    python source FAILED:\n{traceback.format_exc()[-4000:]}", flush=True)
        return None


def mismatch(bench: Bench, message: str) -> None:
    print(f"    MISMATCH {message}", flush=True)
    bench.results.mismatches.append(message)


def verify(bench: Bench, table: str, records: int, want: tuple[int, str]) -> None:
    """The run read every event and left the source table's rows."""
    if records != bench.captured.events:
        mismatch(bench, f"{table}: the job read {records:,} records of {bench.captured.events:,}")
    got = checksum(bench.pg, bench.target_db, table)
    if got != want:
        mismatch(bench, f"{table}: {got[0]} rows, md5 {got[1]}; the source has {want[0]} rows, md5 {want[1]}")


def warm_up(bench: Bench) -> None:
    for side in SIDES:
        run_side(bench, side, bench.captured.warm_topic, f"warm_{side}")


def timed_round(bench: Bench, number: int) -> None:
    want = checksum(bench.pg, bench.source_db, "items")
    order = SIDES[number % len(SIDES) :] + SIDES[: number % len(SIDES)]
    for side in order:
        if side in bench.results.errors:
            continue
        table = f"items_{side}_{number}"
        done = run_side(bench, side, bench.captured.topic, table)
        if done is None:
            continue
        seconds, records = done
        bench.results.seconds[side].append(seconds)
        verify(bench, table, records, want)
        eps = bench.captured.events / seconds
        print(f"round {number} {side:>6}: {eps:,.0f} events/s ({seconds:.2f} s)", flush=True)


def start_session(driver_memory: str) -> tuple[Any, float]:
    """The job's own session (``apply.session``) on 2 cores; its start-up seconds. The driver's
    memory is what spark-submit would give (``PYSPARK_SUBMIT_ARGS``, unless already set): at the
    default 1g a 1M-event batch runs out of execution memory."""
    from airflow_cdc.spark.apply import ApplyJob, session

    os.environ.setdefault("CDC_SPARK_MASTER", "local[2]")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-memory {driver_memory} pyspark-shell")
    started = time.perf_counter()
    spark = session(ApplyJob(source=SourceOptions(), target_url="postgresql://localhost/target", checkpoint=""))
    spark.sparkContext.setLogLevel("ERROR")
    return spark, time.perf_counter() - started


def measure(bench: Bench, rounds: int, driver_memory: str) -> float:
    """Session, warm-up, rounds; the session's start-up seconds."""
    bench.spark, session_start = start_session(driver_memory)
    try:
        print(f"session started in {session_start:.2f} s; warm-up", flush=True)
        warm_up(bench)
        for number in range(rounds):
            timed_round(bench, number)
    finally:
        bench.spark.stop()
    return session_start


# --- the report --------------------------------------------------------------------------------


def rate(bench: Bench, side: str) -> float | None:
    seconds = bench.results.seconds[side]
    return bench.captured.events / statistics.median(seconds) if seconds else None


def ratio_to_file(results: Results, side: str) -> float | None:
    """The median of the rounds' ratios (the sides of a round ran under the same machine load)."""
    pairs = list(zip(results.seconds["file"], results.seconds[side], strict=False))
    return round(statistics.median(f / s for f, s in pairs), 3) if pairs else None


def summary(bench: Bench, rows: int, session_start: float) -> dict[str, Any]:
    eps = {side: rate(bench, side) for side in SIDES}
    results = bench.results
    out: dict[str, Any] = {
        "benchmark": "spark_apply",
        "events": bench.captured.events,
        "rows": rows,
        **{f"{side}_eps": round(eps[side] or 0) or None for side in SIDES},
        "ratio": ratio_to_file(results, "python"),
        "native_ratio": ratio_to_file(results, "native"),
        "session_start_s": round(session_start, 2),
        "driver_memory": os.environ.get("PYSPARK_SUBMIT_ARGS"),
        "rounds": len(results.seconds["file"]),
        "seconds": {side: [round(s, 2) for s in results.seconds[side]] for side in SIDES},
        "ops": bench.captured.ops,
        "capture_s": round(bench.captured.capture_s, 2),
        "baseline": "Spark's JSON file source on the same events, key and value as JSON strings",
        "mismatches": len(results.mismatches),
    }
    if results.errors:
        out["python_error"] = results.errors.get("python")
    return out


def report(out: dict[str, Any]) -> None:
    for side in SIDES:
        value = out[f"{side}_eps"]
        print(f"{side:>6}: " + (f"{value:,} events/s (median)" if value else "no result"))
    print(
        f"ratio (python / file) {out['ratio']} (target >= 0.7), native_ratio (native / file) "
        f"{out['native_ratio']} (target >= 1.0); {out['events']:,} events, {out['rows']:,} final rows, "
        f"session start-up {out['session_start_s']} s"
    )
    if out.get("python_error"):
        print(f"python source error: {out['python_error']}")
    print(json.dumps(out))


def bench_on(pg: PostgresServer, work: Path, args: argparse.Namespace) -> tuple[Bench, int, float]:
    """Capture, then measure; (bench, final rows of the source, session start-up seconds)."""
    source_db, target_db = pg.create_database(), pg.create_database()
    try:
        with KafkaBroker.from_env() as broker:
            captured = prepare(pg, broker, source_db, 200_000 if args.quick else 1_000_000, work)
            print(f"captured {captured.events:,} events {captured.ops} in {captured.capture_s:.1f} s", flush=True)
            bench = Bench(pg, broker.bootstrap_servers, work, captured, source_db, target_db)
            session_start = measure(bench, max(1, args.rounds), args.driver_memory)
        return bench, checksum(pg, source_db, "items")[0], session_start
    finally:
        for database in (source_db, target_db):
            pg.drop_database(database)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="~200k events (default ~1M)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds, sides taking turns to go first (3)")
    parser.add_argument("--driver-memory", default="4g", help="the Spark driver's (local mode: everything's) memory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spark-apply-bench-") as tmp, PostgresServer.from_env() as pg:
        bench, rows, session_start = bench_on(pg, Path(tmp), args)
    report(summary(bench, rows, session_start))
    if bench.results.mismatches:
        print("spark_apply: FAILED, a target differs from the source:\n- " + "\n- ".join(bench.results.mismatches))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
