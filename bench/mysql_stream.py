"""Streaming throughput: the engine against mysql-replication alone on the same binlog (issue 16).

A throwaway MariaDB (ROW binlog, the server's default row metadata) gets a mixed insert/update/delete workload on
one table (1000 rows per transaction), then one marker row in a table of its own. Both sides read
the very same binlog range: from the GTID state before the load to the marker.

Baseline: python-mysql-replication's ``BinLogStreamReader`` iterated alone, with the settings the
engine's adapter gives it (MariaDB by GTID, blocking with a server heartbeat, the same
``only_events``), decoding every row of the load's row events (``event.rows``): the pure-Python
decoding the engine is built on, so the practical limit of the engine on this machine.
The engine: ``connector.class`` MariaDB from an offset at the same GTID state (a file offset
store written before it starts), the full path - row decoding (its own decoder, with the
schema history's definitions), offsets, value conversion, Debezium
envelope, JSON serialization - into a discarding consumer. Both sides stop at the
marker's event and must have seen exactly the load's rows (exit 1 otherwise).

Rounds alternate the two sides (machine noise hits both alike); the figures are medians.
``cpu_ratio`` beside ``ratio``: the library's CPU seconds / the engine's (the whole process, every
thread), steadier than wall time when other work shares the machine. The library is a baseline
our decoder mostly bypasses, so an anchor stands beside it: Debezium's MariaDB connector on a
Kafka Connect worker and the engine with its Kafka sink capture the same binlog into a local
broker, timed by the broker's append instants (``vs_debezium``, ``vs_debezium_default``; see
bench/mysql_stream_debezium.py; ``--no-debezium`` skips it, minutes shorter). The last line is
one JSON object with the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.storage.file import FileOffsetStore
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.mariadb import MariaDBServer

DATABASE = "bench"
TABLE = "orders"
MARKER_TABLE = "bench_marker"
PREFIX = "bench"
ROUNDS = 3
TXN_ROWS = 1000


@dataclass(frozen=True)
class Load:
    """The changes the load made, by Debezium op, and the binlog point before it."""

    ops: dict[str, int]
    start_gtids: str
    start_file: str
    start_pos: int

    @property
    def changes(self) -> int:
        return sum(self.ops.values())


def run(conn: Any, *statements: str) -> int:
    rows = 0
    with conn.cursor() as cur:
        for statement in statements:
            rows += cur.execute(statement)
    return rows


def workload(server: MariaDBServer, changes: int) -> Load:
    """Inserts, then updates and deletes: 50% / 30% / 20% of ``changes`` rows, 1000 per txn."""
    inserts, updates, deletes = changes // 2, changes * 3 // 10, changes // 5
    with server.connect() as conn:
        run(
            conn,
            f"create database {DATABASE} character set utf8mb4",
            f"create table {DATABASE}.{TABLE} (id int primary key, customer varchar(64), amount decimal(10,2), "
            "status varchar(16), created timestamp(6))",
            f"create table {DATABASE}.{MARKER_TABLE} (id int primary key)",
        )
        with conn.cursor() as cur:
            cur.execute("select @@gtid_binlog_pos")
            start_gtids = cur.fetchone()[0]
            cur.execute("show master status")
            start_file, start_pos = cur.fetchone()[:2]
    ops: Counter[str] = Counter()
    table = f"{DATABASE}.{TABLE}"
    with server.connect(database=DATABASE) as conn:  # autocommit: one statement, one transaction
        for start in range(1, inserts + 1, TXN_ROWS):
            end = min(start + TXN_ROWS - 1, inserts)
            ops["c"] += run(
                conn,
                f"insert into {table} select seq, concat('customer-', seq), seq * 1.25, 'new', now(6) "
                f"from seq_{start}_to_{end}",
            )
        for start in range(1, updates + 1, TXN_ROWS):
            end = min(start + TXN_ROWS - 1, updates)
            ops["u"] += run(
                conn, f"update {table} set status = 'paid', amount = amount + 1 where id between {start} and {end}"
            )
        for start in range(0, deletes, TXN_ROWS):
            high = inserts - start
            low = high - min(TXN_ROWS, deletes - start) + 1
            ops["d"] += run(conn, f"delete from {table} where id between {low} and {high}")
        run(conn, f"insert into {DATABASE}.{MARKER_TABLE} values (1)")  # the last event of the load
    return Load(dict(ops), str(start_gtids), str(start_file), int(start_pos))


def run_library(server: MariaDBServer, load: Load) -> tuple[float, float, Counter[str]]:
    """mysql-replication alone: the engine adapter's reader settings, every row decoded."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication import event as ev
    from pymysqlreplication import row_event as rows

    ops: Counter[str] = Counter()
    kinds = {rows.WriteRowsEvent: "c", rows.UpdateRowsEvent: "u", rows.DeleteRowsEvent: "d"}
    started, cpu = time.perf_counter(), time.process_time()
    reader = BinLogStreamReader(
        connection_settings=server.connection_params(charset="utf8mb4", read_timeout=30),
        server_id=90_001,
        blocking=True,
        is_mariadb=True,
        auto_position=load.start_gtids,
        slave_heartbeat=0.5,
        enable_logging=False,
        only_events=[
            ev.RotateEvent,
            ev.MariadbGtidEvent,
            ev.GtidEvent,
            ev.QueryEvent,
            ev.XidEvent,
            ev.HeartbeatLogEvent,
            ev.RowsQueryLogEvent,
            ev.XAPrepareEvent,
            rows.TableMapEvent,
            rows.WriteRowsEvent,
            rows.UpdateRowsEvent,
            rows.DeleteRowsEvent,
        ],
        report_slave="bench",
    )
    try:
        for event in reader:
            op = kinds.get(type(event))
            if op is None:
                continue
            if event.table == MARKER_TABLE:
                break
            if event.schema == DATABASE and event.table == TABLE:
                ops[op] += len(event.rows)  # decodes every row
    finally:
        reader.close()
    return time.perf_counter() - started, time.process_time() - cpu, ops


