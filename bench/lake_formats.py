"""One table's MERGE on each lake format: Delta against Iceberg (and Parquet's rewrite).

Per format and round, a fresh table of ``--rows`` keys is written by one batch of inserts, then
changed by one batch that updates every key (``LakeTarget.apply``, the job's own session,
``local[2]``). Both must leave the table with exactly the expected rows, or the bench fails. The
medians over ``--rounds`` rounds, formats taking turns; the last line is one JSON object.

    python bench/lake_formats.py --quick      # 10,000 keys, 3 rounds
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

TABLE = "public.items"


def batch(rows: int, update: bool) -> list[tuple[Any, ...]]:
    base = rows if update else 0
    return [
        (
            TABLE,
            "u" if update else "c",
            json.dumps({"id": key}),
            {"id": str(key), "v": f"{'updated' if update else 'new'}-{key}", "n": str(key * 7)},
            [],
            f"{base + key:032x}",
        )
        for key in range(rows)
    ]


def rows_of(spark: Any, target: LakeTarget) -> set[tuple[Any, ...]]:
    frame = target.read(spark, TABLE)
    return {tuple(r) for r in frame.select("id", "v").collect()}


def one(spark: Any, kind: str, root: Path, inserts: Any, updates: Any, rows: int) -> tuple[float, float]:
    url = f"{kind}:{root}"
    create_table(spark, url, TABLE, "id int, v string, n bigint")
    target = LakeTarget(url, {}, {})
    started = time.perf_counter()
    target.apply(inserts)
    inserted = time.perf_counter() - started
    started = time.perf_counter()
    target.apply(updates)
    updated = time.perf_counter() - started
    if rows_of(spark, target) != {(k, f"updated-{k}") for k in range(rows)}:
        raise SystemExit(f"{kind}: the table differs from its changes")
    return inserted, updated


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--rounds", type=int)
    p.add_argument("--kinds", default="delta,iceberg,parquet")
    args = p.parse_args()
    rounds = args.rounds or (3 if args.quick else 5)
    kinds = args.kinds.split(",")
    from airflow_cdc.spark.apply import ApplyJob, session

    os.environ.setdefault("CDC_SPARK_MASTER", "local[2]")
    spark = session(ApplyJob(source=SourceOptions(), target_url="delta:/unused", checkpoint=""))
    spark.sparkContext.setLogLevel("ERROR")
    seconds: dict[str, dict[str, list[float]]] = {k: {"insert": [], "merge": []} for k in kinds}
    try:
        inserts = spark.createDataFrame(batch(args.rows, False), LATEST_SCHEMA).cache()
        updates = spark.createDataFrame(batch(args.rows, True), LATEST_SCHEMA).cache()
        inserts.count(), updates.count()
        with tempfile.TemporaryDirectory(prefix="lake-formats-bench-") as tmp:
            for kind in kinds:  # the JVM's first pass compiles
                one(spark, kind, Path(tmp, f"warm-{kind}"), inserts, updates, args.rows)
            for number in range(rounds):
                for kind in kinds if number % 2 == 0 else reversed(kinds):
                    inserted, merged = one(spark, kind, Path(tmp, f"r{number}-{kind}"), inserts, updates, args.rows)
                    seconds[kind]["insert"].append(inserted)
                    seconds[kind]["merge"].append(merged)
                    print(f"round {number} {kind}: insert {inserted:.2f} s, merge {merged:.2f} s", flush=True)
    finally:
        spark.stop()
    out: dict[str, Any] = {"rows": args.rows, "rounds": rounds, "cores": "local[2]"}
    for kind in kinds:
        out[f"{kind}_insert_s"] = round(statistics.median(seconds[kind]["insert"]), 2)
        out[f"{kind}_merge_s"] = round(statistics.median(seconds[kind]["merge"]), 2)
    out["load"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
