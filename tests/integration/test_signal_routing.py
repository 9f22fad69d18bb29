"""Signals with several databases (``database.names``: one task each): every signal goes to the
tasks whose tables it names, whichever task reads the channel; one no task can act on is
rejected once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.pg_support import engine_config
from tests.integration.test_incremental_snapshot import Collector, notifications

pytestmark = pytest.mark.integration

TABLES = {
    "first": {"only_first": 3, "common": 2},
    "second": {"only_second": 4, "common": 5},
}


@pytest.fixture
def two_databases(pg_server: Any, pg_database: str) -> Iterator[dict[str, str]]:
    names = {"first": pg_database, "second": f"{pg_database}_2"}
    with pg_server.connect() as conn:
        conn.execute(f'create database "{names["second"]}"')
    try:
        for role, tables in TABLES.items():
            with pg_server.connect(names[role]) as conn:
                for table, rows in tables.items():
                    conn.execute(f"create table {table} (id int primary key, v text)")
                    conn.execute(f"insert into {table} select g, 'v' || g from generate_series(1, {rows}) g")
        yield names
    finally:
        pg_server.drop_database(names["second"])  # with its slot; the first's goes with pg_database


def by_id(engine: Engine, signal_id: str, kind: str) -> list[dict[str, Any]]:
    return [n for n in notifications(engine, kind) if n["id"] == signal_id]


def reads(collector: Collector) -> set[tuple[str, str, int]]:
    with collector.lock:
        events = list(collector.events)
    return {
        (e["value"]["source"]["db"], e["value"]["source"]["table"], e["key"]["id"])
        for e in events
        if e["value"] and e["value"]["op"] == "r"
    }


def test_api_signals_go_to_the_tasks_that_own_their_tables(pg_server: Any, two_databases: dict[str, str]) -> None:
    first, second = two_databases["first"], two_databases["second"]
    cfg = engine_config(
        pg_server,
        first,
        **{"database.names": f"{first},{second}", "tasks.max": 2, "slot.name": "routes", "snapshot.mode": "no_data"},
    )
    collector = Collector()
    engine = Engine(cfg, consumer=collector)
    with EngineRunner(engine):
        # Only the second database has it: whichever task reads the api channel, its task acts.
        only_second = engine.signals.send("execute-snapshot", {"data-collections": ["public.only_second"]})
        wait_until(lambda: by_id(engine, only_second, "COMPLETED"), 60, "the second task's snapshot")
        # Both have one: both tasks snapshot theirs (each reports its own end).
        common = engine.signals.send("execute-snapshot", {"data-collections": ["public\\.common"]})
        wait_until(lambda: len(by_id(engine, common, "COMPLETED")) == 2, 60, "both tasks' snapshots")
        # A database-qualified name picks one database.
        qualified = engine.signals.send("execute-snapshot", {"data-collections": [f"{first}.public.only_first"]})
        wait_until(lambda: by_id(engine, qualified, "COMPLETED"), 60, "the first task's snapshot")
        # Nobody's: rejected once, not once per task.
        nobody = engine.signals.send("execute-snapshot", {"data-collections": ["public.nowhere"]})
        idle = engine.signals.send("pause-snapshot", {})
        wait_until(lambda: by_id(engine, nobody, "REJECTED") and by_id(engine, idle, "REJECTED"), 30, "rejections")
    assert reads(collector) == {
        *((second, "only_second", i) for i in range(1, 5)),
        *((first, "common", i) for i in range(1, 3)),
        *((second, "common", i) for i in range(1, 6)),
        *((first, "only_first", i) for i in range(1, 4)),
    }
    rejected = notifications(engine, "REJECTED")
    assert sorted(n["id"] for n in rejected) == sorted([nobody, idle]), rejected
    assert "no captured table matches" in by_id(engine, nobody, "REJECTED")[0]["additional_data"]["problem"]
    assert "no incremental snapshot is running" in by_id(engine, idle, "REJECTED")[0]["additional_data"]["problem"]
