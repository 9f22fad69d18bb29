"""The replication connection lost under a running engine and a write load: its WAL sender
terminated from the server side (``pg_terminate_backend``), and the whole server crashed and
restarted (``pg_ctl stop -m immediate``, then started again). The engine reopens its connections
and streams on from the last committed position: afterwards the events replayed equal the
source table row by row (re-sent changes are allowed, and counted), the slot is active again
with its lag near zero, and after the stop the engine holds no connection."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.sources.postgres import pgoutput
from airflow_cdc.engine.sources.postgres.link import ReplicationLink
from airflow_cdc.engine.sources.postgres.stream import ReplicationStream, SlotActiveError
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.local.postgres import PostgresServer

from .pg_support import WriteLoad, apply, create_load_table, engine_config, image_diff, source_image
from .tcp_relay import Relay

pytestmark = pytest.mark.integration

ROWS = 2000
#: Lag (WAL bytes between the server's end and the slot's confirmed position) counted as caught up.
LAG_NEAR_ZERO = 64 * 1024


class Collector:
    """The engine's consumer: every delivered event, decoded."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        event = {
            "key": json.loads(item.key) if item.key else None,
            "value": json.loads(item.value) if item.value else None,
        }
        with self.lock:
            self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def distinct(self) -> int:
        """How many different change events were delivered (each counted once)."""
        return len(set(identities(self.snapshot())))


class RestartProofLoad(WriteLoad):
    """The write load, reconnecting when the server goes away (a transaction cut short by the
    crash is simply not in the source)."""

    def _run(self) -> None:
        while not self._stop.is_set() and self.transactions < 200_000:
            try:
                super()._run()
            finally:
                if isinstance(self.error, psycopg.OperationalError):
                    self.error = None
                    self._stop.wait(0.05)  # the server is restarting: ask again shortly
                elif self.error is not None:
                    return


