"""Incremental-snapshot throughput: DBLog watermarked chunks against psql's COPY of the same table.

A wide table (bench/pg_snapshot.py's 20 columns of mixed types) and Debezium's signal table in a
throwaway PostgreSQL. Baseline, same run: ``psql -c "COPY (SELECT * FROM wide ORDER BY id) TO
STDOUT" > /dev/null`` - the server's raw output rate.

The engine runs ``snapshot.mode=no_data`` in a child process (so only the incremental snapshot
reads the existing rows; events built, JSON serialized, into a discarding consumer) and is sent
``execute-snapshot`` for ``public.wide`` through the api channel; watermarks go to the signal
table (``insert_insert``). Meanwhile a thread in this process runs a light write load on the same
table: ~200 transactions/s, each one insert of a new row and one update of a random existing row,
so windows see real changes to deduplicate and the stream carries them too.

Measured: ``op=r`` rows delivered per second, from the snapshot's STARTED notification to the last
``op=r`` row reaching the consumer; peak RSS of each child (it must not grow with the table).

``ratio`` is the engine's default setting (``incremental.snapshot.chunk.size=1024``,
``incremental.snapshot.max.threads=1``, read from the engine's own field defaults) against COPY,
the same statistic on both sides: three rounds of COPY and the default setting at the large size,
alternating which goes first, median rate over median rate. The other settings (chunk size 8192,
and 2 chunk readers) run once each at the large size and are reported beside it, each over the
same COPY median (``by_setting``; single runs, so noisier). Every setting also runs once at the
small size, for its peak RSS. COPY keeps ``ORDER BY id``: the chunks are read in key order
(``... where id > ? order by id limit n``), so the baseline reads in the same order; its row
count (the table grows under the write load) is checked exactly against ``count(*)``.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.snapshots.coordinator import INCREMENTAL_SNAPSHOT_FIELDS
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer
from bench.pg_snapshot import FILL, child_command, fill, psql_copy

_DEFAULTS = {field.name: field.default for field in INCREMENTAL_SNAPSHOT_FIELDS}
#: (incremental.snapshot.chunk.size, incremental.snapshot.max.threads): the engine's defaults.
DEFAULT = (_DEFAULTS["incremental.snapshot.chunk.size"], _DEFAULTS["incremental.snapshot.max.threads"])
#: Reported beside the default, one run each.
OTHERS = tuple(s for s in ((1024, 1), (8192, 1), (1024, 2), (8192, 2)) if s != DEFAULT)
ROUNDS = 3
#: The chunks are read in key order: the baseline reads in the same order.
COPY_QUERY = "SELECT * FROM wide ORDER BY id"
LOAD_TX_PER_S = 200
#: Bytes at the end of a serialized envelope that hold "op" (then only ts_ms, ts_us, ts_ns).
ENVELOPE_TAIL = 128
SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"


class WriteLoad:
    """Small transactions on ``wide``, paced at ``rate`` per second: insert a new row, update one."""

    def __init__(self, server: PostgresServer, database: str, first_new_id: int, rate: float = LOAD_TX_PER_S) -> None:
        self._server, self._database, self._next, self._rate = server, database, first_new_id, rate
        self._existing = first_new_id - 1
        self._stop = threading.Event()
        self._rng = random.Random(first_new_id)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.transactions = 0
        self.seconds = 0.0
        self.error: BaseException | None = None

    def __enter__(self) -> WriteLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error:
            raise self.error

    def _run(self) -> None:
        try:
            with self._server.connect(self._database) as conn:
                conn.autocommit = False
                started = time.perf_counter()
                while not self._stop.is_set():
                    conn.execute(FILL, (self._next, self._next))
                    conn.execute(
                        "update wide set qty = qty + 1, updated = now(), note = note || 'x' where id = %s",
                        (self._rng.randint(1, self._existing),),
                    )
                    conn.commit()
                    self._next += 1
                    self.transactions += 1
                    ahead = started + self.transactions / self._rate - time.perf_counter()
                    if ahead > 0:
                        self._stop.wait(ahead)
                self.seconds = time.perf_counter() - started
        except BaseException as exc:
            self.error = exc


def child(args: argparse.Namespace) -> None:
    """Run in a fresh process: incrementally snapshot ``wide``; print rows, seconds and peak RSS."""
    reads, changes, last_read = [0], [0], [0.0]

    def consume(item: object) -> None:
        # JsonSerializer hands over bytes; the op is all we look at. It is among the last
        # fields of the envelope: searching the whole value for it cost 1.4 us a row (JSON is
        # full of '"'), more than a tenth of what is measured. One thread calls this.
        value = getattr(item, "value", None) or b""
        if value.find(b'"op":"r"', len(value) - ENVELOPE_TAIL) >= 0:
            reads[0] += 1
            last_read[0] = time.perf_counter()
        else:
            changes[0] += 1

    engine = Engine(
        {
            "name": "incr",
            "connector.class": "postgres",
            "topic.prefix": "bench",
            "database.hostname": args.host,
            "database.port": args.port,
            "database.user": args.user,
            "database.dbname": args.database,
            "slot.name": args.slot,
            "publication.name": f"pub_{args.slot}",
            "snapshot.mode": "no_data",
            "signal.data.collection": "public.debezium_signal",
            "incremental.snapshot.chunk.size": args.chunk,
            "incremental.snapshot.max.threads": args.readers,
            "offset.storage": "memory",
            "heartbeat.interval.ms": 0,
        },
        consumer=consume,
        serializer=JsonSerializer(),
    )

    seen: dict[str, dict] = {}
    cursor = [0]

    def arrived(kind: str) -> bool:
        # Only the notifications since the last look: cheap, so this thread barely takes the GIL.
        items, cursor[0] = engine.notifications.since(cursor[0])
        for item in items:
            if item["aggregate_type"] == "Incremental Snapshot":
                seen.setdefault(item["type"], item)
        return kind in seen

    thread = threading.Thread(target=engine.run)
    thread.start()
    engine.signals.send("execute-snapshot", {"data-collections": ["public.wide"]})
    wait_until(lambda: arrived("STARTED"), 120, "snapshot started", interval=0.002)
    started = time.perf_counter()
    # The end is the last op=r row's arrival (stamped by the consumer), not this poll's.
    wait_until(lambda: arrived("COMPLETED"), 3600, "snapshot completed", interval=0.05)
    while True:  # the last rows are still on their way to the consumer
        before = reads[0]
        time.sleep(0.3)
        if reads[0] == before:
            break
    scanned = int(seen["TABLE_SCAN_COMPLETED"]["additional_data"]["total_rows_scanned"])
    if reads[0] < 0.9 * scanned:  # only rows changed while their window was open are dropped
        raise SystemExit(f"the consumer counted {reads[0]} op=r rows of {scanned} scanned: is 'op' still near the end?")
    engine.close(60)
    thread.join(60)
    print(
        json.dumps(
            {
                "seconds": last_read[0] - started,
                "rows": reads[0],
                "scanned": scanned,
                "changes": changes[0],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def engine_snapshot(server: PostgresServer, database: str, rows: int, chunk: int, readers: int) -> dict[str, float]:
    slot = f"incr_{database}_{chunk}_{readers}"
    with WriteLoad(server, database, _max_id(server, database) + 1) as load:
        out = subprocess.run(
            child_command(__file__, server, database, slot=slot, chunk=chunk, readers=readers),
            capture_output=True,
            text=True,
        )
    if out.returncode != 0:
        raise SystemExit(f"child failed ({out.returncode}):\n{out.stderr[-4000:]}")
    with server.connect(database) as conn:
        conn.execute("select pg_drop_replication_slot(%s)", (slot,))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["load_tx_per_s"] = load.transactions / load.seconds if load.seconds else 0.0
    return result


def _max_id(server: PostgresServer, database: str) -> int:
    with server.connect(database) as conn:
        return conn.execute("select max(id) from wide").fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50k and 200k rows instead of 250k and 1M")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("host", "user", "database", "slot"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--chunk", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--readers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    small, large = (50_000, 200_000) if args.quick else (250_000, 1_000_000)
    runs, default_large, copy_rates = measure(small, large)
    report(runs, default_large, copy_rates, small, large)


def measure(
    small: int, large: int
) -> tuple[dict[str, dict[int, dict[str, float]]], list[dict[str, float]], list[float]]:
    """Every setting once at ``small``; ROUNDS of COPY and the default at ``large``, then the
    others once. Returns the runs by setting and size (the default's ``large`` entry: the
    medians of its rounds), the default's rounds, and COPY's rates."""
    settings = (DEFAULT, *OTHERS)
    runs: dict[str, dict[int, dict[str, float]]] = {f"{c}x{r}": {} for c, r in settings}
    default_large: list[dict[str, float]] = []
    copy_rates: list[float] = []
    with PostgresServer() as server:
        for database, rows in (("small", small), ("large", large)):
            fill(server, database, rows)
            with server.connect(database) as conn:
                conn.execute(SIGNAL_DDL)

        def copy_rate() -> float:
            rows = _count(server, "large")  # the write load grows the table: COPY reads them all
            return rows / psql_copy(server, "large", rows, query=COPY_QUERY)

        copy_rate()  # warm the cache for both sides
        for chunk, readers in settings:  # peak RSS at the small size
            runs[f"{chunk}x{readers}"][small] = engine_snapshot(server, "small", small, chunk, readers)
        # The machine's speed drifts within minutes: rounds of COPY and the default setting,
        # alternating which goes first; medians of each.
        for round_ in range(ROUNDS):
            if round_ % 2 == 0:
                copy_rates.append(copy_rate())
            default_large.append(engine_snapshot(server, "large", large, *DEFAULT))
            if round_ % 2 == 1:
                copy_rates.append(copy_rate())
        for chunk, readers in OTHERS:
            runs[f"{chunk}x{readers}"][large] = engine_snapshot(server, "large", large, chunk, readers)
    runs[f"{DEFAULT[0]}x{DEFAULT[1]}"][large] = {
        "rows": large,
        "seconds": large / statistics.median(r["rows"] / r["seconds"] for r in default_large),
        "scanned": statistics.median(r["scanned"] for r in default_large),
        "changes": statistics.median(r["changes"] for r in default_large),
        "load_tx_per_s": min(r["load_tx_per_s"] for r in default_large),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in default_large),
    }
    return runs, default_large, copy_rates


def report(
    runs: dict[str, dict[int, dict[str, float]]],
    default_large: list[dict[str, float]],
    copy_rates: list[float],
    small: int,
    large: int,
) -> None:
    default = f"{DEFAULT[0]}x{DEFAULT[1]}"
    base_rate = statistics.median(copy_rates)
    listed = ", ".join(f"{r:,.0f}" for r in copy_rates)
    print(f"psql COPY: {base_rate:,.0f} rows/s (median of {len(copy_rates)}: {listed})")
    listed = ", ".join(f"{r['rows'] / r['seconds']:,.0f}" for r in default_large)
    print(f"default {default}: {listed} rows/s in its {ROUNDS} rounds")
    rates = {}
    for setting, by_size in runs.items():
        run = by_size[large]
        rates[setting] = run["rows"] / run["seconds"]
        how = f"median of {ROUNDS}" if setting == default else "one run"
        print(
            f"chunk x readers {setting:>7}: {rates[setting]:,.0f} rows/s ({how}; "
            f"ratio {rates[setting] / base_rate:.3f}; {run['scanned']:.0f} scanned, "
            f"{run['changes']:.0f} streamed changes, "
            f"load {run['load_tx_per_s']:.0f} tx/s); peak RSS {by_size[small]['peak_rss_mb']:.0f} MB at {small} rows, "
            f"{run['peak_rss_mb']:.0f} MB at {large}"
        )
    best = max(rates, key=rates.__getitem__)
    print(
        json.dumps(
            {
                "benchmark": "incremental_snapshot",
                "rows": large,
                "chunk_size": DEFAULT[0],
                "readers": DEFAULT[1],
                "rounds": ROUNDS,
                "events_per_s": round(rates[default]),
                "baseline_events_per_s": round(base_rate),
                "baseline": "psql COPY",
                "baseline_query": COPY_QUERY,
                "ratio": round(rates[default] / base_rate, 3),
                "best_chunk_size": int(best.split("x")[0]),
                "best_readers": int(best.split("x")[1]),
                "by_setting": {
                    setting: {
                        "events_per_s": round(rates[setting]),
                        "ratio": round(rates[setting] / base_rate, 3),
                        "runs": ROUNDS if setting == default else 1,
                        "peak_rss_mb": {str(rows): round(run["peak_rss_mb"]) for rows, run in runs[setting].items()},
                    }
                    for setting in runs
                },
                "load_tx_per_s": round(min(run["load_tx_per_s"] for by in runs.values() for run in by.values())),
            }
        )
    )


def _count(server: PostgresServer, database: str) -> int:
    with server.connect(database) as conn:
        return conn.execute("select count(*) from wide").fetchone()[0]


if __name__ == "__main__":
    main()
