"""An incremental snapshot whose reader connection is cut, twice, while it runs under a write
load: on PostgreSQL its backend is terminated (``pg_terminate_backend``, found in
``pg_stat_activity`` by its application_name), on MariaDB its connection is killed (``KILL``,
found in ``information_schema.processlist``). The snapshot opens its connection again, reads
the window again and completes; replaying the events gives the source table row by row, every
row read once. The servers are the session's: cutting one connection restarts nothing."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.snapshots.incremental import READ_AHEAD
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration import mysql_support
from tests.integration.pg_support import SIGNAL_TABLE, WriteLoad, apply, image_diff
from tests.integration.test_incremental_snapshot import (
    Collector,
    assert_target_equals_source,
    completed,
    config,
    notifications,
    send,
    setup,
)
from tests.requirements import require_module

pytestmark = pytest.mark.integration

ROWS = 4000
CHUNK = 40
CUTS = 2


class Cuts:
    """Cuts the snapshot's reader connection ``CUTS`` times, each once the snapshot has released
    a few more chunks, and measures how long it takes until chunks are read again. The first cut
    hits the reader in the middle of a query - its chunk's read waits for a lock the test holds
    on the table - the others wherever it is (mostly idle, waiting for the stream to reach its
    window). ``readers``: the reader's connection (never one cut before) -> waiting for a lock."""

    def __init__(
        self,
        progress: Callable[[], int],
        readers: Callable[[], dict[int, bool]],
        cut: Callable[[int], None],
        table_locked: Callable[[], AbstractContextManager[object]],
    ) -> None:
        self._progress, self._readers, self._cut, self._locked = progress, readers, cut, table_locked
        self.recoveries: list[float] = []
        self.cut_ids: list[int] = []

    def run(self) -> None:
        for n in range(CUTS):
            released = self._progress()
            wait_until(lambda n=released: self._progress() >= n + 3, 120, "chunks released before the cut")
            if n == 0:
                with self._locked():
                    reader = wait_until(lambda: self._reader(waiting=True), 60, "the reader waiting for the lock")
                    self._cut_at(reader)
            else:
                self._cut_at(wait_until(lambda: self._reader(waiting=False), 60, "the snapshot's reader"))
            # The windows read before the cut may still be released; then one read after it.
            wait_until(lambda: self._progress() > self._progress_at_cut + READ_AHEAD, 120, "chunks read after the cut")
            self.recoveries.append(time.monotonic() - self._cut_time)

    def _cut_at(self, reader: int) -> None:
        self._cut_time, self._progress_at_cut = time.monotonic(), self._progress()
        self._cut(reader)
        self.cut_ids.append(reader)

    def _reader(self, *, waiting: bool) -> int | None:
        found = [r for r, locked in self._readers().items() if r not in self.cut_ids and (locked or not waiting)]
        return found[0] if found else None


def progress_of(engine: Engine, signal_id: str) -> Callable[[], int]:
    return lambda: sum(1 for n in notifications(engine) if n["id"] == signal_id and n["type"] == "IN_PROGRESS")


def assert_read_once(reads: list[Any]) -> None:
    twice = [key for key, n in Counter(reads).items() if n > 1]
    assert not twice, f"{len(twice)} rows read twice: {twice[:5]}"


# -- PostgreSQL ------------------------------------------------------------------------------------
def snapshot_backends(dsn: str, database: str) -> dict[int, bool]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "select pid, wait_event_type = 'Lock' from pg_stat_activity "
            "where datname = %s and application_name like %s",
            (database, "% incremental snapshot"),
        ).fetchall()
    return {int(pid): bool(waiting) for pid, waiting in rows}


@contextmanager
def pg_table_locked(dsn: str) -> Iterator[None]:
    with psycopg.connect(dsn) as conn:  # the lock is held until the transaction ends
        conn.execute("lock table t in access exclusive mode")
        yield


def terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select pg_terminate_backend(%s)", (pid,)).fetchone()
    assert row and row[0], f"backend {pid} was not terminated"


def test_postgres_snapshot_reader_terminated_twice_reconnects_and_completes(pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, ROWS)
    collector = Collector()
    engine = Engine(config(pg_server, pg_database, **{"incremental.snapshot.chunk.size": CHUNK}), consumer=collector)
    with EngineRunner(engine), WriteLoad(dsn, ROWS + 1, seed=7) as load:
        wait_until(lambda: load.transactions > 50, 30, "writes before the signal")
        started = time.monotonic()
        signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public.t"], "type": "incremental"})
        cuts = Cuts(
            progress_of(engine, signal_id),
            functools.partial(snapshot_backends, dsn, pg_database),
            functools.partial(terminate, dsn),
            functools.partial(pg_table_locked, dsn),
        )
        cuts.run()
        wait_until(lambda: completed(engine, signal_id), 180, "snapshot completed")
        seconds = time.monotonic() - started
        load.stop()
        assert_target_equals_source(collector, dsn)
    done = [n for n in notifications(engine) if n["id"] == signal_id]
    assert done[-1]["type"] == "COMPLETED", [n["type"] for n in done]
    scanned = [n["additional_data"]["status"] for n in done if n["type"] == "TABLE_SCAN_COMPLETED"]
    assert scanned == ["SUCCEEDED"]
    reads = [e["key"]["id"] for e in collector.snapshot() if e["value"] and e["value"]["op"] == "r"]
    assert_read_once(reads)
    print(
        f"postgres: {len(reads)} rows read in {seconds:.1f}s under {load.transactions} transactions; "
        f"backends {cuts.cut_ids} terminated; chunks read again {[round(s, 2) for s in cuts.recoveries]}s after"
    )


