"""Would worker processes pay for the PostgreSQL initial snapshot here? (issue 30, ADR 0032)

The question ``snapshot.max.threads`` with worker processes has to answer first, measured
without wiring anything into the engine: the table of ``bench/pg_snapshot.py`` is read

* by one process: the engine's query streamed, records built and serialized to JSON (what the
  engine's snapshot thread does, without its pipeline), and
* by N worker processes that each join one exported snapshot (``SET TRANSACTION SNAPSHOT``),
  read a key range, build and serialize the same records and hand the JSON bytes to the parent
  over a pipe in batches (the cheapest hand-over there is: pickling the SourceRecords instead
  costs more than building them, see ``pg_snapshot_stages.py``); the parent only unpacks them.

Printed for each: wall time, and the CPU of every process involved - this one, the workers and
their PostgreSQL backends (from /proc) - per row. On a machine whose cores are already busy the
wall time follows the total CPU, and the workers can only pay where there are idle cores for
their extra CPU.
"""

from __future__ import annotations

import argparse
import multiprocessing
import pickle
import sys
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import JsonSerializer
from airflow_cdc.engine.sources.postgres.snapshot import key_function, read_records
from airflow_cdc.engine.sources.postgres.snapshot_columns import plan_columns
from airflow_cdc.engine.sources.postgres.types import ValueModes
from airflow_cdc.local.postgres import PostgresServer
from bench.pg_snapshot import fill, psql_copy
from bench.pg_snapshot_stages import Stages, _plans, backend_cpu, timed

BATCH = 256


def read_range(dsn: str, snapshot: str, low: int, high: int, out: Connection) -> None:
    """A worker: rows ``low <= id < high`` of the exported snapshot, as batches of JSON values
    sent to ``out``; last its CPU seconds (once imported and started) and its backend's."""
    _, plans, catalog = _plans(dsn)
    cpu = time.process_time()  # from here: the interpreter's start and imports are not counted
    table, schema = plans[0]
    columns = plan_columns(table, schema, ValueModes(), catalog.type)
    query = sql.SQL("{} where id >= {} and id < {}").format(columns.query(table), low, high)
    after_of, key_of, serializer = columns.row_builder(schema), key_function(schema.key), JsonSerializer()
    source: dict[str, Any] = {"snapshot": "true", "table": "wide"}
    with psycopg.connect(dsn) as conn:
        pid = conn.info.backend_pid
        served = backend_cpu(pid)
        conn.execute("begin isolation level repeatable read read only")
        conn.execute(sql.SQL("set transaction snapshot {}").format(sql.Literal(snapshot)))
        rows: list[tuple[Any, ...]] = []
        for row in conn.cursor().stream(query, size=2000):
            rows.append(row)
            if len(rows) == BATCH:
                _send(out, rows, after_of, key_of, source, serializer)
                rows = []
        _send(out, rows, after_of, key_of, source, serializer)
        served = backend_cpu(pid) - served
    out.send(("done", time.process_time() - cpu, served))


def _send(out: Connection, rows: list[Any], after_of: Any, key_of: Any, source: Any, serializer: Any) -> None:
    records = read_records(rows, after_of, key_of, "bench.public.wide", source, {}, {}, 0)
    out.send_bytes(pickle.dumps([serializer.serialize(r).value for r in records], protocol=5))


def workers(server: PostgresServer, stages: Stages, count: int) -> None:
    rows = stages.rows
    context = multiprocessing.get_context("spawn")
    started, cpu = time.perf_counter(), time.process_time()
    with psycopg.connect(stages.dsn) as exporter:
        exporter.execute("begin isolation level repeatable read read only")
        row = exporter.execute("select pg_export_snapshot()").fetchone()
        assert row is not None
        pipes, processes = [], []
        for index in range(count):
            low, high = 1 + rows * index // count, 1 + rows * (index + 1) // count
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(target=read_range, args=(stages.dsn, row[0], low, high, sender))
            process.start()
            pipes.append(receiver)
            processes.append(process)
        received, worker_cpu, server_cpu = 0, 0.0, 0.0
        while pipes:
            for pipe in wait(pipes):
                batch = pickle.loads(pipe.recv_bytes())  # type: ignore[union-attr]
                if isinstance(batch, tuple):
                    worker_cpu, server_cpu = worker_cpu + batch[1], server_cpu + batch[2]
                    pipes.remove(pipe)  # type: ignore[arg-type]
                else:
                    received += len(batch)
        for process in processes:
            process.join()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert received == rows, received
    total = cpu + worker_cpu + server_cpu
    per_row = [
        f"{name} {seconds / rows * 1e6:5.2f}"
        for name, seconds in [
            ("wall", wall),
            ("parent", cpu),
            ("workers", worker_cpu),
            ("servers", server_cpu),
            ("all", total),
        ]
    ]
    print(f"{count} worker(s)            {wall:6.2f}s wall, us/row: {', '.join(per_row)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with PostgresServer() as server:
        fill(server, "large", args.rows)
        psql_copy(server, "large", args.rows)  # warm the cache
        stages = Stages(server, "large", args.rows)
        serializer = JsonSerializer()
        for _ in range(args.rounds):
            timed("psql copy *", args.rows, lambda: psql_copy(server, "large", args.rows) and None)
            timed("1 process, + json", args.rows, stages.records(serializer.serialize))
            for count in (1, 2, 3):
                workers(server, stages, count)


if __name__ == "__main__":
    main()
