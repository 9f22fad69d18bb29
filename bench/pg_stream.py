"""Streaming throughput: the engine against pg_recvlogical on the same WAL (issue 3).

A throwaway PostgreSQL gets two logical slots (pgoutput) before a mixed insert/update/delete
workload. pg_recvlogical - the server's C client - drains one slot to /dev/null: that is the
server's decoding rate, the practical limit. The engine drains the other through the full path
(pgoutput decoding, value conversion, Debezium envelope, JSON serialization) into a discarding
consumer. The last line is one JSON object with the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer


def workload(conn, changes: int) -> int:
    """Inserts, then updates and deletes: 50% / 30% / 20% of ``changes`` rows, 1000 per txn."""
    inserts, updates, deletes = changes // 2, changes * 3 // 10, changes // 5
    conn.execute(
        "create table orders (id int primary key, customer text, amount numeric(10,2), "
        "status text, created timestamptz)"
    )
    for start in range(0, inserts, 1000):
        conn.execute(
            "insert into orders select g, 'customer-' || g, g * 1.25, 'new', now() "
            "from generate_series(%s::int, %s::int) g",
            (start + 1, min(start + 1000, inserts)),
        )
    for start in range(0, updates, 1000):
        conn.execute(
            "update orders set status = 'paid', amount = amount + 1 where id between %s and %s",
            (start + 1, min(start + 1000, updates)),
        )
    for start in range(0, deletes, 1000):
        conn.execute(
            "delete from orders where id between %s and %s",
            (inserts - start - min(1000, deletes - start) + 1, inserts - start),
        )
    return inserts + updates + deletes


REPEATS = 3


def run_recvlogical(server: PostgresServer, endpos: str, slot: str) -> float:
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
            "/dev/null",
            "-o",
            "proto_version=1",
            "-o",
            "publication_names=bench",
        ],
        check=True,
    )
    return time.perf_counter() - started


def run_engine(server: PostgresServer, changes: int, slot: str) -> float:
    count = [0]

    def consume(item) -> None:
        count[0] += 1  # ORDERED: called from the task thread only

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
    return elapsed


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
            changes = workload(conn, wanted)
            endpos = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]
        baselines, engines = [], []
        for i in range(REPEATS):  # alternate, so that machine noise hits both sides alike
            baselines.append(run_recvlogical(server, endpos, f"baseline{i}"))
            engines.append(run_engine(server, changes, f"engine{i}"))
        baseline_s, engine_s = statistics.median(baselines), statistics.median(engines)
    base_rate, engine_rate = changes / baseline_s, changes / engine_s
    print(
        f"pg_recvlogical runs: {', '.join(f'{x:.2f}s' for x in baselines)}; engine runs: "
        f"{', '.join(f'{x:.2f}s' for x in engines)}"
    )
    print(f"pg_recvlogical: {changes} changes in {baseline_s:.2f}s = {base_rate:,.0f} changes/s (median)")
    print(f"engine:         {changes} changes in {engine_s:.2f}s = {engine_rate:,.0f} changes/s (median)")
    print(
        json.dumps(
            {
                "benchmark": "pg_stream",
                "changes": changes,
                "events_per_s": round(engine_rate),
                "baseline_events_per_s": round(base_rate),
                "baseline": "pg_recvlogical",
                "ratio": round(engine_rate / base_rate, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
