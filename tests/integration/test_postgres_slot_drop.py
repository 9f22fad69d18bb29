"""``slot.drop.on.stop`` under repetition: the slot is dropped only once the server's WAL sender
for our own connection has let go of it, so no stop leaves a slot (and its retained WAL) behind."""

from __future__ import annotations

import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .pg_support import engine_config

REPETITIONS = 50


def slots(pg_server, database):
    with pg_server.connect(database) as conn:
        return conn.execute(
            "select slot_name, active, active_pid from pg_replication_slots where database = %s", (database,)
        ).fetchall()


@pytest.mark.slow
def test_fifty_starts_and_stops_leave_no_slot(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table t (id int primary key, v text)")
        conn.execute("insert into t values (1, 'one')")
    config = engine_config(
        pg_server,
        pg_database,
        **{"slot.drop.on.stop": True, "snapshot.mode": "no_data", "heartbeat.interval.ms": 0},
    )
    left_behind = []
    for repetition in range(REPETITIONS):
        engine = Engine(config, consumer=lambda r: None)
        with EngineRunner(engine):
            # Streaming: the WAL sender holds the slot, the moment a drop raced with it.
            wait_until(lambda: slots(pg_server, pg_database) and slots(pg_server, pg_database)[0][1], 30, "active")
            with pg_server.connect(pg_database) as conn:
                conn.execute("insert into t values (%s, 'x') on conflict (id) do nothing", (repetition + 2,))
        assert engine.error is None, engine.error
        remaining = slots(pg_server, pg_database)
        if remaining:
            left_behind.append((repetition, remaining))
            with pg_server.connect(pg_database) as conn:  # clean up, so the next run starts afresh
                wait_until(lambda: not slots(pg_server, pg_database)[0][1], 30, "inactive")
                conn.execute("select pg_drop_replication_slot(%s)", (config["slot.name"],))
    assert left_behind == [], f"{len(left_behind)} of {REPETITIONS} stops left the slot: {left_behind[:3]}"


def test_a_slot_held_by_another_consumer_is_not_taken_and_our_own_lingering_sender_is_ended(pg_server, pg_database):
    from airflow_cdc.engine.sources.postgres import catalog
    from airflow_cdc.engine.sources.postgres.stream import ReplicationStream

    with pg_server.connect(pg_database) as conn:
        conn.execute("create publication pub for all tables")
    holder = ReplicationStream.connect(pg_server.dsn(pg_database))
    try:
        lsn, _ = holder.create_slot("held", export_snapshot=False)
        holder.start("held", "pub", lsn)
        with pg_server.connect(pg_database) as conn:
            wait_until(lambda: catalog.slot_state(conn, "held").active, 10, "held")
            with pytest.raises(catalog.SlotDropError, match=f"PID {holder.backend_pid}, not this engine"):
                catalog.drop_slot(conn, "held", own_pid=holder.backend_pid + 1)
            assert catalog.slot_state(conn, "held") is not None
            # Our own sender that does not go away (here: still open) is ended after the grace.
            catalog.drop_slot(conn, "held", own_pid=holder.backend_pid, grace=0.1, timeout=10)
            assert catalog.slot_state(conn, "held") is None
    finally:
        holder.close()
