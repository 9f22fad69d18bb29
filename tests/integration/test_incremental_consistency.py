"""Incremental snapshots at their edges, on a real PostgreSQL: a transaction streamed before it
became visible to a chunk's read (ADR 0007, "Which changes drop a chunk row"), and a snapshot
whose last tables yield no rows while nothing else is streamed (the committed offsets must not
keep its context)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from airflow_cdc.engine import Engine
from airflow_cdc.engine.snapshots.incremental import OFFSET_KEY
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.test_incremental_snapshot import (
    Collector,
    assert_target_equals_source,
    completed,
    config,
    notifications,
    send,
    setup,
)

pytestmark = pytest.mark.integration

NO_STANDBY = "airflow_cdc_no_such_standby"


def setting(pg_server: Any, name: str) -> str:
    with pg_server.connect() as conn:
        row = conn.execute(sql.SQL("show {}").format(sql.Identifier(name))).fetchone()
    return str(row[0]) if row else ""


@contextmanager
def commits_waiting_for_a_standby(pg_server: Any) -> Iterator[None]:
    """``synchronous_standby_names`` names a standby that never comes: a transaction with
    ``synchronous_commit = on`` writes and flushes its commit record (logical decoding streams
    it), then waits for the standby - still invisible to every snapshot - until its wait is
    cancelled. Sessions with ``synchronous_commit = local`` do not wait."""
    if pg_server.external:
        pytest.skip("changes the server's settings")
    with pg_server.connect() as conn:
        conn.execute(sql.SQL("alter system set synchronous_standby_names = {}").format(sql.Literal(NO_STANDBY)))
        conn.execute("select pg_reload_conf()")
    try:
        wait_until(lambda: setting(pg_server, "synchronous_standby_names") == NO_STANDBY, 30, "the setting")
        yield
    finally:
        with pg_server.connect() as conn:
            conn.execute("alter system reset synchronous_standby_names")
            conn.execute("select pg_reload_conf()")
        wait_until(lambda: setting(pg_server, "synchronous_standby_names") == "", 30, "the setting reset")


class HeldCommit:
    """Runs ``statement`` and commits on its own thread; the commit waits for the standby."""

    def __init__(self, dsn: str, statement: str) -> None:
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute("set synchronous_commit = on")
        self.pid = self._conn.info.backend_pid
        self._statement = statement
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            with self._conn.transaction():
                self._conn.execute(self._statement)
        except BaseException as exc:
            self.error = exc

    def __enter__(self) -> HeldCommit:
        self._thread.start()
        return self

    def release(self, dsn: str) -> None:
        """Cancel the wait: the transaction, committed all along, becomes visible."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("select pg_cancel_backend(%s)", (self.pid,))
        self._thread.join(30)
        assert not self._thread.is_alive() and self.error is None, self.error

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            with psycopg.connect(self._conn.info.dsn, autocommit=True) as conn:
                conn.execute("select pg_cancel_backend(%s)", (self.pid,))
            self._thread.join(30)
        self._conn.close()


def close_watermarks(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from debezium_signal where type = 'snapshot-window-close'").fetchone()
    return int(row[0]) if row else 0


def test_a_transaction_streamed_before_it_became_visible_does_not_slip_into_a_chunk(
    pg_server: Any, pg_database: str
) -> None:
    """The update of row 5 is streamed, then - still invisible - the snapshot reads the chunk
    with row 5: the read's row is older than the streamed change. The update was streamed
    before the window was queued, so no window watched it; the read's snapshot still names its
    transaction as committed but not seen, and the window is read again until it is visible.
    (A commit held before its commit record, as by a sleeping deferred trigger, is only an
    in-progress transaction: its change streams after the open watermark, inside the window.)"""
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 300)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("alter database {} set synchronous_commit = local").format(sql.Identifier(pg_database)))
    collector = Collector()
    engine = Engine(config(pg_server, pg_database, **{"incremental.snapshot.chunk.size": 100}), consumer=collector)
    with EngineRunner(engine), commits_waiting_for_a_standby(pg_server):
        with HeldCommit(dsn, "update t set v = 'held' where id = 5") as held:
            wait_until(
                lambda: any(e["key"] == {"id": 5} and e["value"]["op"] == "u" for e in collector.snapshot()),
                30,
                "the held update streamed",
            )
            with psycopg.connect(dsn) as conn:
                assert conn.execute("select v from t where id = 5").fetchone() == ("v5",)  # not visible yet
            signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public.t"]})
            wait_until(lambda: close_watermarks(dsn) >= 2, 60, "windows read while the update is invisible")
            held.release(dsn)
        wait_until(lambda: completed(engine, signal_id), 60, "snapshot completed")
        assert_target_equals_source(collector, dsn)
    reads = [e for e in collector.snapshot() if e["value"]["op"] == "r"]
    assert sorted(e["key"]["id"] for e in reads) == list(range(1, 301))


def committed_context(offsets: Path) -> list[Any]:
    """The snapshot contexts in the offsets file (one per partition that has one)."""
    stored = json.loads(offsets.read_text()) if offsets.exists() else {}
    return [offset[OFFSET_KEY] for offset in stored.values() if offset.get(OFFSET_KEY)]


@pytest.mark.parametrize("last", ["empty", "keyless"])
def test_a_finished_snapshot_is_not_resumed_when_its_last_table_yields_no_rows(
    pg_server: Any, pg_database: str, tmp_path: Path, last: str
) -> None:
    """Its last table's scan emits no row, so no record carries the cleared context: a position
    marker must, or the next start resumes the finished snapshot - notifying its end again and
    reading again the rows added meanwhile."""
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 50)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "create table zz_last (id int primary key, v text)"
            if last == "empty"
            else "create table zz_last (id int, v text)"
        )
    offsets = tmp_path / "offsets.json"
    cfg = config(
        pg_server,
        pg_database,
        **{
            "offset.storage": "file",
            "offset.storage.file.filename": str(offsets),
            "incremental.snapshot.chunk.size": 100,
        },
    )
    first = Engine(cfg, consumer=Collector())
    with EngineRunner(first):
        signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public.t", "public.zz_last"]})
        wait_until(lambda: completed(first, signal_id), 60, "snapshot completed")
    # Stopped at once: nothing was streamed after the last table's scan, yet what is committed
    # (at the stop, after everything handed over) must not carry the finished snapshot.
    assert committed_context(offsets) == []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into zz_last values (1, 'added while stopped')")
    collector = Collector()
    second = Engine(cfg, consumer=collector)
    with EngineRunner(second):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("insert into t values (1000, 'marker', 0)")
        wait_until(lambda: any(e["key"] == {"id": 1000} for e in collector.snapshot()), 30, "streaming")
    assert [n for n in notifications(second) if n["aggregate_type"] == "Incremental Snapshot"] == []
    added = collector.snapshot("shop.public.zz_last")
    assert [e["value"]["op"] for e in added] == ["c"]  # streamed, not read again by a snapshot
