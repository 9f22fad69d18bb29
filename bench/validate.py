"""The drift check on a table without differences (issue 29, part 4): how long it takes to
compare a source table and its target, against the baseline of reading each side once.

PostgreSQL (a throwaway server): a source table of N rows (a bigint key, text, numeric(12,2),
timestamptz, a nullable text) and its target as the apply job keeps it (``numeric`` without
scale, ``_cdc_position``), with the same rows, in two databases of the server.

* ``validate``: :func:`airflow_cdc.drift.compare` (bounds, then one grouped scan per side over
  1024 key ranges; the rows' canonical text is hashed by each server).
* ``baseline``: each side read once by the server, hashing every row, nothing leaving it:
  ``select count(*), sum(hashtext(t::text)) from t``, one side after the other.

"Read once" is checked from ``pg_stat_user_tables``: per side, the tuples read by sequential
scans equal the table's rows, and no index scan read more than the two bound lookups.

    python bench/validate.py [--rows 1000000] [--repeats 3]

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.drift import TableSide, compare
from airflow_cdc.drift.dialects import PostgresDialect
from airflow_cdc.local.postgres import PostgresServer

SOURCE = "create table orders (id bigint primary key, name text, amount numeric(12,2), ts timestamptz, note text)"
TARGET = (
    "create table orders (id bigint primary key, name text, amount numeric, ts timestamptz, note text, "
    '_cdc_position varchar(64) collate "C")'
)
FILL = (
    "insert into orders select g, 'customer ' || g, (g * 37 % 100000) + (g % 100) / 100.0, "
    "timestamptz '2026-01-01 00:00:00+00' + g * interval '1.25 second', case when g % 5 = 0 then null else 'n' || g end"
    "{extra} from generate_series(1, {rows}) g"
)


def scans(conn: Any) -> tuple[int, int]:
    """(tuples read by sequential scans, by index scans) of ``orders`` so far."""
    conn.execute("select pg_stat_clear_snapshot()")
    row = conn.execute(
        "select coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0) from pg_stat_user_tables where relname = 'orders'"
    ).fetchone()
    return int(row[0]), int(row[1])


def flushed(conn: Any) -> None:
    # Statistics reach pg_stat_* when the backend reports them (at most once a second when idle,
    # at once on pg_stat_force_next_flush, PostgreSQL 15+).
    conn.execute("select pg_stat_force_next_flush()")


def baseline(source: Any, target: Any) -> float:
    started = time.perf_counter()
    for conn in (source, target):
        conn.execute("select count(*), sum(hashtext(t::text)) from orders t").fetchone()
    return time.perf_counter() - started


def validate(source: Any, target: Any) -> tuple[float, dict[str, Any]]:
    dialect = PostgresDialect()
    mine, theirs = TableSide(dialect, source, "public.orders"), TableSide(dialect, target, "public.orders")
    started = time.perf_counter()
    drift = compare(mine, theirs)
    elapsed = time.perf_counter() - started
    assert not drift.found, drift.to_json()
    return elapsed, {"queries": [mine.queries, theirs.queries], "rows": [drift.source_rows, drift.target_rows]}


def _listed(runs: list[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with PostgresServer() as server:
        source_db, target_db = server.create_database("bench_source"), server.create_database("bench_target")
        with server.connect(source_db) as source, server.connect(target_db) as target:
            source.execute(SOURCE)
            source.execute(FILL.format(rows=args.rows, extra=""))
            target.execute(TARGET)
            target.execute(FILL.format(rows=args.rows, extra=", lpad('', 32, '0')"))
            for conn in (source, target):
                conn.execute("vacuum analyze orders")
            baseline(source, target)  # warm: both tables in shared buffers / the page cache
            validate(source, target)
            base_runs, check_runs, reads = [], [], []
            for _ in range(args.repeats):
                base_runs.append(baseline(source, target))
                for conn in (source, target):
                    flushed(conn)
                before = [scans(source), scans(target)]
                seconds, shape = validate(source, target)
                check_runs.append(seconds)
                for conn in (source, target):
                    flushed(conn)
                after = [scans(source), scans(target)]
                reads.append([[a[0] - b[0], a[1] - b[1]] for a, b in zip(after, before, strict=True)])
            base, check = statistics.median(base_runs), statistics.median(check_runs)
            once = all(side[0] == args.rows and side[1] <= 2 for run in reads for side in run)
            print(f"rows per side:                 {args.rows}")
            print(f"baseline (each side hashed once): {base:.2f} s   (runs {_listed(base_runs)})")
            print(f"validate (no difference):         {check:.2f} s   (runs {_listed(check_runs)})")
            print(f"ratio validate / baseline:        {check / base:.2f}")
            print(f"tuples read [seq, index] per side and run: {reads}  -> each side read once: {once}")
            print(f"load: {os.getloadavg()}")
            print(
                json.dumps(
                    {
                        "bench": "validate",
                        "rows": args.rows,
                        "baseline_s": round(base, 3),
                        "validate_s": round(check, 3),
                        "ratio": round(check / base, 3),
                        "read_once": once,
                        "queries": shape["queries"],
                        "loadavg": os.getloadavg(),
                    }
                )
            )


if __name__ == "__main__":
    main()