def identities(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What tells change events apart (a tombstone follows its delete: left out)."""
    return [
        (e["value"]["source"]["lsn"], json.dumps(e["key"], sort_keys=True), e["value"]["op"])
        for e in events
        if e["value"] is not None
    ]


def duplicates(events: list[dict[str, Any]]) -> int:
    """Change events delivered more than once."""
    seen = identities(events)
    return len(seen) - len(set(seen))


def slot(conn: psycopg.Connection[Any], name: str) -> tuple[int | None, int]:
    """The slot's active WAL sender (None: inactive) and its lag in bytes."""
    row = conn.execute(
        "select active_pid, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint"
        " from pg_replication_slots where slot_name = %s",
        (name,),
    ).fetchone()
    assert row is not None, f"slot {name} is gone"
    return row[0], int(row[1])


def confirmed_past(conn: psycopg.Connection[Any], name: str, lsn: str) -> bool:
    row = conn.execute(
        "select confirmed_flush_lsn >= %s::pg_lsn from pg_replication_slots where slot_name = %s", (lsn, name)
    ).fetchone()
    return bool(row and row[0])


def engine_connections(conn: psycopg.Connection[Any], engine_name: str) -> list[tuple[int, str]]:
    rows = conn.execute(
        "select pid, backend_type from pg_stat_activity where application_name = %s",
        (f"airflow-cdc-{engine_name}",),
    ).fetchall()
    return [(int(pid), str(kind)) for pid, kind in rows]


def new_walsender(server: PostgresServer, database: str, slot_name: str, old: int | None) -> int:
    """Wait until the slot is active for a WAL sender other than ``old``: the engine streams again."""

    def active() -> int | None:
        with server.connect(database) as admin:
            pid, _ = slot(admin, slot_name)
        return pid if pid is not None and pid != old else None

    return int(wait_until(active, 60, "the slot active again"))


def progress(collected: Collector, events: int) -> None:
    """Wait until ``events`` more events are delivered, not counting those sent again."""
    seen = collected.distinct()
    wait_until(lambda: collected.distinct() >= seen + events, 60, f"{events} new events")


def run_under_load(
    server: PostgresServer, database: str, disrupt: Callable[[int], None], times: int
) -> tuple[list[dict[str, Any]], list[float], int]:
    """Stream under a write load, ``disrupt`` the engine's WAL sender ``times`` times (each after
    some progress, the next once it streams again), then wait until the target equals the source.
    The events delivered, how long each recovery took (disruption to an active slot), the lag."""
    with server.connect(database) as conn:
        create_load_table(conn, ROWS)
    config = engine_config(
        server, database, **{"errors.retry.delay.initial.ms": 100, "errors.retry.delay.max.ms": 1000}
    )
    name, slot_name = config["name"], config["slot.name"]
    collected = Collector()
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())
    recoveries: list[float] = []
    with RestartProofLoad(server.dsn(database), first_new_id=ROWS + 1) as load, EngineRunner(engine):
        walsender = new_walsender(server, database, slot_name, None)
        for _ in range(times):
            progress(collected, 300)
            began = time.monotonic()
            disrupt(walsender)
            walsender = new_walsender(server, database, slot_name, walsender)
            recoveries.append(time.monotonic() - began)
        progress(collected, 300)
        load.stop()
        assert load.transactions > 100
        with server.connect(database) as conn:
            expected = source_image(conn)
            written = conn.execute("select pg_current_wal_lsn()").fetchone()[0]
        try:
            wait_until(lambda: apply(collected.snapshot()) == expected, 120, "target equals source")
        except TimeoutError:
            diff = image_diff(expected, apply(collected.snapshot()))
            raise AssertionError(f"target never equalled source: {diff}") from None
        with server.connect(database) as admin:
            # Everything the load wrote is confirmed to the server: the slot's lag is back to
            # what was written since (WAL of no transaction, e.g. checkpoints), near zero.
            wait_until(lambda: confirmed_past(admin, slot_name, written), 60, "the load's WAL confirmed")
            active, lag = slot(admin, slot_name)
            assert lag <= LAG_NEAR_ZERO, lag
            assert active == walsender, "the slot is served by the engine's current WAL sender"
            # Nothing leaked by failed or repeated attempts: one catalog connection, one WAL sender.
            kinds = sorted(kind for _, kind in engine_connections(admin, name))
            assert kinds == ["client backend", "walsender"], kinds
    with server.connect(database) as admin:
        wait_until(lambda: not engine_connections(admin, name), 30, "no engine connection after the stop")
    return collected.snapshot(), recoveries, lag


def test_walsender_terminated_three_times_under_load_loses_nothing(pg_server, pg_database):
    def terminate(walsender: int) -> None:
        with pg_server.connect(pg_database) as admin:
            assert admin.execute("select pg_terminate_backend(%s)", (walsender,)).fetchone() == (True,)

    events, recoveries, lag = run_under_load(pg_server, pg_database, terminate, times=3)
    print(
        f"walsender terminated 3x: {duplicates(events)} duplicates of {len(events)} events, "
        f"recoveries {[round(s, 2) for s in recoveries]} s, lag after {lag} bytes"
    )


def test_a_slot_still_held_after_the_loss_is_waited_for(pg_server, pg_database, caplog):
    """After the loss another WAL sender holds the slot for a while: reopening is refused with
    55006 object_in_use, which is retried - not fatal - until the slot is free again."""
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, ROWS)
    # A second between the loss and the first attempt to reopen: time to take the slot first.
    retry = {"errors.retry.delay.initial.ms": 1000, "errors.retry.delay.max.ms": 1000}
    config = engine_config(pg_server, pg_database, **retry)
    slot_name = config["slot.name"]
    collected = Collector()
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())
    with WriteLoad(pg_server.dsn(pg_database), first_new_id=ROWS + 1) as load, EngineRunner(engine) as runner:
        walsender = new_walsender(pg_server, pg_database, slot_name, None)
        progress(collected, 300)
        with pg_server.connect(pg_database) as admin:
            admin.execute("select pg_terminate_backend(%s)", (walsender,))
            (confirmed,) = admin.execute(
                "select confirmed_flush_lsn::text from pg_replication_slots where slot_name = %s", (slot_name,)
            ).fetchone()
        other = ReplicationStream.connect(pg_server.dsn(pg_database))
        try:
            # The terminated WAL sender may hold the slot a moment longer: take it once it is free.
            wait_until(lambda: holds(other, slot_name, config["publication.name"], confirmed), 10, "slot taken")

            def refusals() -> int:
                return sum("55006" in r.getMessage() for r in caplog.records if "poll failed" in r.getMessage())

            wait_until(lambda: refusals() >= 2, 30, "the engine refused the slot twice")
            assert connected(runner) == 0.0  # the status tells: not streaming now
        finally:
            other.close()
        new_walsender(pg_server, pg_database, slot_name, walsender)
        wait_until(lambda: connected(runner) == 1.0, 10, "connected again")
        progress(collected, 300)
        load.stop()
        with pg_server.connect(pg_database) as conn:
            expected = source_image(conn)
        wait_until(lambda: apply(collected.snapshot()) == expected, 120, "target equals source")
        assert runner.error is None and engine.error is None


