"""DDL while MariaDB's snapshots read: values stay under their own column names.

The initial snapshot holds no lock on a table it has not read yet, so ``ALTER TABLE`` on it
returns at once. Rows are read by column name with the definitions at the snapshot's point: a
column added (``FIRST``) changes nothing read; a column dropped or renamed, which the snapshot's
consistent read cannot serve, has that table (and those after it) read in a new snapshot,
streaming still from the first snapshot's point with its definitions. A DDL while the snapshot
starts moves the point past it. An incremental snapshot's chunk read across a DDL is read again
with the new shape (as Debezium does). The DDL is run at the exact moment by wrapping the engine's
own read (the DDL and the read are the real server's).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sources.mysql import ddl
from airflow_cdc.engine.sources.mysql.incremental import MySqlChunkSource
from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet
from airflow_cdc.engine.sources.mysql.schema import read_tables, row_shape
from airflow_cdc.engine.sources.mysql.server import check_server
from airflow_cdc.engine.sources.mysql.snapshot import ConsistentSnapshot
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.compat import mariadb_cases as cases
from tests.requirements import require_module

from .mysql_support import Collector, engine_config

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration

OTHER = "create table other (id int primary key, code varchar(10), label varchar(10), score varchar(10))"
OTHER_ROWS = [(i, f"k{i}", f"label{i}", f"s{i}") for i in range(1, 51)]


def run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@pytest.fixture
def db(mariadb_server: Any, mariadb_database: str) -> Iterator[Any]:
    conn = mariadb_server.connect(database=mariadb_database)
    run(
        conn,
        "create table a_first (id int primary key, v varchar(20))",
        "insert into a_first select seq, concat('v', seq) from seq_1_to_300",
        OTHER,
        "insert into other values " + ", ".join(f"({i}, '{c}', '{label}', '{s}')" for i, c, label, s in OTHER_ROWS),
    )
    yield conn
    conn.close()


def ddl_before_reading(
    monkeypatch: pytest.MonkeyPatch, table: str, connect: Callable[[], Any], statement: str
) -> list[str]:
    """Runs ``statement`` (another session) when the initial snapshot is about to read
    ``table`` for the first time; the statements run, for the test to see."""
    rows, done = ConsistentSnapshot.rows, []

    def rows_after_ddl(
        self: ConsistentSnapshot, definition: Any, fetch: int, *select: Any
    ) -> Iterator[tuple[Any, ...]]:
        if definition.name == table and not done:
            with connect() as other:
                run(other, statement)
            done.append(statement)
        return rows(self, definition, fetch, *select)

    monkeypatch.setattr(ConsistentSnapshot, "rows", rows_after_ddl)
    return done


def after_images(collected: Collector, table: str, op: str) -> list[dict[str, Any]]:
    return [
        e["value"]["after"]
        for e in collected.changes()
        if e["value"]["source"]["table"] == table and e["value"]["op"] == op
    ]


def target_of(collected: Collector, table: str) -> dict[Any, dict[str, Any]]:
    image: dict[Any, dict[str, Any]] = {}
    for event in collected.snapshot():
        value = event["value"]
        if value is None or value["source"]["table"] != table:
            continue
        key = json.dumps(event["key"], sort_keys=True)
        if value["op"] == "d":
            image.pop(key, None)
        else:
            image[key] = value["after"]
    return image


def source_of(conn: Any, table: str) -> dict[Any, dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"select * from {table}")
        return {json.dumps({"id": row["id"]}): dict(row) for row in cur.fetchall()}


def assert_target_is_source(collected: Collector, conn: Any, table: str) -> None:
    """Row by row, on the source's columns (a column added without a value in the events is
    NULL in both: nothing is emitted for rows a DDL fills)."""
    source = source_of(conn, table)
    target = {
        key: {c: row.get(c) for c in source[key]} for key, row in target_of(collected, table).items() if key in source
    }
    assert set(target_of(collected, table)) == set(source)
    assert target == source


def test_ddl_statements_and_information_schema_give_tables_the_same_row_shape(
    mariadb_server: Any, mariadb_database: str
) -> None:
    """The history's definitions from DDL and the server's must agree on a row's shape, or an
    incremental snapshot would read its chunks again and again."""
    late_table = next(t for s in cases.EVENT_STREAM for t in s if t.startswith("create table late_table"))
    statements = [s for s in (*cases.SCHEMA, *cases.EVENT_SCHEMA, late_table) if s.lower().startswith("create table")]
    statements = list(dict.fromkeys(statements))  # oracle_marker is in both
    tables: dict[tuple[str, str], Any] = {}
    with mariadb_server.connect(database=mariadb_database) as conn:
        for statement in statements:
            run(conn, statement)
            changes = ddl.apply(statement, mariadb_database, tables)
            assert isinstance(changes, ddl.Changes), statement
            tables.update(changes.tables)
        served = read_tables(conn, list(tables))
    assert len(served) == len(statements)
    for key, table in tables.items():
        assert row_shape(table) == row_shape(served[key]), key


def test_a_column_added_first_during_the_initial_snapshot_leaves_every_value_under_its_name(
    mariadb_server: Any, mariadb_database: str, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect = lambda: mariadb_server.connect(database=mariadb_database)  # noqa: E731
    done = ddl_before_reading(
        monkeypatch, "other", connect, "alter table other add column rev int not null default 7 first"
    )
    collected = Collector()
    with EngineRunner(
        Engine(engine_config(mariadb_server, mariadb_database), consumer=collected, serializer=JsonSerializer())
    ):
        wait_until(lambda: len(after_images(collected, "other", "r")) >= len(OTHER_ROWS), 60, "other's snapshot")
        run(db, "insert into other (rev, id, code, label, score) values (8, 100, 'k100', 'label100', 's100')")
        wait_until(lambda: after_images(collected, "other", "c"), 60, "the insert after the DDL")
    assert done
    snapshot = after_images(collected, "other", "r")
    # Read with the definitions at the snapshot's point: the columns it had, each value its own.
    assert snapshot == [{"id": i, "code": c, "label": label, "score": s} for i, c, label, s in OTHER_ROWS]
    assert after_images(collected, "other", "c") == [
        {"rev": 8, "id": 100, "code": "k100", "label": "label100", "score": "s100"}
    ]
    assert len(after_images(collected, "a_first", "r")) == 300


def test_a_column_dropped_during_the_initial_snapshot_has_the_table_read_anew(
    mariadb_server: Any, mariadb_database: str, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect = lambda: mariadb_server.connect(database=mariadb_database)  # noqa: E731
    done = ddl_before_reading(monkeypatch, "other", connect, "alter table other drop column score")
    collected = Collector()
    with EngineRunner(
        Engine(engine_config(mariadb_server, mariadb_database), consumer=collected, serializer=JsonSerializer())
    ):
        wait_until(lambda: len(after_images(collected, "other", "r")) >= len(OTHER_ROWS), 60, "other's snapshot")
        run(db, "update other set label = 'changed' where id = 2", "insert into other values (100, 'k100', 'l100')")
        wait_until(lambda: after_images(collected, "other", "c"), 60, "the insert after the DDL")
    assert done
    # The snapshot could not read other (score is gone from its read view): a new one, at a point
    # after the DDL, read it without score; a_first, read before, is not read again.
    assert after_images(collected, "other", "r") == [
        {"id": i, "code": c, "label": label} for i, c, label, _ in OTHER_ROWS
    ]
    assert [row["id"] for row in after_images(collected, "a_first", "r")] == list(range(1, 301))
    # Streaming went on from the first attempt's point, its history taking the DROP in.
    assert after_images(collected, "other", "u")[0] == {"id": 2, "code": "k2", "label": "changed"}
    assert_target_is_source(collected, db, "other")


def test_a_ddl_while_the_snapshot_starts_moves_its_point_past_it(
    mariadb_server: Any, mariadb_database: str, db: Any
) -> None:
    calls = []

    def definitions(conn: Any) -> dict[tuple[str, str], Any]:
        calls.append(1)
        if len(calls) == 2:  # after the first attempt's transaction started
            with mariadb_server.connect(database=mariadb_database) as other:
                run(other, "alter table other add column late int")
        return read_tables(conn, [(mariadb_database, "other")])

    with mariadb_server.connect() as conn:
        server = check_server(conn)
        run(conn, "select 1")
        with conn.cursor() as cur:
            cur.execute("select @@gtid_binlog_pos")
            before_ddl = MariaDbGtidSet.parse(str(cur.fetchone()[0]))
    snap = ConsistentSnapshot(mariadb_server.connection_params(), server, definitions)
    try:
        assert len(calls) == 4  # started again once
        assert [c.name for c in snap.tables[(mariadb_database, "other")].columns][-1] == "late"
        assert snap.position.gtids is not None and snap.position.gtids != before_ddl  # past the ALTER
    finally:
        snap.close()


def test_an_incremental_chunk_read_across_a_ddl_is_read_again_with_the_new_shape(
    mariadb_server: Any, mariadb_database: str, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(db, "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data text)")
    watermark, done = MySqlChunkSource._watermark, []

    def ddl_before_closing(self: MySqlChunkSource, conn: Any, window_id: str, kind: str, data: str) -> None:
        if kind == "close" and "other" in data and not done:  # the chunk is read: its window still open
            with mariadb_server.connect(database=mariadb_database) as other:
                run(other, "alter table other add column rev int not null default 7 first")
            done.append(window_id)
        watermark(self, conn, window_id, kind, data)

    monkeypatch.setattr(MySqlChunkSource, "_watermark", ddl_before_closing)
    config = engine_config(
        mariadb_server,
        mariadb_database,
        **{"snapshot.mode": "no_data", "signal.data.collection": f"{mariadb_database}.debezium_signal"},
    )
    collected = Collector()
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        wait_until(lambda: engine.tasks and engine.tasks[0].task.position().phase.value == "streaming", 30, "streaming")
        run(
            db,
            "insert into debezium_signal values ('ddl-chunk', 'execute-snapshot', "
            f"'{json.dumps({'data-collections': [f'{mariadb_database}.other']})}')",
        )
        wait_until(
            lambda: len(after_images(collected, "other", "r")) >= len(OTHER_ROWS), 60, "the incremental snapshot"
        )
    assert done
    # The chunk read before the DDL was dropped at its close and read again: every row once,
    # with the shape the stream gives the table after the DDL.
    assert after_images(collected, "other", "r") == [
        {"rev": 7, "id": i, "code": c, "label": label, "score": s} for i, c, label, s in OTHER_ROWS
    ]
