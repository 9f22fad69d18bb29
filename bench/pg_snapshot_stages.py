"""Where the initial snapshot's time goes, stage by stage (issue 30): each stage runs the one
before it plus one more step, over the same table as ``bench/pg_snapshot.py``, and prints its
wall time and, per row, this process's CPU time and the serving backend's (from /proc: the
server is a local child). CPU times do not drift with the machine's load as wall times do. The
differences are the stages' costs.

1. ``psql copy *``: ``psql COPY (select * ...)`` - the baseline of bench/pg_snapshot.py.
   ``copy *``: the same COPY read by psycopg, to see the server's CPU for it.
2. ``copy engine query``: COPY of the engine's own SELECT list (the server computing
   Debezium's values) - the server's share of the engine's work.
3. ``psycopg rows``: the engine's query streamed in chunked-rows mode, psycopg loading tuples.
4. ``records``: SnapshotReader.batches (rows -> dicts -> SourceRecords, markers, batches).
5. ``+ json``: each record serialized by JsonSerializer (orjson), as the pipeline does.
6. ``+ pickle``: each record also pickled, as a worker process would hand it over, and the bytes
   of (5) pickled instead, as a worker that serialized itself would.

Everything runs in this one process (no engine, no pipeline threads): the full engine's time is
what ``bench/pg_snapshot.py`` prints; the difference between it and (5) is the pipeline.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import JsonSerializer
from airflow_cdc.engine.sources.postgres import catalog as cat
from airflow_cdc.engine.sources.postgres.changes import ChangeBuilder, plan_table
from airflow_cdc.engine.sources.postgres.snapshot import SnapshotReader
from airflow_cdc.engine.sources.postgres.snapshot_columns import plan_columns
from airflow_cdc.engine.sources.postgres.types import SESSION_OPTIONS, ValueModes
from airflow_cdc.local.postgres import PostgresServer
from bench.pg_snapshot import fill, psql_copy


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: Clock ticks per second of /proc/<pid>/stat's CPU times.
_TICKS = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    """CPU seconds a PostgreSQL backend (a local server's child) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def timed(name: str, rows: int, work: Callable[[], int | None]) -> None:
    """``work`` returns the pid of the backend that served it (None: not measured)."""
    wall, cpu = time.perf_counter(), _cpu()
    pid = work()
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    served = None if pid is None else _served.pop(pid)
    server = "" if served is None else f", server {served / rows * 1e6:5.2f}, all {(cpu + served) / rows * 1e6:5.2f}"
    per_row = f"wall {wall / rows * 1e6:5.2f}, this process {cpu / rows * 1e6:5.2f}{server}"
    print(f"{name:<22} {wall:6.2f}s wall, us/row: {per_row}")


#: Backend CPU seconds per pid, recorded by the stages just before their connection closes.
_served: dict[int, float] = {}


@contextlib.contextmanager
def backend(dsn: str) -> Iterator[tuple[psycopg.Connection[Any], int]]:
    """A connection and its backend's pid; the backend's CPU for the block lands in _served."""
    with psycopg.connect(dsn) as conn:
        pid = conn.info.backend_pid
        before = backend_cpu(pid)
        yield conn, pid
        _served[pid] = backend_cpu(pid) - before


def _plans(dsn: str) -> tuple[ChangeBuilder, list[Any], cat.Catalog]:
    conn = psycopg.connect(dsn, autocommit=True)
    filters = cat.TableFilter([], [], [])
    catalog, modes = cat.Catalog(conn), ValueModes()
    tables = [t for t in cat.captured_tables(conn, filters) if t.name == "wide"]
    builder = ChangeBuilder(
        server="bench",
        database="large",
        partition={"server": "bench"},
        topic=lambda schema, table: f"bench.{schema}.{table}",
        catalog=catalog,
        modes=modes,
        filters=filters,
        tombstones=True,
        skipped=frozenset(),
        resume=None,
    )
    plans = [
        (t, plan_table(t.schema, t.name, t.name, list(t.columns), [], catalog=catalog, modes=modes, filters=filters))
        for t in tables
    ]
    return builder, plans, catalog


class Stages:
    """The stages over one database's ``wide`` table of ``rows`` rows."""

    def __init__(self, server: PostgresServer, database: str, rows: int) -> None:
        self.server, self.database, self.rows = server, database, rows
        self.dsn = psycopg.conninfo.make_conninfo(server.dsn(database), options=SESSION_OPTIONS)
        self.builder, self.plans, self.catalog = _plans(self.dsn)
        table, schema = self.plans[0]
        with psycopg.connect(self.dsn) as conn:
            self.query = plan_columns(table, schema, ValueModes(), self.catalog.type).query(table).as_string(conn)

    def copy(self, select: str) -> Callable[[], int]:
        def run() -> int:
            with backend(self.dsn) as (conn, pid), conn.cursor().copy(f"copy ({select}) to stdout") as out:
                while out.read():
                    pass
            return pid

        return run

    def psycopg_rows(self) -> int:
        with backend(self.dsn) as (conn, pid):
            count = sum(1 for _ in conn.cursor().stream(self.query, size=2000))
        assert count == self.rows, count
        return pid

    def records(self, step: Callable[[Any], object] | None = None) -> Callable[[], int]:
        def run() -> int:
            snapshot = SnapshotReader(self.dsn, None, 0, self.builder, modes=ValueModes(), lookup=self.catalog.type)
            pid, count = snapshot._conn.info.backend_pid, 0
            before = backend_cpu(pid)
            try:
                for batch in snapshot.batches(self.plans, 256):
                    for record in batch:
                        if record.topic:
                            count += 1
                            if step is not None:
                                step(record)
                _served[pid] = backend_cpu(pid) - before
            finally:
                snapshot.close()
            assert count == self.rows, count
            return pid

        return run

    def run_all(self) -> None:
        serializer, rows = JsonSerializer(), self.rows

        def json_and_pickle(record: Any) -> None:
            pickle.dumps(serializer.serialize(record).value, protocol=5)

        timed("psql copy *", rows, lambda: psql_copy(self.server, self.database, rows) and None)
        timed("copy *", rows, self.copy("select * from wide"))
        timed("copy engine query", rows, self.copy(self.query))
        timed("psycopg rows", rows, self.psycopg_rows)
        timed("records", rows, self.records())
        timed("+ json", rows, self.records(serializer.serialize))
        timed("+ pickle record", rows, self.records(lambda r: pickle.dumps(r, protocol=5)))
        timed("+ json, pickle bytes", rows, self.records(json_and_pickle))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000)
    args = parser.parse_args()
    with PostgresServer() as server:
        fill(server, "large", args.rows)
        psql_copy(server, "large", args.rows)  # warm the cache
        Stages(server, "large", args.rows).run_all()


if __name__ == "__main__":
    main()
