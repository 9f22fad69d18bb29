"""Streaming throughput: the engine against pg_recvlogical on the same WAL (issue 3).

A throwaway PostgreSQL gets two logical slots (pgoutput) before a mixed insert/update/delete
workload. pg_recvlogical - the server's C client - drains one slot to /dev/null: that is the
server's decoding rate, the practical limit. The engine drains the other through the full path
(pgoutput decoding, value conversion, Debezium envelope, JSON serialization) into a discarding
consumer. Three rounds, alternating which side goes first (the machine's speed drifts within
minutes); medians compared. Both sides' counts must be exact: pg_recvlogical's output (pgoutput
is binary: its messages counted by type, I/U/D) and the engine's events once it has read to the
load's end. The last line is one JSON object with the ratio.

Beside it, ``cpu_us_per_change``: the engine's CPU path alone (CopyData unwrapping, pgoutput
decoding, value conversion, envelope, JSON) over the same WAL read once into memory, in process
CPU time per change - what the load of a shared machine changes least. ``compiled`` says whether
the mypyc build of the hot modules ran (ADR 0033; ``AIRFLOW_CDC_COMPILED=0`` for the pure ones).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sources.postgres import compiled, pgoutput
from airflow_cdc.engine.sources.postgres.catalog import Catalog, TableFilter
from airflow_cdc.engine.sources.postgres.stream import ReplicationStream
from airflow_cdc.engine.sources.postgres.transactions import change_builder
from airflow_cdc.engine.sources.postgres.types import ValueModes
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer


def workload(conn, changes: int) -> dict[str, int]:
    """Inserts, then updates and deletes: 50% / 30% / 20% of ``changes`` rows, 1000 per txn."""
    inserts, updates, deletes = changes // 2, changes * 3 // 10, changes // 5
    conn.execute(
        "create table orders (id int primary key, customer text, amount numeric(10,2), "
        "status text, created timestamptz)"
    )
    ops: Counter[str] = Counter()
    for start in range(0, inserts, 1000):
        ops["c"] += conn.execute(
            "insert into orders select g, 'customer-' || g, g * 1.25, 'new', now() "
            "from generate_series(%s::int, %s::int) g",
            (start + 1, min(start + 1000, inserts)),
        ).rowcount
    for start in range(0, updates, 1000):
        ops["u"] += conn.execute(
            "update orders set status = 'paid', amount = amount + 1 where id between %s and %s",
            (start + 1, min(start + 1000, updates)),
        ).rowcount
    for start in range(0, deletes, 1000):
        ops["d"] += conn.execute(
            "delete from orders where id between %s and %s",
            (inserts - start - min(1000, deletes - start) + 1, inserts - start),
        ).rowcount
    return dict(ops)


REPEATS = 3
#: pg_recvlogical's output goes to memory (tmpfs) where there is one: writing it costs little.
OUTPUT_DIR = "/dev/shm" if Path("/dev/shm").is_dir() else None
PGOUTPUT_OPS = {pgoutput.Insert: "c", pgoutput.Update: "u", pgoutput.Delete: "d"}


def count_pgoutput(path: Path) -> dict[str, int]:
    """Row changes in pg_recvlogical's output: each pgoutput message then a newline. pgoutput has
    no length prefix, so the engine's own decoder reads the messages one after the other."""
    reader = pgoutput._Reader(path.read_bytes())
    ops: Counter[str] = Counter()
    while reader.pos < len(reader.data):
        message = pgoutput._DECODERS[reader.char()](reader)
        if reader._take(1) != b"\n":
            raise SystemExit(f"{path}: no newline after a {type(message).__name__} at byte {reader.pos - 1}")
        op = PGOUTPUT_OPS.get(type(message))
        if op:
            ops[op] += 1
    return dict(ops)


def run_recvlogical(server: PostgresServer, endpos: str, slot: str, out: Path) -> float:
    """Seconds for pg_recvlogical to drain ``slot`` to ``endpos`` into ``out`` (a file: counted
    after the clock stops)."""
    started = time.perf_counter()
    subprocess.run(
        [
            str(server.bindir / "pg_recvlogical"),
            "-h",
            server.host,
            "-p",
            str(server.port),
            "-U",
            server.user,
            "-d",
            "bench",
            "--slot",
            slot,
            "--start",
            "--endpos",
            endpos,
            "--no-loop",
            "-f",
            str(out),
            "-o",
            "proto_version=1",
            "-o",
            "publication_names=bench",
        ],
        check=True,
    )
    return time.perf_counter() - started


def run_engine(server: PostgresServer, expected: dict[str, int], slot: str) -> float:
    changes = sum(expected.values())
    count = [0]
    ops: Counter[str] = Counter()

    def consume(item) -> None:  # ORDERED: called from the task thread only
        count[0] += 1
        ops[item.record.op] += 1  # an attribute and a dict: ~0.1 us of the ~20 us an event costs

    engine = Engine(
        {
            "name": "bench",
            "connector.class": "postgres",
            "topic.prefix": "bench",
            "database.hostname": server.host,
            "database.port": server.port,
            "database.user": server.user,
            "database.dbname": "bench",
            "slot.name": slot,
            "publication.name": "bench",
            "snapshot.mode": "no_data",
            "tombstones.on.delete": False,
            "offset.storage": "memory",
            "offset.flush.interval.ms": 1000,
            "heartbeat.interval.ms": 0,
        },
        consumer=consume,
        serializer=JsonSerializer(),
    )
    thread = threading.Thread(target=engine.run)
    started = time.perf_counter()
    thread.start()
    wait_until(lambda: count[0] >= changes, 1800, "every change delivered", interval=0.01)
    elapsed = time.perf_counter() - started
    engine.close(60)
    thread.join(60)
    # Exactly, by op: nothing but the load is in the WAL, so one more is a duplicate (counted
    # after the close: nothing arrives later), one fewer a loss.
    if dict(ops) != expected:
        raise SystemExit(f"engine on {slot}: {dict(ops)} events, expected exactly {expected}")
    return elapsed


