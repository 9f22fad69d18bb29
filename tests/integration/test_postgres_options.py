"""Options and failure paths of the PostgreSQL source: wal_level, column and table filters,
slot.drop.on.stop, and the slot released when the engine fails."""

from __future__ import annotations

import time

import pytest

from airflow_cdc.engine import Engine, EngineFailedError, JsonSerializer
from airflow_cdc.engine.sources.postgres.catalog import SourceSetupError
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.local.postgres import PostgresServer

from .pg_support import engine_config
from .test_postgres_source import Collector


def slot_row(pg_server, database, slot):
    with pg_server.connect(database) as conn:
        return conn.execute("select active from pg_replication_slots where slot_name = %s", (slot,)).fetchone()


def test_a_server_without_logical_wal_level_says_how_to_fix_it():
    with PostgresServer(settings={"wal_level": "replica"}) as server:
        config = engine_config(server, "postgres", **{"errors.max.retries": 0})
        with pytest.raises(EngineFailedError) as failed:
            Engine(config, consumer=lambda r: None).run()
    cause = failed.value.__cause__
    assert isinstance(cause, SourceSetupError)
    assert "wal_level is 'replica'" in str(cause) and "wal_level = logical" in str(cause)


def test_excluded_tables_and_columns_are_not_captured(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table kept (id int primary key, secret text, v text)")
        conn.execute("create table skipped (id int primary key)")
    config = engine_config(
        pg_server,
        pg_database,
        **{"table.exclude.list": r"public\.skipped", "column.exclude.list": r"public\.kept\.secret"},
    )
    collected = Collector()
    with EngineRunner(Engine(config, consumer=collected, serializer=JsonSerializer())):
        with pg_server.connect(pg_database) as conn:
            conn.execute("insert into skipped values (1)")
            conn.execute("insert into kept values (1, 'hunter2', 'visible')")
        wait_until(lambda: len(collected.snapshot()) == 1, 30, "the kept row")
    (event,) = collected.snapshot()
    assert event["value"]["after"] == {"id": 1, "v": "visible"}
    assert event["value"]["source"]["table"] == "kept"


def test_slot_drop_on_stop_removes_the_slot(pg_server, pg_database):
    config = engine_config(pg_server, pg_database, **{"slot.drop.on.stop": True})
    with EngineRunner(Engine(config, consumer=lambda r: None)):
        wait_until(lambda: slot_row(pg_server, pg_database, config["slot.name"]) == (True,), 30, "streaming")
    assert slot_row(pg_server, pg_database, config["slot.name"]) is None


def test_a_failing_consumer_stops_the_engine_and_releases_the_slot(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table t (id int primary key)")
        conn.execute("insert into t values (1)")

    def broken(record):
        raise ValueError("the target is gone")

    config = engine_config(pg_server, pg_database)
    with pytest.raises(EngineFailedError, match="the target is gone"):
        Engine(config, consumer=broken).run()
    assert slot_row(pg_server, pg_database, config["slot.name"]) == (False,)


def test_an_include_list_that_matches_no_table_is_an_error_naming_the_tables(pg_server, pg_database):
    from airflow_cdc.engine import ConfigError

    with pg_server.connect(pg_database) as conn:
        conn.execute("create table orders (id int primary key)")
        conn.execute("create table customers (id int primary key)")
    config = engine_config(
        pg_server, pg_database, **{"table.include.list": '"public"."orders"', "errors.max.retries": 0}
    )
    with pytest.raises(EngineFailedError) as failed:
        Engine(config, consumer=lambda r: None).run()
    error = failed.value.__cause__  # a failed start is raised as it is
    assert isinstance(error, ConfigError)
    (problem,) = error.problems
    assert problem.key == "table.include.list"
    assert "public.customers, public.orders" in problem.message
    assert 'public.orders, not "public"."orders"' in problem.fix
    assert slot_row(pg_server, pg_database, config["slot.name"]) is None  # refused before any slot


def test_an_include_list_entry_that_matches_nothing_beside_others_is_a_warning(pg_server, pg_database, caplog):
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table orders (id int primary key)")
    config = engine_config(pg_server, pg_database, **{"table.include.list": r"public\.orders,public\.ordres"})
    with EngineRunner(Engine(config, consumer=lambda r: None)):
        pass
    assert any("'public\\\\.ordres' matches no table" in r.getMessage() for r in caplog.records)


def test_a_database_that_does_not_exist_fails_at_once_naming_the_fix(pg_server: PostgresServer) -> None:
    """A refusal no retry can change is not retried (errors.max.retries is unlimited by default)."""
    config = engine_config(pg_server, "no_such_database")
    engine = Engine(config, consumer=lambda record: None, serializer=JsonSerializer())
    started = time.monotonic()
    with pytest.raises(EngineFailedError) as failure:
        engine.run()
    assert time.monotonic() - started < 30
    assert "database.dbname" in str(failure.value.__cause__) or "database.dbname" in str(failure.value)
