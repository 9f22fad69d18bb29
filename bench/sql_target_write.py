"""The SQL target's write path on PostgreSQL (issue 27): ``apply_changes`` by multi-row
statements (the old path, ``copy_min_rows=None``) against COPY into a staging table then one
set-based upsert and delete (the new path, the defaults), against a plain COPY of the same rows
into an empty table (the baseline: what the server can take at all).

The load: N latest-per-key rows of one table (a bigint key, text, numeric, timestamptz, jsonb)
in one call, as one Spark partition would bring them: 90% upserts (half of them inserts, half
updates of rows already there), 10% deletes of rows already there. Before each timed run the
target is reset to the same N/2 rows. The rows come unpickled a batch at a time, as a Python
worker reads a partition (each side, the baseline too, pays that). Runs alternate between the sides; rates are medians.

Then the threshold sweep: one call of M upserts (updates) whose keys repeat every S rows, so that
every segment has S rows, by each path: rows/s per S. ``copy_min_rows``'s default is where COPY
starts to win.

    CDC_JARS=... python bench/sql_target_write.py [--rows 100000] [--repeats 3]

It also reports the time each path spends writing (in the dialect's COPY and statements: the
driver and the server) apart from the rest (Python: rows, decoding, grouping), the part COPY
can speed up. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import pickle
import statistics
import sys
import time
from collections import namedtuple
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.spark.targets.sql import SqlTargetSettings, apply_changes, clear_catalog_cache
from airflow_cdc.spark.targets.sql.postgres import POSTGRES

Row = namedtuple("Row", "table op key after unavailable position")
MODES = {"decimal.handling.mode": "string"}
TABLE = "create table {name} (id bigint primary key, name text, amount numeric(12,2), ts timestamptz, doc jsonb{extra})"
POSITION = ', _cdc_position varchar(64) collate "C"'


def after(i: int, version: int) -> dict[str, str]:
    return {
        "id": str(i),
        "name": f"customer {i} v{version}",
        "amount": f"{(i * 37 + version) % 100000}.{i % 100:02d}",
        "ts": f"2024-0{1 + i % 9}-1{i % 10}T12:{i % 60:02d}:0{version % 10}.123456Z",
        "doc": json.dumps({"i": i, "v": version, "tags": ["a", "b"]}),
    }


def load(n: int) -> tuple[list[Row], list[dict[str, str]]]:
    """The call's rows (latest per key) and the target's initial rows (keys 0 .. n/2)."""
    initial = [after(i, 0) for i in range(n // 2)]
    rows = []
    for k in range(n):
        # Keys 0..n/2 exist: every 5th of them is deleted (10% of the call), the rest updated;
        # keys n/2..n are inserts.
        position = f"{1_000_000 + k:032x}"
        if k < n // 2 and k % 5 == 0:
            rows.append(Row("src.t", "d", json.dumps({"id": k}), None, [], position))
        else:
            rows.append(Row("src.t", "u" if k < n // 2 else "c", json.dumps({"id": k}), after(k, 1), [], position))
    return rows, initial


def stream(batches: list[bytes]) -> Iterator[Row]:
    """The rows as a Python worker reads a partition: unpickled a batch at a time, never all
    alive at once (a list of them all would make every full garbage collection scan them)."""
    for batch in batches:
        yield from pickle.loads(batch)


def pickled(rows: list[Row], size: int = 1000) -> list[bytes]:
    return [pickle.dumps(rows[i : i + size]) for i in range(0, len(rows), size)]


def reset(conn: Any, initial: list[dict[str, str]]) -> None:
    conn.execute("truncate t")
    with conn.cursor().copy("copy t (id, name, amount, ts, doc, _cdc_position) from stdin") as copy:
        for values in initial:
            copy.write_row([*values.values(), f"{0:032x}"])
    conn.execute("vacuum analyze t")


#: Seconds spent in the dialect's writing methods (COPY and statements: the driver and the
#: server) during the last timed_apply; the rest of its time is Python (rows, decoding, groups).
WRITING = [0.0]


def _timed(method: Callable[..., int]) -> Callable[..., int]:
    def timed(*args: Any) -> int:
        start = time.perf_counter()
        try:
            return method(*args)
        finally:
            WRITING[0] += time.perf_counter() - start

    return timed


for _name in ("upsert", "delete", "upsert_staged", "delete_staged", "truncate"):
    setattr(POSTGRES, _name, _timed(getattr(POSTGRES, _name)))


def timed_apply(url: str, rows: list[bytes], **settings: Any) -> tuple[float, dict[str, int]]:
    clear_catalog_cache()  # each run reads the catalog, as a fresh worker would
    gc.collect()
    WRITING[0] = 0.0
    start = time.perf_counter()
    counts = apply_changes(stream(rows), SqlTargetSettings(url, tables={"src.t": "t"}, modes=MODES, **settings))
    return time.perf_counter() - start, counts


def timed_copy(conn: Any, rows: list[bytes], initial: list[dict[str, str]]) -> float:
    """COPY of the call's rows (a delete's row as its initial values) into an empty table."""
    conn.execute("drop table if exists plain")
    conn.execute(TABLE.format(name="plain", extra=POSITION))
    gc.collect()
    start = time.perf_counter()
    with conn.transaction(), conn.cursor().copy("copy plain from stdin") as copy:
        for row in stream(rows):
            values = row.after if row.after is not None else initial[json.loads(row.key)["id"]]
            copy.write_row([*values.values(), row.position])
    return time.perf_counter() - start


def sweep(conn: Any, url: str, sizes: list[int], total: int) -> dict[int, dict[str, float]]:
    result = {}
    for size in sizes:
        rows = pickled(
            [
                Row(
                    "src.t",
                    "u",
                    json.dumps({"id": k % size}),
                    after(k % size, 2 + k // size),
                    [],
                    f"{9_000_000 + k:032x}",
                )
                for k in range(total)
            ]
        )
        rates: dict[str, list[float]] = {"statements": [], "copy": []}
        for _ in range(2):
            for side, copy_min in (("statements", None), ("copy", 1)):
                seconds, _ = timed_apply(url, rows, copy_min_rows=copy_min)
                rates[side].append(total / seconds)
        result[size] = {side: round(max(r)) for side, r in rates.items()}
        print(
            f"segments of {size:5d} rows: statements {result[size]['statements']:>8,} rows/s, "
            f"copy {result[size]['copy']:>8,} rows/s",
            flush=True,
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweep-rows", type=int, default=20_000)
    args = parser.parse_args()
    listed, initial = load(args.rows)
    rows = pickled(listed)
    del listed
    times: dict[str, list[float]] = {"old": [], "new": [], "copy": []}
    writing: dict[str, list[float]] = {"old": [], "new": []}
    with PostgresServer() as server:
        database = server.create_database("bench")
        auth = quote(server.user) + (":" + quote(server.password) if server.password else "")
        url = f"postgresql://{auth}@{server.host}:{server.port}/{database}"
        with server.connect(database, autocommit=True) as conn:
            conn.execute(TABLE.format(name="t", extra=POSITION))
            for _ in range(args.repeats):
                for side in ("old", "new", "copy"):
                    reset(conn, initial)
                    if side == "copy":
                        times[side].append(timed_copy(conn, rows, initial))
                        continue
                    settings = {"copy_min_rows": None} if side == "old" else {}  # new: the defaults
                    seconds, counts = timed_apply(url, rows, **settings)
                    expected = {"upserted": args.rows - args.rows // 10, "deleted": args.rows // 10}
                    assert {k: counts[k] for k in expected} == expected, counts
                    times[side].append(seconds)
                    writing[side].append(WRITING[0])
                print("run: " + ", ".join(f"{s} {t[-1]:.2f}s" for s, t in times.items()), flush=True)
            sizes = [10, 50, 100, 250, 500, 1000, 2500]
            swept = sweep(conn, url, sizes, args.sweep_rows)
    rate = {side: args.rows / statistics.median(t) for side, t in times.items()}
    write = {side: statistics.median(t) for side, t in writing.items()}
    print(
        f"of which writing (COPY, statements: driver and server): old {write['old']:.2f}s, new {write['new']:.2f}s "
        f"(new/old speed {write['old'] / write['new']:.2f}); the rest is Python (rows, decoding, grouping)"
    )
    print(
        f"{args.rows} rows, one call: old (statements) {rate['old']:,.0f} rows/s, new (COPY + set-based) "
        f"{rate['new']:,.0f} rows/s, plain COPY {rate['copy']:,.0f} rows/s; new/old {rate['new'] / rate['old']:.2f}, "
        f"new/COPY {rate['new'] / rate['copy']:.2f}, old/COPY {rate['old'] / rate['copy']:.2f}"
    )
    print(
        json.dumps(
            {
                "benchmark": "sql_target_write",
                "rows": args.rows,
                "old_rows_per_s": round(rate["old"]),
                "new_rows_per_s": round(rate["new"]),
                "copy_rows_per_s": round(rate["copy"]),
                "ratio": round(rate["new"] / rate["old"], 3),
                "old_write_s": round(write["old"], 3),
                "new_write_s": round(write["new"], 3),
                "write_ratio": round(write["old"] / write["new"], 3),
                "new_vs_copy": round(rate["new"] / rate["copy"], 3),
                "old_vs_copy": round(rate["old"] / rate["copy"], 3),
                "sweep_rows_per_s": {str(k): v for k, v in swept.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
