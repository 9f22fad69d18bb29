"""With the heartbeat on, a slot on an idle database (or one whose changes are all filtered out)
keeps up with the server's WAL, so WAL does not pile up."""

from __future__ import annotations

import time

import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .pg_support import engine_config


def slot_lag(pg_server, slot: str) -> int:
    with pg_server.connect() as conn:
        row = conn.execute(
            "select (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint from pg_replication_slots "
            "where slot_name = %s",
            (slot,),
        ).fetchone()
    return int(row[0])


def write_wal(pg_server, database: str, seconds: float, lag_of) -> tuple[int, list[int]]:
    """Write WAL in ``database`` for ``seconds``; sample the slot's lag once a second."""
    samples, written = [], 0
    with pg_server.connect(database) as conn:
        conn.execute("create table if not exists noise (id serial primary key, payload text)")
        start_lsn = conn.execute("select pg_current_wal_lsn()").fetchone()[0]
        deadline, next_sample = time.monotonic() + seconds, time.monotonic() + 1
        while time.monotonic() < deadline:
            conn.execute("insert into noise (payload) select repeat('x', 200) from generate_series(1, 200)")
            if time.monotonic() >= next_sample:
                samples.append(lag_of())
                next_sample += 1
        written = conn.execute("select (pg_current_wal_lsn() - %s::pg_lsn)::bigint", (start_lsn,)).fetchone()[0]
    return written, samples


@pytest.mark.slow
def test_idle_database_slot_lag_stays_bounded_over_a_minute_of_other_database_wal(pg_server, pg_database):
    other = f"{pg_database}_noise"
    with pg_server.connect() as conn:
        conn.execute(f'create database "{other}"')
    config = engine_config(pg_server, pg_database, **{"heartbeat.interval.ms": 1000})
    try:
        with EngineRunner(Engine(config, consumer=lambda r: None)):
            written, samples = write_wal(pg_server, other, 60, lambda: slot_lag(pg_server, config["slot.name"]))
            wait_until(lambda: slot_lag(pg_server, config["slot.name"]) < 1_000_000, 15, "slot caught up")
    finally:
        with pg_server.connect() as conn:
            conn.execute(f'drop database if exists "{other}" with (force)')
    assert written > 50_000_000, "the load wrote too little WAL to prove anything"
    # The lag never grows with the WAL written: it stays within a few seconds' worth.
    per_second = written / 60
    assert max(samples[5:]) < 5 * per_second + 2_000_000, (max(samples), per_second)


def test_slot_advances_when_every_change_is_filtered_out(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table ignored (id serial primary key, payload text)")
        conn.execute("create table wanted (id int primary key)")
    config = engine_config(
        pg_server, pg_database, **{"table.include.list": r"public\.wanted", "heartbeat.interval.ms": 0}
    )
    delivered = []
    with EngineRunner(Engine(config, consumer=delivered.append)):
        with pg_server.connect(pg_database) as conn:
            for _ in range(50):
                conn.execute("insert into ignored (payload) select repeat('y', 100) from generate_series(1, 100)")
        wait_until(lambda: slot_lag(pg_server, config["slot.name"]) < 100_000, 20, "slot advanced past filtered WAL")
    assert delivered == []
