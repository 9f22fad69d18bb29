"""The lake targets' tables of one batch applied at once against one after another.

One batch of changes over ``--tables`` Delta (or Parquet) tables, ``--rows`` keys each (inserts,
then in the same batch updates of half of them and deletes of a tenth: the latest frame holds
the last change per key), applied by ``LakeTarget.apply`` into fresh tables with
``parallel_tables`` 1 (one after another, the old way) and 4, taking turns across
``--rounds`` rounds in the job's own session (``apply.session``, ``local[2]``). Every run must
leave every table with exactly the expected rows, or the bench fails. ``speedup`` = the median of
the rounds' sequential / parallel seconds. The last line is one JSON object.

    python bench/lake_tables.py --quick        # 8 tables x 2,000 keys, 3 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.spark.frames import LATEST_SCHEMA
from airflow_cdc.spark.reading import SourceOptions
from airflow_cdc.spark.targets.lake import LakeTarget, create_table


def latest_rows(tables: int, rows: int) -> tuple[list[tuple[Any, ...]], dict[str, set[tuple[int, str]]]]:
    """The batch's latest frame and what each table must hold after it."""
    out, want = [], {}
    for t in range(tables):
        table = f"public.t{t}"
        want[table] = set()
        for key in range(rows):
            position = f"{t * rows + key:032x}"
            if key % 10 == 0:
                out.append((table, "d", json.dumps({"id": key}), None, [], position))
                continue
            value = f"{table}-{key}-{'updated' if key % 2 else 'new'}"
            out.append(
                (table, "u" if key % 2 else "c", json.dumps({"id": key}), {"id": str(key), "v": value}, [], position)
            )
            want[table].add((key, value))
    return out, want


def run(spark: Any, kind: str, root: Path, parallel: int, frame: Any, want: dict[str, set[tuple[int, str]]]) -> float:
    url = f"{kind}:{root}"
    paths = {table: create_table(spark, url, table, "id int, v string") for table in want}
    target = LakeTarget(url, {}, {})
    target.parallel_tables = parallel
    started = time.perf_counter()
    target.apply(frame)
    seconds = time.perf_counter() - started
    for table, path in paths.items():
        if kind == "delta":
            got = spark.read.format("delta").load(str(path))
        else:
            got = spark.read.parquet(str(path / (path / "_current").read_text().strip()))
        rows = {(r.id, r.v) for r in got.select("id", "v").collect()}
        if rows != want[table]:
            raise SystemExit(f"{table} ({kind}, parallel {parallel}) differs from its changes")
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--rows", type=int)
    p.add_argument("--rounds", type=int)
    p.add_argument("--kind", choices=("delta", "parquet"), default="delta")
    args = p.parse_args()
    rows = args.rows or (2000 if args.quick else 20000)
    rounds = args.rounds or (3 if args.quick else 5)
    from airflow_cdc.spark.apply import ApplyJob, session

    os.environ.setdefault("CDC_SPARK_MASTER", "local[2]")
    spark = session(ApplyJob(source=SourceOptions(), target_url=f"{args.kind}:/unused", checkpoint=""))
    spark.sparkContext.setLogLevel("ERROR")
    seconds: dict[int, list[float]] = {1: [], 4: []}
    try:
        batch, want = latest_rows(args.tables, rows)
        frame = spark.createDataFrame(batch, LATEST_SCHEMA).cache()
        frame.count()
        with tempfile.TemporaryDirectory(prefix="lake-tables-bench-") as tmp:
            run(spark, args.kind, Path(tmp, "warm"), 4, frame, want)  # the JVM's first pass compiles
            for number in range(rounds):
                for parallel in (1, 4) if number % 2 == 0 else (4, 1):
                    took = run(spark, args.kind, Path(tmp, f"r{number}-p{parallel}"), parallel, frame, want)
                    seconds[parallel].append(took)
                    print(f"round {number} parallel_tables={parallel}: {took:.2f} s", flush=True)
    finally:
        spark.stop()
    speedups = [s / p for s, p in zip(seconds[1], seconds[4], strict=True)]
    out = {
        "kind": args.kind,
        "tables": args.tables,
        "keys_per_table": rows,
        "rounds": rounds,
        "sequential_s": round(statistics.median(seconds[1]), 2),
        "parallel_s": round(statistics.median(seconds[4]), 2),
        "speedup": round(statistics.median(speedups), 2),
        "cores": "local[2]",
        "load": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
