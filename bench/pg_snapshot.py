"""Initial-snapshot throughput: the engine against psql's COPY of the same table (issue 3).

A wide table (20 columns of mixed types) in a throwaway PostgreSQL. Baseline, same run:
``psql -c "COPY (SELECT * FROM wide) TO STDOUT"`` into a pipe this process counts lines from -
the server's raw output rate. No ``ORDER BY`` on either side: the engine's snapshot query is a
plain ``select ... from wide`` (a sequential scan), so COPY does the same scan and no sort.
The engine runs ``snapshot.mode=initial_only`` in a child process (events built, JSON
serialized, into a discarding consumer), at two table sizes, and reports its peak RSS for each:
it must not grow with the table. Both sides' row counts must equal the table's exactly (COPY's
lines and its ``COPY n`` tag; the engine's events once its snapshot ended by itself), else the
run fails. The large table is measured in three rounds of COPY and engine, alternating which goes
first, and the medians are compared (the machine's speed drifts within minutes). The engine's
process CPU per row is printed beside: unlike wall time it does not grow with the machine's load.
The last line is one JSON object with the ratio.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sources.lifecycle import SourcePhase
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer

ROUNDS = 3
COLUMNS = """
id int primary key, qty int, stock int, views bigint, rank smallint, flags int,
price numeric(12,2), cost numeric(12,2), tax numeric(12,2),
name text, sku text, city text, country text, note text,
created timestamptz, updated timestamptz, active bool, archived bool, day date, tags text
"""
FILL = """
insert into wide select g, g %% 1000, g %% 77, g * 3, g %% 100, g %% 7,
    g * 0.5, g * 0.25, g * 0.05, 'name-' || g, 'sku-' || g, 'city-' || (g %% 500), 'country-' || (g %% 50),
    repeat('n', 40), now(), now(), g %% 2 = 0, g %% 3 = 0, date '2024-01-01' + (g %% 365), 'a,b,c'
