"""Initial-snapshot throughput: the engine against mariadb-dump of the same table (issue 16).

A wide table (20 columns of mixed types) in a throwaway MariaDB. Baseline, same run:
``mariadb-dump --single-transaction --quick <db> wide > /dev/null`` - the server's C client
streaming the table out as SQL text, the practical limit of reading it. The engine runs
``snapshot.mode=initial_only`` on the MariaDB connector in a child process (a consistent-snapshot
transaction, rows read with an unbuffered cursor, values converted, Debezium envelopes, JSON
serialized, into a discarding consumer) until the row marked ``snapshot: last``; it must have
delivered exactly the table's rows (exit 1 otherwise). It runs at two table sizes and reports
its peak RSS for each: the snapshot streams, so the RSS must not grow with the table. The large
table is measured in rounds of dump then engine, and the medians are compared (the machine's
speed drifts within minutes). Then Debezium's MariaDB connector on Kafka Connect against ours
with the Kafka sink, both snapshotting the large table into a broker (``vs_debezium``, goal >=
1.5x; bench/mysql_snapshot_debezium.py; ``--no-debezium`` skips it). The last line is one JSON
object with the ratios.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.mariadb import MariaDBServer

ROUNDS = 3
TABLE = "wide"
COLUMNS = """
id int primary key, qty int, stock int, views bigint, rnk smallint, flags int,
price decimal(12,2), cost decimal(12,2), tax decimal(12,2),
name varchar(64), sku varchar(64), city varchar(64), country varchar(64), note varchar(64),
created timestamp(6), updated datetime(6), active bool, archived bool, day date, tags varchar(32)
"""
FILL = """
insert into wide select seq, seq % 1000, seq % 77, seq * 3, seq % 100, seq % 7,
    seq * 0.5, seq * 0.25, seq * 0.05, concat('name-', seq), concat('sku-', seq), concat('city-', seq % 500),
    concat('country-', seq % 50), repeat('n', 40), now(6), now(6), seq % 2 = 0, seq % 3 = 0,
    date '2024-01-01' + interval (seq % 365) day, 'a,b,c'
from seq_{start}_to_{end}
"""


def fill(server: MariaDBServer, database: str, rows: int) -> None:
    server.create_database(database)
    with server.connect(database=database) as conn, conn.cursor() as cur:
        cur.execute(f"create table {TABLE} ({COLUMNS})")
        for start in range(1, rows + 1, 100_000):
            cur.execute(FILL.format(start=start, end=min(start + 99_999, rows)))
        cur.execute(f"analyze table {TABLE}")


def mariadb_dump(server: MariaDBServer, database: str) -> float:
    dump = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if dump is None:
        raise SystemExit("mariadb-dump is not installed (apt-get install mariadb-client)")
    started = time.perf_counter()
    with open("/dev/null", "wb") as sink:
        subprocess.run(
            [
                dump,
                "--no-defaults",
                f"--host={server.host}",
                f"--port={server.port}",
                f"--user={server.user}",
                f"--password={server.password}",
                "--single-transaction",
                "--quick",
                database,
                TABLE,
            ],
            stdout=sink,
            check=True,
        )
    return time.perf_counter() - started


def child(args: argparse.Namespace) -> None:
    """Run in a fresh process: snapshot the table; print seconds, rows and peak RSS."""
    count = [0]
    done = threading.Event()

    def consume(item: Any) -> None:  # ORDERED: called from the task thread only
        count[0] += 1
        if item.record.value["source"]["snapshot"] == "last":
            done.set()

    engine = Engine(
        {
            "name": "snap",
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "topic.prefix": "bench",
            "database.hostname": args.host,
            "database.port": args.port,
            "database.user": args.user,
            "database.password": "",
            "database.include.list": args.database,
            "snapshot.mode": "initial_only",
            "include.schema.changes": False,  # row events only: the count checks against the table
            "offset.storage": "memory",
            "heartbeat.interval.ms": 0,
        },
        consumer=consume,
        serializer=JsonSerializer(),
    )
    thread = threading.Thread(target=engine.run)
    started = time.perf_counter()
    thread.start()
    wait_until(lambda: done.is_set() or not thread.is_alive(), 3600, "snapshot delivered", interval=0.01)
    elapsed = time.perf_counter() - started
    engine.close(60)
    thread.join(60)
    if not done.is_set():
        raise SystemExit(f"the engine stopped before the snapshot's last row: {engine.error!r}")
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "rows": count[0],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def engine_snapshot(server: MariaDBServer, database: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", "--host", server.host, "--port", str(server.port)]
    command += ["--user", server.user, "--database", database]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k and 400k rows instead of 250k and 2M")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument(
        "--debezium",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also Debezium's MariaDB connector on Kafka Connect against ours into Kafka (minutes more; the default)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("host", "user", "database"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    small, large = (100_000, 400_000) if args.quick else (250_000, 2_000_000)
    problems: list[str] = []

    def checked(run: dict[str, float], rows: int) -> dict[str, float]:
        if run["rows"] != rows:
            problems.append(f"the engine delivered {run['rows']} rows of {rows}")
            print(f"  WRONG: {problems[-1]}", flush=True)
        return run

    with MariaDBServer(extra_args=["--innodb-buffer-pool-size=512M"]) as server:
        fill(server, "small", small)
        fill(server, "large", large)
        mariadb_dump(server, "large")  # warm the buffer pool for both sides
        small_run = checked(engine_snapshot(server, "small"), small)
        # The machine's speed drifts within minutes: rounds of dump then engine, medians of each.
        dumps, runs = [], []
        for round_ in range(args.rounds):
            dumps.append(mariadb_dump(server, "large"))
            runs.append(checked(engine_snapshot(server, "large"), large))
            print(f"  round {round_}: mariadb-dump {dumps[-1]:.2f}s, engine {runs[-1]['seconds']:.2f}s", flush=True)
        extra: dict[str, Any] = {}
        if args.debezium:  # after the rounds: it adds a marker table to the database
            from mysql_snapshot_debezium import versus_debezium

            extra = versus_debezium(server, "large", TABLE, large, args.rounds, problems)
    dump_s = statistics.median(dumps)
    seconds = [r["seconds"] for r in runs]
    large_run = {"seconds": statistics.median(seconds), "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}
    base_rate, engine_rate = large / dump_s, large / large_run["seconds"]
    print(f"mariadb-dump:    {large} rows in {dump_s:.2f}s = {base_rate:,.0f} rows/s (median)")
    print(f"engine snapshot: {large} rows in {large_run['seconds']:.2f}s = {engine_rate:,.0f} rows/s (median)")
    print(f"peak RSS: {small_run['peak_rss_mb']:.0f} MB at {small} rows, {large_run['peak_rss_mb']:.0f} MB at {large}")
    print(
        json.dumps(
            {
                "benchmark": "mysql_snapshot",
                "rows": large,
                "events_per_s": round(engine_rate),
                "baseline_events_per_s": round(base_rate),
                "baseline": "mariadb-dump --single-transaction --quick",
                "ratio": round(engine_rate / base_rate, 3),
                "peak_rss_mb": {
                    str(small): round(small_run["peak_rss_mb"]),
                    str(large): round(large_run["peak_rss_mb"]),
                },
                **extra,
                "problems": problems,
            }
        )
    )
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
