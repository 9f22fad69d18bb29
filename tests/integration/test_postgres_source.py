"""The PostgreSQL source against a real server: snapshot consistency, resume, stop paths,
setup errors, several databases."""

from __future__ import annotations

import json
import signal
import threading

import psycopg
import pytest

from airflow_cdc.engine import Engine, EngineFailedError, JsonSerializer
from airflow_cdc.engine.sources.postgres.catalog import SourceSetupError
from airflow_cdc.engine.sources.postgres.stream import SlotActiveError
from airflow_cdc.engine.storage import MemoryOffsetStore
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .pg_support import (
    WriteLoad,
    apply,
    child_stderr,
    create_load_table,
    engine_config,
    read_events,
    source_image,
    start_child,
)


class Collector:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, item) -> None:
        event = {
            "key": json.loads(item.key) if item.key else None,
            "value": json.loads(item.value) if item.value else None,
        }
        with self.lock:
            self.events.append(event)

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.events)


def test_initial_snapshot_with_concurrent_writes_converges_to_the_source(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 30_000)
    collected = Collector()
    engine = Engine(engine_config(pg_server, pg_database), consumer=collected, serializer=JsonSerializer())
    with WriteLoad(pg_server.dsn(pg_database), first_new_id=30_001) as load, EngineRunner(engine):
        wait_until(
            lambda: sum(1 for e in collected.snapshot() if e["value"] and e["value"]["op"] == "c") > 500,
            60,
            "streaming after the snapshot",
        )
        load.stop()
        with pg_server.connect(pg_database) as conn:
            expected = source_image(conn)
        wait_until(lambda: apply(collected.snapshot()) == expected, 60, "target equals source")
    ops = [e["value"]["op"] for e in collected.snapshot() if e["value"]]
    reads = ops.count("r")
    assert reads >= 30_000 and set(ops[:reads]) == {"r"}  # the snapshot first, then the stream
    assert collected.snapshot()[reads - 1]["value"]["source"]["snapshot"] == "last"


def test_restart_resumes_exactly_after_the_last_delivered_change(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 10)
    store = MemoryOffsetStore(f"pg-{pg_database}")
    config = engine_config(pg_server, pg_database, **{"offset.commit.policy": "always"})
    first = Collector()
    with EngineRunner(Engine(config, consumer=first, serializer=JsonSerializer(), offset_store=store)):
        with pg_server.connect(pg_database) as conn:
            conn.execute("insert into t values (100, 'a', 1)")
        wait_until(lambda: len(first.snapshot()) == 11, 30, "snapshot and one insert")
    with pg_server.connect(pg_database) as conn:  # written while the engine is down
        conn.execute("update t set v = 'b' where id = 100")
        conn.execute("delete from t where id = 1")
    second = Collector()
    with EngineRunner(Engine(config, consumer=second, serializer=JsonSerializer(), offset_store=store)):
        wait_until(lambda: len(second.snapshot()) >= 3, 30, "changes made while stopped")
        with pg_server.connect(pg_database) as conn:
            expected = source_image(conn)
        wait_until(lambda: apply(first.snapshot() + second.snapshot()) == expected, 30, "target equals source")
    ops = [
        (e["value"]["op"], e["key"]["id"]) if e["value"] else ("tombstone", e["key"]["id"]) for e in second.snapshot()
    ]
    assert ops == [("u", 100), ("d", 1), ("tombstone", 1)]  # no snapshot again, no duplicate


def _leftovers(pg_server, database: str, slot: str) -> tuple:
    with pg_server.connect(database) as conn:
        slot_row = conn.execute("select active from pg_replication_slots where slot_name = %s", (slot,)).fetchone()
        sessions = conn.execute(
            "select count(*) from pg_stat_activity where application_name like 'airflow-cdc-%%' and datname = %s",
            (database,),
        ).fetchone()
    return slot_row, sessions


def test_after_stop_the_slot_is_inactive_and_nothing_leaks(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 5)
    config = engine_config(pg_server, pg_database)
    threads_before = set(threading.enumerate())
    collected = Collector()
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        wait_until(lambda: len(collected.snapshot()) == 5, 30, "snapshot")
        # The slot turns active when streaming starts, which can come a while after the
        # snapshot's rows on a loaded machine.
        wait_until(lambda: _leftovers(pg_server, pg_database, config["slot.name"])[0] == (True,), 30, "streaming")
    wait_until(
        lambda: _leftovers(pg_server, pg_database, config["slot.name"]) == ((False,), (0,)),
        10,
        "slot inactive, sessions closed",
    )
    wait_until(lambda: set(threading.enumerate()) <= threads_before, 10, "engine threads gone")