from generate_series(%s::int, %s::int) g
"""


def fill(server: PostgresServer, database: str, rows: int) -> None:
    with server.connect() as conn:
        conn.execute(f'create database "{database}"')
    with server.connect(database) as conn:
        conn.execute(f"create table wide ({COLUMNS})")
        for start in range(1, rows + 1, 100_000):
            conn.execute(FILL, (start, min(start + 99_999, rows)))
        conn.execute("vacuum analyze wide")


#: The baseline's query: the engine's snapshot reads the table unordered (a sequential scan).
COPY_QUERY = "SELECT * FROM wide"
#: psql's command tag after COPY ... TO STDOUT, on stdout after the data.
COPY_TAG = re.compile(rb"^COPY (\d+)$")


def psql_copy(server: PostgresServer, database: str, rows: int | None = None, query: str = COPY_QUERY) -> float:
    """Seconds for ``COPY (query) TO STDOUT`` through psql, its output counted as it streams
    (``bytes.count`` over 1 MiB reads: a small fraction of psql's own time). With ``rows`` the
    count must be exactly that: data lines (text COPY escapes newlines in values) and the tag."""
    command = [str(server.bindir / "psql"), "-h", server.host, "-p", str(server.port), "-U", server.user]
    command += ["-d", database, "-c", f"COPY ({query}) TO STDOUT"]
    started = time.perf_counter()
    lines, tail = 0, b""
    with subprocess.Popen(command, stdout=subprocess.PIPE) as psql:
        assert psql.stdout is not None
        while chunk := psql.stdout.read(1 << 20):
            lines += chunk.count(b"\n")
            tail = (tail + chunk)[-64:]
    elapsed = time.perf_counter() - started
    if psql.returncode != 0:
        raise SystemExit(f"psql COPY failed ({psql.returncode})")
    tag = COPY_TAG.match(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    data_lines = lines - 1 if tag else lines
    if rows is not None and (data_lines != rows or (tag and int(tag.group(1)) != rows)):
        raise SystemExit(f"psql COPY of {database}: {data_lines} lines, tag {tag and tag.group(0)!r}; expected {rows}")
    return elapsed


def child(args: argparse.Namespace) -> None:
    """Run in a fresh process: snapshot ``args.rows`` rows; print seconds and peak RSS."""
    count = [0]

    def consume(item: object) -> None:
        count[0] += 1

    engine = Engine(
        {
            "name": "snap",
            "connector.class": "postgres",
            "topic.prefix": "bench",
            "database.hostname": args.host,
            "database.port": args.port,
            "database.user": args.user,
            "database.dbname": args.database,
            "slot.name": f"snap_{args.database}",
            "snapshot.mode": "initial_only",
            "offset.storage": "memory",
            "heartbeat.interval.ms": 0,
            **({"snapshot.fetch.size": args.fetch_size} if args.fetch_size else {}),
        },
        consumer=consume,
        serializer=JsonSerializer(),
    )
    thread = threading.Thread(target=engine.run)
    cpu = time.process_time()
    started = time.perf_counter()
    thread.start()
    wait_until(lambda: count[0] >= args.rows, 3600, "snapshot delivered", interval=0.01)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    # Exactly: the source is done reading (initial_only: FINISHED), then the engine is closed, so
    # no event can come after the count is taken (a duplicate shows as more than the table's).
    wait_until(lambda: finished(engine), 120, "the snapshot finished", interval=0.01)
    engine.close(60)
    thread.join(60)
    if count[0] != args.rows:
        raise SystemExit(f"engine snapshot of {args.database}: {count[0]} events, expected exactly {args.rows}")
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "cpu_seconds": cpu,
                "rows": count[0],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def finished(engine: Engine) -> bool:
    """Every source task has read all it will (``snapshot.mode=initial_only``: FINISHED)."""
    lifecycles = [runner.task.lifecycle for runner in engine.tasks]
    return all(lc is not None and lc.phase is SourcePhase.FINISHED for lc in lifecycles)


def child_command(script: str, server: PostgresServer, database: str, **options: object) -> list[str]:
    """``python <script> --child`` with the server's address and ``--<option> <value>`` each."""
    command = [sys.executable, script, "--child", "--host", server.host, "--port", str(server.port)]
    command += ["--user", server.user, "--database", database]
    for name, value in options.items():
        command += [f"--{name}", str(value)]
    return command


def engine_snapshot(server: PostgresServer, database: str, rows: int, fetch_size: int | None) -> dict[str, float]:
    options = {"rows": rows, **({"fetch-size": fetch_size} if fetch_size else {})}
    out = subprocess.run(
        child_command(__file__, server, database, **options),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k and 400k rows instead of 250k and 2M")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("host", "user", "database"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--fetch-size", type=int, help="the engine's snapshot.fetch.size (default: its default)")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    small, large = (100_000, 400_000) if args.quick else (250_000, 2_000_000)
    with PostgresServer() as server:
        fill(server, "small", small)
        fill(server, "large", large)
        psql_copy(server, "small", small)
        psql_copy(server, "large", large)  # warm the cache for both sides
        small_run = engine_snapshot(server, "small", small, args.fetch_size)
        # The machine's speed drifts within minutes: rounds of COPY and engine, alternating which
        # goes first, medians of each.
        copies, runs = [], []
        for round_ in range(ROUNDS):
            if round_ % 2 == 0:
                copies.append(psql_copy(server, "large", large))
            runs.append(engine_snapshot(server, "large", large, args.fetch_size))
            if round_ % 2 == 1:
                copies.append(psql_copy(server, "large", large))
    copy_s = statistics.median(copies)
    seconds = [r["seconds"] for r in runs]
    large_run = {"seconds": statistics.median(seconds), "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}
    base_rate, engine_rate = large / copy_s, large / large_run["seconds"]
    listed = ", ".join(f"{c:.2f}s" for c in copies), ", ".join(f"{t:.2f}s" for t in seconds)
    print(f"psql COPY runs: {listed[0]}; engine runs: {listed[1]}")
    print(f"psql COPY:       {large} rows in {copy_s:.2f}s = {base_rate:,.0f} rows/s (median)")
    print(f"engine snapshot: {large} rows in {large_run['seconds']:.2f}s = {engine_rate:,.0f} rows/s (median)")
    cpu_us = statistics.median(r["cpu_seconds"] for r in runs) / large * 1e6
    print(f"engine process CPU: {cpu_us:.2f} us/row (median; the load does not inflate it as it does wall time)")
    print(f"peak RSS: {small_run['peak_rss_mb']:.0f} MB at {small} rows, {large_run['peak_rss_mb']:.0f} MB at {large}")
    print(
        json.dumps(
            {
                "benchmark": "pg_snapshot",
                "rows": large,
                "events_per_s": round(engine_rate),
                "baseline_events_per_s": round(base_rate),
                "baseline": "psql COPY",
                "baseline_query": COPY_QUERY,
                "rows_checked": "exact, both sides",
                "ratio": round(engine_rate / base_rate, 3),
                "engine_cpu_us_per_row": round(cpu_us, 2),
                "peak_rss_mb": {
                    str(small): round(small_run["peak_rss_mb"]),
                    str(large): round(large_run["peak_rss_mb"]),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
