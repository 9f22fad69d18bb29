"""DDL on a table PostgreSQL's initial snapshot has not read yet, after the slot's point.

A rewriting ALTER (``ALTER COLUMN ... TYPE``) and ``TRUNCATE`` are not MVCC-safe: the exported
snapshot would read the table empty (measured: 0 of 50 rows), silently. A dropped column failed
the read. Each is now found before the table is read (its catalog entry as the snapshot sees it
against the committed one, the table locked for the read), and the table is read in a fresh
transaction with its definition now; streaming from the slot's point converges on those rows.
The DDL runs at the exact moment by wrapping the snapshot's own check (the DDL, the lock and the
reads are the real server's); the target built from the events equals the source row by row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sources.postgres.snapshot import SnapshotReader
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .mysql_support import Collector
from .pg_support import engine_config

pytestmark = pytest.mark.integration


@pytest.fixture
def db(pg_server: Any, pg_database: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table a_first (id int primary key, v text)")
        conn.execute("insert into a_first select g, 'v' || g from generate_series(1, 300) g")
        conn.execute("create table other (id int primary key, code text, score int)")
        conn.execute("insert into other select g, 'k' || g, g * 10 from generate_series(1, 50) g")
        yield conn


def after_images(collected: Collector, table: str, op: str) -> list[dict[str, Any]]:
    changes = collected.changes()
    return [e["value"]["after"] for e in changes if e["value"]["source"]["table"] == table and e["value"]["op"] == op]


def target_of(collected: Collector, table: str) -> dict[str, dict[str, Any]]:
    image: dict[str, dict[str, Any]] = {}
    for event in collected.snapshot():
        value = event["value"]
        if value is None or value["source"]["table"] != table:
            continue
        if value["op"] == "t":
            image.clear()
        elif value["op"] == "d":
            image.pop(json.dumps(event["key"], sort_keys=True), None)
        else:
            image[json.dumps(event["key"], sort_keys=True)] = value["after"]
    return image


def source_of(conn: psycopg.Connection[Any], table: str) -> dict[str, dict[str, Any]]:
    cursor = conn.execute(f"select * from {table}")
    names = [c.name for c in cursor.description or []]
    return {json.dumps({"id": row[0]}): dict(zip(names, row, strict=True)) for row in cursor}


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("alter table other alter column score type bigint", lambda i: {"id": i, "code": f"k{i}", "score": i * 10}),
        ("alter table other drop column score", lambda i: {"id": i, "code": f"k{i}"}),
        (
            "alter table other add column rev int default 7",
            lambda i: {"id": i, "code": f"k{i}", "score": i * 10, "rev": 7},
        ),
    ],
    ids=["rewrite", "drop-column", "add-column"],
)
def test_a_table_altered_before_the_snapshot_reads_it_loses_no_row(
    pg_server: Any,
    pg_database: str,
    db: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
    ddl: str,
    expected: Any,
) -> None:
    guard, done = SnapshotReader._guard, []

    def ddl_first(self: SnapshotReader, planned: Any, replan: Any) -> Any:
        if planned[0].name == "other" and not done:
            db.execute(ddl)  # after the slot's point, before the table is locked and read
            done.append(ddl)
        return guard(self, planned, replan)

    monkeypatch.setattr(SnapshotReader, "_guard", ddl_first)
    collected = Collector()
    with EngineRunner(Engine(engine_config(pg_server, pg_database), consumer=collected, serializer=JsonSerializer())):
        wait_until(lambda: len(after_images(collected, "other", "r")) >= 50, 60, "other's snapshot")
        db.execute("update other set code = 'changed' where id = 2")
        db.execute("insert into other (id, code) values (100, 'k100')")
        wait_until(lambda: after_images(collected, "other", "c"), 60, "the insert after the snapshot")
    assert done
    assert after_images(collected, "other", "r") == [expected(i) for i in range(1, 51)]
    assert len(after_images(collected, "a_first", "r")) == 300
    source = source_of(db, "other")
    target = target_of(collected, "other")
    assert set(target) == set(source)
    assert {key: {c: row.get(c) for c in source[key]} for key, row in target.items()} == source


def test_a_table_truncated_and_refilled_before_the_snapshot_reads_it_ends_as_the_source(
    pg_server: Any, pg_database: str, db: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRUNCATE is not MVCC-safe either: the old snapshot sees neither the old rows nor the new."""
    guard, done = SnapshotReader._guard, []

    def truncate_first(self: SnapshotReader, planned: Any, replan: Any) -> Any:
        if planned[0].name == "other" and not done:
            db.execute("truncate other")
            db.execute("insert into other select g, 'n' || g, g from generate_series(41, 60) g")
            done.append(1)
        return guard(self, planned, replan)

    monkeypatch.setattr(SnapshotReader, "_guard", truncate_first)
    collected = Collector()
    with EngineRunner(Engine(engine_config(pg_server, pg_database), consumer=collected, serializer=JsonSerializer())):
        wait_until(lambda: len(after_images(collected, "other", "r")) >= 20, 60, "other's snapshot")
        db.execute("insert into other values (100, 'k100', 1)")
        wait_until(lambda: any(r["id"] == 100 for r in after_images(collected, "other", "c")), 60, "streaming")
    assert done
    assert sorted(r["id"] for r in after_images(collected, "other", "r")) == list(range(41, 61))
    source = source_of(db, "other")
    assert target_of(collected, "other") == source