def seed_offset(directory: Path, name: str, load: Load, *, server: str = PREFIX) -> Path:
    """A file offset store standing at the GTID state before the load, as a committed offset
    (``server``: the partition, the engine's ``topic.prefix``)."""
    path = directory / f"{name}.offsets.json"
    store = FileOffsetStore(name, path)
    store.start()
    offset: dict[str, str | int | float | bool | None] = {
        "gtids": load.start_gtids,
        "file": load.start_file,
        "pos": load.start_pos,
    }
    store.write([({"server": server}, offset)])
    return path


def engine_config(server: MariaDBServer, name: str, offsets: Path) -> dict[str, Any]:
    return {
        "name": name,
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "topic.prefix": PREFIX,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password,
        "database.include.list": DATABASE,
        "database.server.id": 90_002,
        "snapshot.mode": "no_data",  # unused: the offset is there
        "tombstones.on.delete": False,
        "include.schema.changes": False,  # row changes only: each side's count checks against the load
        "heartbeat.interval.ms": 0,
        "offset.storage": "file",
        "offset.storage.file.filename": str(offsets),
        "offset.flush.interval.ms": 1000,
    }


def run_engine(server: MariaDBServer, load: Load, directory: Path, round_: int) -> tuple[float, float, Counter[str]]:
    name = f"bench-{round_}"
    ops: Counter[str] = Counter()
    done = threading.Event()
    marker = f"{PREFIX}.{DATABASE}.{MARKER_TABLE}"

    def consume(item: Any) -> None:  # ORDERED: called from the task thread only
        if item.topic == marker:
            done.set()
        else:
            ops[item.record.op] += 1

    engine = Engine(
        engine_config(server, name, seed_offset(directory, name, load)), consumer=consume, serializer=JsonSerializer()
    )
    thread = threading.Thread(target=engine.run, name=name)
    started, cpu = time.perf_counter(), time.process_time()
    thread.start()
    wait_until(lambda: done.is_set() or not thread.is_alive(), 1800, "the marker delivered", interval=0.01)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    engine.close(60)
    thread.join(60)
    if not done.is_set():
        raise SystemExit(f"the engine stopped before the marker: {engine.error!r}")
    return elapsed, cpu, ops


def check(side: str, got: Counter[str], load: Load, problems: list[str]) -> None:
    if dict(got) != load.ops:
        problems.append(f"{side} saw {dict(got)}, the load made {load.ops}")
        print(f"  WRONG: {problems[-1]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200k changes instead of 1M")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--changes", type=int, help="this many changes (a short trial run)")
    parser.add_argument(
        "--debezium",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also Debezium's MariaDB connector on Kafka Connect, the anchor (minutes more; the default)",
    )
    args = parser.parse_args()
    wanted = args.changes or (200_000 if args.quick else 1_000_000)
    problems: list[str] = []
    extra: dict[str, Any] = {}
    with MariaDBServer() as server, tempfile.TemporaryDirectory(prefix="mysql-stream-") as work:
        started = time.monotonic()
        load = workload(server, wanted)
        print(f"load: {load.changes:,} changes {load.ops} in {time.monotonic() - started:.0f}s", flush=True)
        libraries, engines = [], []
        cpu: dict[str, list[float]] = {"library": [], "engine": []}
        for round_ in range(args.rounds):  # alternate, so that machine noise hits both sides alike
            sides = ("library", "engine") if round_ % 2 == 0 else ("engine", "library")
            for side in sides:
                if side == "library":
                    seconds, cpu_s, ops = run_library(server, load)
                    libraries.append(seconds)
                    cpu["library"].append(cpu_s)
                else:
                    seconds, cpu_s, ops = run_engine(server, load, Path(work), round_)
                    engines.append(seconds)
                    cpu["engine"].append(cpu_s)
                print(
                    f"  round {round_} {side:<8} {seconds:6.2f}s = {load.changes / seconds:,.0f} events/s "
                    f"(CPU {cpu_s:.2f}s)",
                    flush=True,
                )
                check(f"round {round_} {side}", ops, load, problems)
        if args.debezium:
            from mysql_stream_debezium import versus_debezium

            extra = versus_debezium(server, load, Path(work), args.rounds, problems)
    library_s, engine_s = statistics.median(libraries), statistics.median(engines)
    base_rate, engine_rate = load.changes / library_s, load.changes / engine_s
    print(f"mysql-replication: {load.changes} changes in {library_s:.2f}s = {base_rate:,.0f} events/s (median)")
    print(f"engine:            {load.changes} changes in {engine_s:.2f}s = {engine_rate:,.0f} events/s (median)")
    # CPU seconds (the process's, every thread) move less than wall time on a shared machine.
    cpu_ratio = statistics.median(cpu["library"]) / statistics.median(cpu["engine"])
    print(f"CPU seconds: library {cpu['library']}, engine {cpu['engine']}; library/engine {cpu_ratio:.3f}")
    print(
        json.dumps(
            {
                "benchmark": "mysql_stream",
                "changes": load.changes,
                "events_per_s": round(engine_rate),
                "baseline_events_per_s": round(base_rate),
                "baseline": "mysql-replication BinLogStreamReader alone, rows decoded",
                "ratio": round(engine_rate / base_rate, 3),
                "cpu_ratio": round(cpu_ratio, 3),
                **extra,
                "problems": problems,
            }
        )
    )
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
