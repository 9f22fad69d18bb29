"""snapshot.mode: initial, initial_only, no_data, when_needed, always; and a crash in the middle
of the initial snapshot."""

from __future__ import annotations

import signal

import pytest

from airflow_cdc.engine import CdcError, Engine, EngineFailedError, JsonSerializer
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
    wait_for_target,
)
from .test_postgres_source import Collector


def run_until(config, store, count: int, then=None) -> Collector:
    collected = Collector()
    with EngineRunner(Engine(config, consumer=collected, serializer=JsonSerializer(), offset_store=store)):
        if then:
            then()
        wait_until(lambda: len(collected.snapshot()) >= count, 30, f"{count} events")
    return collected


def insert(pg_server, database, row_id):
    def action():
        with pg_server.connect(database) as conn:
            conn.execute("insert into t values (%s, 'x', 0)", (row_id,))

    return action


def ops(collected):
    return [(e["value"]["op"], e["key"]["id"]) for e in collected.snapshot() if e["value"]]


def test_no_data_streams_only_new_changes(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 3)
    config = engine_config(pg_server, pg_database, **{"snapshot.mode": "no_data"})
    collected = run_until(config, MemoryOffsetStore("x"), 1, insert(pg_server, pg_database, 50))
    assert ops(collected) == [("c", 50)]


def test_initial_only_snapshots_streams_nothing_and_leaves_no_slot(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 3)
    config = engine_config(pg_server, pg_database, **{"snapshot.mode": "initial_only"})
    store = MemoryOffsetStore("x")

    def slots() -> list[tuple[str, bool]]:
        with pg_server.connect(pg_database) as conn:
            return conn.execute("select slot_name, temporary from pg_replication_slots").fetchall()

    collected = Collector()
    engine = Engine(config, consumer=collected, serializer=JsonSerializer(), offset_store=store)
    with EngineRunner(engine) as runner:
        wait_until(lambda: len(collected.snapshot()) == 3, 30, "snapshot")
        insert(pg_server, pg_database, 50)()
        wait_until(lambda: runner.engine.tasks[0].polled >= 3, 5, "polled")
        assert slots() in ([], [(config["slot.name"], True)])  # temporary: dropped with its connection
    assert ops(collected) == [("r", 1), ("r", 2), ("r", 3)]
    wait_until(lambda: slots() == [], 10, "no slot left holding WAL")
    # A second run finds the snapshot done: nothing read again, nothing streamed, no slot.
    again = Collector()
    with EngineRunner(Engine(config, consumer=again, serializer=JsonSerializer(), offset_store=store)) as runner:
        wait_until(
            lambda: runner.engine.tasks[0].polled >= 0 and runner.engine.state.value == "POLLING_TASKS", 30, "up"
        )
        assert slots() == []
    assert again.snapshot() == []


def test_always_snapshots_again_at_every_start(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 2)
    store = MemoryOffsetStore("x")
    config = engine_config(pg_server, pg_database, **{"snapshot.mode": "always"})
    assert ops(run_until(config, store, 2)) == [("r", 1), ("r", 2)]
    assert ops(run_until(config, store, 2)) == [("r", 1), ("r", 2)]


def test_lost_slot_fails_in_initial_mode_and_resnapshots_in_when_needed(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 2)
    store = MemoryOffsetStore("x")
    config = engine_config(pg_server, pg_database)
    run_until(config, store, 2)
    with pg_server.connect(pg_database) as conn:
        conn.execute("select pg_drop_replication_slot(%s)", (config["slot.name"],))
    with pytest.raises(EngineFailedError) as failed:
        Engine(config, consumer=lambda r: None, offset_store=store).run()
    assert isinstance(failed.value.__cause__, CdcError)
    assert "no longer exists" in str(failed.value.__cause__) and "when_needed" in str(failed.value.__cause__)
    again = run_until({**config, "snapshot.mode": "when_needed"}, store, 2)
    assert ops(again) == [("r", 1), ("r", 2)]


@pytest.mark.slow
def test_a_crash_during_the_initial_snapshot_restarts_it_cleanly(pg_server, pg_database, tmp_path):
    with pg_server.connect(pg_database) as conn:
        # Big enough that the snapshot is still running when the kill lands (it got faster).
        create_load_table(conn, 150_000)
    config = engine_config(pg_server, pg_database, **{"max.batch.size": 256})
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"
    # Deletes included: rows the crashed attempt read and that are deleted before the redo must
    # still disappear from the target (the restart streams from the first attempt's slot position).
    with WriteLoad(pg_server.dsn(pg_database), first_new_id=150_001):
        child = start_child(config, log, offsets)
        # By the log's size, not its events: parsing a growing log at each look let the snapshot
        # finish (150k rows in about 2 s) before the kill landed.
        wait_until(
            lambda: (log.exists() and log.stat().st_size >= 400_000) or child.poll() is not None,
            60,
            "snapshot under way",
        )
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        first = read_events(log)
        assert 0 < len(first) < 150_000 and all(e["value"]["op"] == "r" for e in first)
        child = start_child(config, log, offsets)
        wait_until(
            lambda: sum(1 for e in read_events(log) if e["value"] and e["value"]["op"] == "c") > 100,
            120,
            "snapshot redone, streaming",
        )
    with pg_server.connect(pg_database) as conn:
        expected = source_image(conn)
    wait_for_target(log, expected, child, 180)
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 0, child_stderr(log)


def test_rows_deleted_after_an_interrupted_snapshot_leave_the_target(pg_server, pg_database):
    """The first attempt dies mid-snapshot after emitting rows that are then deleted; the redo
    must make them disappear from the target (it streams from the first attempt's position)."""
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 3000)
    store = MemoryOffsetStore("x")
    config = engine_config(pg_server, pg_database, **{"max.batch.size": 100, "offset.commit.policy": "always"})
    first = Collector()

    def dies_mid_snapshot(item) -> None:
        if len(first.snapshot()) >= 1000:
            raise RuntimeError("crash in the middle of the snapshot")
        first(item)

    with pytest.raises(EngineFailedError, match="crash in the middle"):
        Engine(config, consumer=dies_mid_snapshot, serializer=JsonSerializer(), offset_store=store).run()
    assert store.read({"server": "shop"})["snapshot"] is True  # the snapshot was left unfinished
    emitted = [e["key"]["id"] for e in first.snapshot()]
    with pg_server.connect(pg_database) as conn:
        conn.execute("delete from t where id = any(%s)", (emitted[:500],))
        expected = source_image(conn)
    second = Collector()
    with EngineRunner(Engine(config, consumer=second, serializer=JsonSerializer(), offset_store=store)):
        wait_until(lambda: apply(first.snapshot() + second.snapshot()) == expected, 60, "target equals source")