def connected(runner: EngineRunner) -> float | None:
    """The task's ``connected`` figure in the engine's status (Debezium's Connected)."""
    return runner.engine.status()["tasks"][0]["source"].get("connected")


def holds(stream: ReplicationStream, slot_name: str, publication: str, lsn: str) -> bool:
    """Start streaming ``slot_name`` on ``stream`` (False: the slot is still active elsewhere)."""
    try:
        stream.start(slot_name, publication, pgoutput.parse_lsn(lsn))
    except SlotActiveError:
        return False
    return True


def test_the_wal_sender_of_a_vanished_client_is_ended(pg_server, pg_database):
    """A silent network partition: the client gave its connection up, but the server hears
    nothing of it, and its WAL sender holds the slot until wal_sender_timeout (60 s here). The
    link ends that WAL sender - its own - and streams again at once."""
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 1)
        conn.execute(f"create publication pub_{pg_database} for all tables")
        (start,) = conn.execute(
            "select lsn::text from pg_create_logical_replication_slot(%s, 'pgoutput')", (f"slot_{pg_database}",)
        ).fetchone()
    relay = Relay(pg_server.host, pg_server.port)
    conninfo = pg_server.dsn(pg_database, port=relay.port, sslmode="disable", gssencmode="disable")
    link = ReplicationLink("test", conninfo, f"slot_{pg_database}", f"pub_{pg_database}", None)
    try:
        link.connect()
        link.start(pgoutput.parse_lsn(start))
        assert link.stream is not None
        vanished = link.stream.backend_pid
        relay.freeze()
        link.lost(RetriableError("no answer"))  # its goodbye never reaches the server
        with pg_server.connect(pg_database) as catalog:
            assert slot(catalog, f"slot_{pg_database}")[0] == vanished
            began = time.monotonic()

            def reopened() -> bool:
                try:
                    link.reopen(catalog)
                except SlotActiveError:
                    return False
                return True

            wait_until(reopened, 10, "streaming again, well before wal_sender_timeout")
            took = time.monotonic() - began
            assert slot(catalog, f"slot_{pg_database}")[0] not in (None, vanished)
        print(f"vanished client's WAL sender ended, streaming again after {took:.2f} s")
    finally:
        link.close()
        relay.close()


def crash_and_restart(server: PostgresServer) -> None:
    """``pg_ctl stop -m immediate`` (every process quits at once, no checkpoint), then start the
    same cluster again: it runs crash recovery first, refusing connections with 57P03."""
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    pg_ctl = [str(server.program("pg_ctl")), "stop", "-D", str(server.data_dir), "-m", "immediate", "-w"]
    subprocess.run([*as_postgres, *pg_ctl], check=True, capture_output=True, timeout=60)
    wait_until(lambda: not server.running, 30, "the postmaster gone")
    server.start()


def test_server_restarted_immediately_under_load_loses_nothing(own_pg):
    database = own_pg.create_database()
    events, recoveries, lag = run_under_load(own_pg, database, lambda walsender: crash_and_restart(own_pg), times=2)
    print(
        f"server crashed 2x: {duplicates(events)} duplicates of {len(events)} events, "
        f"recoveries {[round(s, 2) for s in recoveries]} s, lag after {lag} bytes"
    )
