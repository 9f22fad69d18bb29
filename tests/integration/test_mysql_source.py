"""The MariaDB source through the engine: every operation as Debezium's envelopes, the initial
snapshot under concurrent writes converging on the source, a restart resuming exactly after the
committed offset, and DDL mid-stream."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.requirements import require_module

from .mysql_support import Collector, WriteLoad, create_load_table, engine_config, source_image
from .pg_support import apply, image_diff

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration


def run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@pytest.fixture
def db(mariadb_server: Any, mariadb_database: str) -> Any:
    conn = mariadb_server.connect(database=mariadb_database)
    yield conn
    conn.close()


def test_every_operation_becomes_debeziums_mariadb_envelope(mariadb_server, mariadb_database, db):
    run(db, "create table t (id int primary key, v varchar(20), n int)", "insert into t values (1, 'old', 1)")
    collected = Collector()
    engine = Engine(engine_config(mariadb_server, mariadb_database), consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        wait_until(lambda: len(collected.changes()) >= 1, 30, "the snapshot row")
        run(db, "insert into t values (2, 'a', 2)", "update t set v = 'b' where id = 2", "delete from t where id = 1")
        run(db, "update t set id = 3 where id = 2")
        wait_until(lambda: len(collected.snapshot()) >= 8, 30, "streamed changes")
    events = collected.snapshot()
    ops = [(e["value"]["op"] if e["value"] else None, e["key"]) for e in events]
    assert ops == [
        ("r", {"id": 1}),
        ("c", {"id": 2}),
        ("u", {"id": 2}),
        ("d", {"id": 1}),
        (None, {"id": 1}),  # the tombstone
        ("d", {"id": 2}),  # a key change: delete, tombstone, create
        (None, {"id": 2}),
        ("c", {"id": 3}),
    ]
    read, update = events[0]["value"], events[2]["value"]
    assert read["after"] == {"id": 1, "v": "old", "n": 1} and read["source"]["snapshot"] in ("first", "last", "true")
    assert update["before"] == {"id": 2, "v": "a", "n": 2} and update["after"] == {"id": 2, "v": "b", "n": 2}
    source = update["source"]
    assert (source["connector"], source["name"], source["db"], source["table"]) == (
        "mariadb",
        "shop",
        mariadb_database,
        "t",
    )
    assert source["snapshot"] == "false" and source["server_id"] == mariadb_server.server_id
    assert source["gtid"].startswith("0-1-") and source["file"].startswith("cdc-bin.") and source["pos"] > 0
    assert list(source)[-8:] == ["table", "server_id", "gtid", "file", "pos", "row", "thread", "query"]


def test_a_composite_keys_fields_follow_the_primary_keys_order_not_the_columns(mariadb_server, mariadb_database, db):
    """Debezium's key fields are the primary key's columns in the key's order: the key's bytes
    (its Kafka partition, its compaction) are the same as Debezium's."""
    run(
        db,
        "create table k (a int, b varchar(10), v int, primary key (b, a))",
        "insert into k values (1, 'x', 10)",
    )
    collected = Collector()
    engine = Engine(engine_config(mariadb_server, mariadb_database), consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        wait_until(lambda: len(collected.changes()) >= 1, 30, "the snapshot row")
        run(db, "alter table k add column w int", "insert into k values (2, 'y', 20, 1)")  # a key through the DDL
        run(db, "create table k2 (c int, d int, primary key (d, c))", "insert into k2 values (1, 2)")
        wait_until(lambda: len(collected.changes()) >= 3, 30, "streamed rows")
    keys = [list(e["key"]) for e in collected.changes()]
    assert keys == [["b", "a"], ["b", "a"], ["d", "c"]]


def test_the_snapshot_under_concurrent_writes_converges_on_the_source(mariadb_server, mariadb_database, db):
    create_load_table(db, 20_000)
    collected = Collector()
    engine = Engine(engine_config(mariadb_server, mariadb_database), consumer=collected, serializer=JsonSerializer())
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    with WriteLoad(connect, first_new_id=20_001) as load, EngineRunner(engine):
        wait_until(lambda: sum(1 for e in collected.changes() if e["value"]["op"] == "c") > 300, 60, "streaming")
        load.stop()
        assert load.transactions > 50
        expected = source_image(db)
        try:
            wait_until(lambda: apply(collected.snapshot()) == expected, 60, "target equals source")
        except TimeoutError:
            raise AssertionError(image_diff(expected, apply(collected.snapshot()))) from None


def test_a_restart_resumes_exactly_after_the_committed_offset_and_ddl_changes_later_rows(
    mariadb_server, mariadb_database, db, tmp_path
):
    run(db, "create table t (id int primary key, v varchar(20), n int)")
    offsets = tmp_path / "offsets.json"
    config = engine_config(
        mariadb_server, mariadb_database, **{"offset.storage": "file", "offset.storage.file.filename": str(offsets)}
    )
    first = Collector()
    with EngineRunner(Engine(config, consumer=first, serializer=JsonSerializer())):
        run(db, "insert into t values (1, 'a', 1)", "alter table t add column w int after v")
        run(db, "insert into t values (2, 'b', 2, 20)")
        wait_until(lambda: len(first.changes()) >= 2, 30, "first run's changes")
    run(db, "alter table t rename column v to label, drop column n", "insert into t values (3, 'c', 30)")
    run(db, "begin", "insert into t values (4, 'd', 40)", "update t set w = 0 where id = 1", "commit")
    second = Collector()
    with EngineRunner(Engine(config, consumer=second, serializer=JsonSerializer())):
        wait_until(lambda: len(second.changes()) >= 3, 30, "second run's changes")
    assert [e["value"]["after"] for e in first.changes()] == [
        {"id": 1, "v": "a", "n": 1},
        {"id": 2, "v": "b", "w": 2, "n": 20},
    ]
    assert (tmp_path / "offsets.json.schema-history.shop.jsonl").exists()
    assert [e["value"]["after"] for e in second.changes()] == [
        {"id": 3, "label": "c", "w": 30},
        {"id": 4, "label": "d", "w": 40},
        {"id": 1, "label": "a", "w": 0},
    ]


def f_ids(collected: Collector) -> list[int]:
    return [e["key"]["id"] for e in collected.changes() if e["value"]["source"]["table"] == "f"]


def test_a_poll_that_fails_midway_loses_no_row_when_it_is_retried(mariadb_server, mariadb_database, db, monkeypatch):
    """The binlog reader stands past every item it returned: an item that fails to convert is
    converted again by the retried poll, with those after it, not read past."""
    from airflow_cdc.engine.errors import RetriableError
    from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder

    run(db, "create table f (id int primary key, v int)")
    changes = ChangeBuilder.changes
    failed: list[int] = []

    def once_failing(self: ChangeBuilder, rows: Any, change: Any) -> Any:
        if change.table == "f" and change.after and change.after[0] == 57 and not failed:
            failed.append(57)
            raise RetriableError("converting row 57 failed once")
        return changes(self, rows, change)

    monkeypatch.setattr(ChangeBuilder, "changes", once_failing)
    collected = Collector()
    config = engine_config(
        mariadb_server, mariadb_database, **{"snapshot.mode": "no_data", "errors.retry.delay.initial.ms": 10}
    )
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        wait_until(lambda: engine.tasks and engine.tasks[0].task.position().phase.value == "streaming", 30, "streaming")
        run(db, "insert into f select seq, seq from seq_1_to_200")
        wait_until(lambda: len(f_ids(collected)) >= 200, 30, "every row")
    ids = f_ids(collected)
    assert failed == [57] and ids == list(range(1, 201))  # each once, in order


def test_a_password_outside_latin1_connects(mariadb_server, mariadb_database, db):
    """PyMySQL encodes a str password as latin-1: 'cdc-pw ☂' failed with a codec error at start
    (after `engine check` had said OK). The engine sends it as UTF-8, the bytes the server hashed
    when a utf8mb4 session set it."""
    user, password = f"u{mariadb_database[-8:]}", "cdc-pw ☂"
    with mariadb_server.connect(charset="utf8mb4") as admin:
        run(
            admin,
            f"create user '{user}'@'%' identified by '{password}'",
            f"grant select, reload, replication slave, binlog monitor on *.* to '{user}'@'%'",
        )
    try:
        run(db, "create table t (id int primary key, v varchar(20))", "insert into t values (1, 'before')")
        config = {
            **engine_config(mariadb_server, mariadb_database),
            "database.user": user,
            "database.password": password,
        }
        collected = Collector()
        with EngineRunner(Engine(config, consumer=collected, serializer=JsonSerializer())):
            wait_until(lambda: len(collected.changes()) >= 1, 30, "the snapshot row")
            run(db, "insert into t values (2, 'after')")
            wait_until(lambda: len(collected.changes()) >= 2, 30, "the streamed row")
        assert [e["value"]["after"] for e in collected.changes()] == [{"id": 1, "v": "before"}, {"id": 2, "v": "after"}]
    finally:
        with mariadb_server.connect() as admin:
            run(admin, f"drop user '{user}'@'%'")


def test_a_row_that_cannot_be_converted_stops_the_task_naming_it_or_is_left_out(
    mariadb_server, mariadb_database, db, monkeypatch
):
    """event.processing.failure.handling.mode: fail (the default) stops the task with the table,
    the column, the binlog position and the fix, never 'emitting its text'; warn leaves the event
    out and streams on. (A converter made to refuse one value stands for a value the engine
    cannot convert.)"""
    from airflow_cdc.engine.errors import EngineFailedError
    from airflow_cdc.engine.sources.mysql import changes

    real = changes.binlog_converter

    def refusing(column: Any, modes: Any) -> Any:
        convert = real(column, modes)
        if column.name != "v" or convert is None:
            return convert
        return lambda value: (_ for _ in ()).throw(ValueError("no such value")) if value == "boom" else convert(value)

    monkeypatch.setattr(changes, "binlog_converter", refusing)
    run(db, "create table t (id int primary key, v varchar(20))")
    rows = ("insert into t values (1, 'fine')", "insert into t values (2, 'boom')", "insert into t values (3, 'after')")
    for mode in ("warn", "fail"):
        run(db, "delete from t")
        collected = Collector()
        config = {**engine_config(mariadb_server, mariadb_database), "snapshot.mode": "no_data"}
        config["event.processing.failure.handling.mode"] = mode
        engine = Engine(config, consumer=collected, serializer=JsonSerializer())
        with EngineRunner(engine) as runner:
            wait_until(lambda e=engine: e.tasks and e.tasks[0].task.position().phase.value == "streaming", 30, "stream")
            run(db, *rows)
            if mode == "warn":
                wait_until(lambda c=collected: len(c.changes()) >= 2, 30, "the rows around the bad one")
                assert [e["value"]["after"]["id"] for e in collected.changes()] == [1, 3]
                continue
            runner.join(30)  # the engine stops by itself
        assert isinstance(runner.error, EngineFailedError)
        message = str(runner.error.__cause__)
        assert f"{mariadb_database}.t: column v: cannot convert 'boom'" in message, message
        assert "binlog cdc-bin" in message and "GTID" in message
        assert "event.processing.failure.handling.mode to warn" in message
        assert [e["value"]["after"]["id"] for e in collected.changes()] == [1]  # nothing from the bad row on