# -- MariaDB ---------------------------------------------------------------------------------------
@pytest.fixture
def mariadb(mariadb_server: Any, mariadb_database: str) -> Any:
    require_module("pymysqlreplication", extra="mysql")
    conn = mariadb_server.connect(database=mariadb_database)
    with conn.cursor() as cur:
        cur.execute(f"create table {SIGNAL_TABLE} (id varchar(42) primary key, type varchar(32), data varchar(2048))")
    yield conn
    conn.close()


def mysql_send(conn: Any, data: Any) -> str:
    signal_id = uuid.uuid4().hex
    with conn.cursor() as cur:
        cur.execute(f"insert into {SIGNAL_TABLE} values (%s, 'execute-snapshot', %s)", (signal_id, json.dumps(data)))
    return signal_id


def connections(conn: Any) -> dict[int, bool]:
    """Every connection of the server but the replication ones (binlog dumps) -> waiting for a
    table's lock."""
    with conn.cursor() as cur:
        cur.execute("select id, state from information_schema.processlist where command <> 'Binlog Dump'")
        return {int(row[0]): "lock" in str(row[1] or "").lower() for row in cur.fetchall()}


@contextmanager
def mariadb_table_locked(conn: Any) -> Iterator[None]:
    with conn.cursor() as cur:
        cur.execute("lock tables t write")
        try:
            yield
        finally:
            cur.execute("unlock tables")


def test_mariadb_snapshot_reader_killed_twice_reconnects_and_completes(
    mariadb_server: Any, mariadb_database: str, mariadb: Any
) -> None:
    mysql_support.create_load_table(mariadb, ROWS)
    collected = mysql_support.Collector()
    cfg = mysql_support.engine_config(
        mariadb_server,
        mariadb_database,
        **{
            "snapshot.mode": "no_data",
            "signal.data.collection": f"{mariadb_database}.{SIGNAL_TABLE}",
            "incremental.snapshot.chunk.size": CHUNK,
        },
    )
    engine = Engine(cfg, consumer=collected, serializer=JsonSerializer())
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    with EngineRunner(engine), mysql_support.WriteLoad(connect, first_new_id=ROWS + 1, seed=7) as load:
        wait_until(lambda: load.transactions > 50 and collected.changes(), 30, "streaming under writes")
        # The snapshot's reader connection is opened at its first window: the connections there
        # before the signal (the engine's own, the load's, this test's) are not it.
        locker = mariadb_server.connect(database=mariadb_database, autocommit=True)
        before = set(connections(mariadb))
        started = time.monotonic()
        signal_id = mysql_send(mariadb, {"data-collections": [f"{mariadb_database}.t"], "type": "incremental"})

        def readers() -> dict[int, bool]:
            return {r: waiting for r, waiting in connections(mariadb).items() if r not in before}

        def kill(thread_id: int) -> None:
            with mariadb.cursor() as cur:
                cur.execute(f"kill {int(thread_id)}")

        cuts = Cuts(progress_of(engine, signal_id), readers, kill, functools.partial(mariadb_table_locked, locker))
        cuts.run()
        locker.close()
        wait_until(lambda: completed(engine, signal_id), 180, "snapshot completed")
        seconds = time.monotonic() - started
        load.stop()
        expected = mysql_support.source_image(mariadb)
        try:
            wait_until(lambda: apply(collected.snapshot()) == expected, 60, "target equals source")
        except TimeoutError:
            raise AssertionError(image_diff(expected, apply(collected.snapshot()))) from None
    done = [n for n in notifications(engine) if n["id"] == signal_id]
    assert done[-1]["type"] == "COMPLETED", [n["type"] for n in done]
    scanned = [n["additional_data"]["status"] for n in done if n["type"] == "TABLE_SCAN_COMPLETED"]
    assert scanned == ["SUCCEEDED"]
    table = [e for e in collected.snapshot() if e["value"] and e["value"]["source"]["table"] == "t"]
    reads = [e["key"]["id"] for e in table if e["value"]["op"] == "r"]
    assert_read_once(reads)
    print(
        f"mariadb: {len(reads)} rows read in {seconds:.1f}s under {load.transactions} transactions; "
        f"connections {cuts.cut_ids} killed; chunks read again {[round(s, 2) for s in cuts.recoveries]}s after"
    )