def test_sigterm_releases_the_slot_for_the_next_start(pg_server, pg_database, tmp_path):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 5)
    config = engine_config(pg_server, pg_database)
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"
    for _ in range(2):  # the second start must not fail with "slot is active"
        child = start_child(config, log, offsets)
        wait_until(lambda: _leftovers(pg_server, pg_database, config["slot.name"])[0] == (True,), 30, "streaming")
        wait_until(lambda: len(read_events(log)) >= 5 and offsets.exists(), 30, "snapshot delivered")
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == 0, child_stderr(log)
        # The server ends a closed connection's backend on its own time, just after.
        wait_until(
            lambda: _leftovers(pg_server, pg_database, config["slot.name"]) == ((False,), (0,)),
            10,
            "slot inactive, sessions closed",
        )
    assert len(read_events(log)) == 5  # the restart resumed instead of snapshotting again


def test_a_role_without_replication_gets_an_actionable_error(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        conn.execute("create role plain_user login")
    config = engine_config(pg_server, pg_database, **{"database.user": "plain_user", "errors.max.retries": 0})
    with pytest.raises(EngineFailedError) as failed:
        Engine(config, consumer=lambda r: None).run()
    assert isinstance(failed.value.__cause__, SourceSetupError)
    assert "ALTER ROLE plain_user REPLICATION" in str(failed.value.__cause__)


def test_a_slot_held_by_someone_else_is_reported_with_its_pid(pg_server, pg_database):
    slot = f"slot_{pg_database}"
    holder = psycopg.connect(pg_server.dsn(pg_database), replication="database", autocommit=True)
    try:
        holder.execute(f"CREATE_REPLICATION_SLOT {slot} LOGICAL pgoutput NOEXPORT_SNAPSHOT")
        holder.pgconn.send_query(
            f"START_REPLICATION SLOT {slot} LOGICAL 0/0 (proto_version '1', publication_names 'x')".encode()
        )
        config = engine_config(pg_server, pg_database, **{"errors.max.retries": 1, "snapshot.mode": "no_data"})
        with pytest.raises(EngineFailedError) as failed:
            Engine(config, consumer=lambda r: None).run()
        cause = failed.value.__cause__
        assert isinstance(cause, SlotActiveError) and "is active for PID" in str(cause)
        # Each failed start attempt closed what it had opened.
        wait_until(lambda: _leftovers(pg_server, pg_database, slot)[1] == (0,), 10, "no sessions left")
    finally:
        holder.close()


def test_several_databases_run_one_task_each_with_their_own_slot(pg_server, pg_database):
    other = f"{pg_database}_b"
    with pg_server.connect() as conn:
        conn.execute(f'create database "{other}"')
    try:
        for db in (pg_database, other):
            with pg_server.connect(db) as conn:
                create_load_table(conn, 3)
        config = engine_config(
            pg_server, pg_database, **{"database.names": f"{pg_database},{other}", "tasks.max": 2, "slot.name": "multi"}
        )
        collected = Collector()
        engine = Engine(config, consumer=collected, serializer=JsonSerializer())
        with EngineRunner(engine):
            with pg_server.connect(other) as conn:
                conn.execute("insert into t values (99, 'x', 1)")
            wait_until(lambda: len(collected.snapshot()) == 7, 30, "two snapshots and one insert")
            wait_until(lambda: all(task["offsets"] for task in engine.status()["tasks"]), 10, "both tasks committed")
            offsets = {key for task in engine.status()["tasks"] for key in task["offsets"]}
        topics = {(e["value"]["source"]["db"], e["value"]["op"]) for e in collected.snapshot()}
        assert topics == {(pg_database, "r"), (other, "r"), (other, "c")}
        assert len(offsets) == 2 and all('"database"' in key for key in offsets)
        with pg_server.connect() as conn:
            slots = {
                r[0] for r in conn.execute("select slot_name from pg_replication_slots where slot_name like 'multi%%'")
            }
        assert len(slots) == 2
    finally:
        pg_server.drop_database(other)  # with its slot; the other goes with pg_database