def capture(server: PostgresServer, slot: str, endpos: int) -> list[bytes]:
    """The slot's CopyData messages up to the commit at ``endpos``, as the stream receives them."""
    stream = ReplicationStream.connect(server.dsn("bench"))
    try:
        stream.start(slot, "bench", 0)
        raw: list[bytes] = []
        while True:
            message = stream.read(60)
            if message is None:
                raise SystemExit(f"capture of {slot}: no message for 60 s before {pgoutput.format_lsn(endpos)}")
            if not isinstance(message, pgoutput.XLogData):
                continue  # a keepalive
            raw.append(b"w" + pgoutput._XLOG.pack(message.start_lsn, message.wal_end, 0) + message.payload)
            if message.payload[:1] == b"C" and message.wal_end >= endpos:
                return raw
    finally:
        stream.close()


def cpu_path(server: PostgresServer, raw: list[bytes], expected: dict[str, int]) -> float:
    """CPU microseconds per change of CopyData -> pgoutput -> Debezium values -> JSON, the best
    of three passes over ``raw`` (a fresh builder each: the relation is planned in the pass)."""
    serializer, best = JsonSerializer(), float("inf")
    with server.connect("bench") as conn:
        for _ in range(3):
            builder = change_builder(
                None,
                server="bench",
                database="bench",
                partition={"server": "bench"},
                topic=lambda schema, table: f"bench.{schema}.{table}",
                catalog=Catalog(conn),
                modes=ValueModes(),
                filters=TableFilter([], [], []),
                tombstones=False,
                skipped=frozenset(),
                resume=None,
            )
            ops: Counter[str] = Counter()
            started = time.process_time()
            for data in raw:
                message = pgoutput.decode_copy_data(data)
                if type(message) is pgoutput.XLogData:
                    for record in builder.handle(pgoutput.decode(message.payload), message.start_lsn):
                        if record.topic:
                            serializer.serialize(record)
                            ops[record.value["op"]] += 1
            best = min(best, time.process_time() - started)
            if dict(ops) != expected:
                raise SystemExit(f"CPU path: {dict(ops)} events, expected exactly {expected}")
    return best * 1e6 / sum(expected.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200k changes instead of 1M")
    args = parser.parse_args()
    wanted = 200_000 if args.quick else 1_000_000
    with PostgresServer() as server:
        with server.connect() as conn:
            conn.execute("create database bench")
        with server.connect("bench") as conn:
            conn.execute("create publication bench for all tables")
            for i in range(REPEATS):  # every slot sees the same WAL
                conn.execute("select pg_create_logical_replication_slot(%s, 'pgoutput')", (f"baseline{i}",))
                conn.execute("select pg_create_logical_replication_slot(%s, 'pgoutput')", (f"engine{i}",))
            conn.execute("select pg_create_logical_replication_slot('cpu', 'pgoutput')")
            expected = workload(conn, wanted)
            endpos = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]
        changes = sum(expected.values())
        baselines, engines = [], []
        for i in range(REPEATS):  # alternate who goes first, so that machine noise hits both alike
            for side in ("baseline", "engine") if i % 2 == 0 else ("engine", "baseline"):
                if side == "engine":
                    engines.append(run_engine(server, expected, f"engine{i}"))
                    continue
                with tempfile.TemporaryDirectory(dir=OUTPUT_DIR) as out:
                    output = Path(out) / "recvlogical.out"
                    baselines.append(run_recvlogical(server, endpos, f"baseline{i}", output))
                    got = count_pgoutput(output)
                if got != expected:
                    raise SystemExit(f"pg_recvlogical on baseline{i}: {got} changes, expected exactly {expected}")
        baseline_s, engine_s = statistics.median(baselines), statistics.median(engines)
        cpu_us = cpu_path(server, capture(server, "cpu", pgoutput.parse_lsn(endpos)), expected)
    base_rate, engine_rate = changes / baseline_s, changes / engine_s
    print(
        f"pg_recvlogical runs: {', '.join(f'{x:.2f}s' for x in baselines)}; engine runs: "
        f"{', '.join(f'{x:.2f}s' for x in engines)}"
    )
    print(f"pg_recvlogical: {changes} changes in {baseline_s:.2f}s = {base_rate:,.0f} changes/s (median)")
    print(f"engine:         {changes} changes in {engine_s:.2f}s = {engine_rate:,.0f} changes/s (median)")
    print(f"CPU path:       {cpu_us:.2f} us per change (compiled modules: {compiled.active()})")
    print(
        json.dumps(
            {
                "benchmark": "pg_stream",
                "changes": changes,
                "events_per_s": round(engine_rate),
                "baseline_events_per_s": round(base_rate),
                "baseline": "pg_recvlogical",
                "first": "alternating, baseline first in even rounds",
                "counts_checked": "exact per op, both sides",
                "ratio": round(engine_rate / base_rate, 3),
                "cpu_us_per_change": round(cpu_us, 2),
                "compiled": compiled.active(),
            }
        )
    )


if __name__ == "__main__":
    main()
