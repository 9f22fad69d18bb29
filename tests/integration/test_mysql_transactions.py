"""provide.transaction.metadata on a real MariaDB: BEGIN/END events on <prefix>.transaction with
the GTID as the id, each change event's transaction block, and a restart inside a transaction
continuing its numbering. The oracle (tests/compat/test_mariadb_oracle.py) compares the same
against Debezium's MariaDB connector."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.storage import MemoryOffsetStore
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.requirements import require_module

from .mysql_support import engine_config, source_image
from .pg_support import apply
from .transaction_support import Events

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration

TX_TOPIC = "shop.transaction"


def run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@pytest.fixture
def db(mariadb_server: Any, mariadb_database: str) -> Any:
    conn = mariadb_server.connect(database=mariadb_database)
    yield conn
    conn.close()


def _without_note(image: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {key: {c: v for c, v in row.items() if c != "note"} for key, row in image.items()}


def _tx(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["topic"] == TX_TOPIC]


def test_transactions_get_debeziums_begin_end_events_and_blocks(mariadb_server, mariadb_database, db):
    database = mariadb_database
    run(
        db,
        "create table orders (id int primary key, v varchar(20))",
        "create table order_lines (id int primary key, order_id int, qty int)",
        "create table audit (id int primary key)",
        "insert into orders values (0, 'before')",
    )
    config = engine_config(
        mariadb_server,
        database,
        **{"provide.transaction.metadata": "true", "table.exclude.list": rf"{database}\.audit"},
    )
    events = Events()
    with EngineRunner(Engine(config, consumer=events, serializer=JsonSerializer())):
        wait_until(lambda: any(e["topic"] == f"shop.{database}.orders" for e in events.snapshot()), 60, "snapshot")
        run(db, "begin", "insert into orders values (1, 'a')", "insert into order_lines values (1, 1, 2), (2, 1, 3)")
        run(db, "update orders set v = 'b' where id = 1", "delete from order_lines where id = 2", "commit")
        run(db, "begin", "insert into orders values (2, 'rolled back')", "rollback")
        run(db, "begin", "commit")  # empty: nothing reaches the binlog
        run(db, "insert into audit values (1)")  # only an excluded table's row
        run(db, "alter table order_lines add column note varchar(10)")  # DDL: a GTID, no XID
        run(db, "insert into order_lines values (3, 0, 1, 'x')")
        wait_until(lambda: len(_tx(events.snapshot())) == 7, 60, "3 BEGIN/END pairs and a DDL's BEGIN")
        with mariadb_server.connect(database=database) as conn:
            expected = {t: source_image(conn, t) for t in ("orders", "order_lines")}
    got = [e for e in events.snapshot() if e["topic"] != "shop"]  # not the schema change topic
    snapshot = [e for e in got if e["value"] and e["value"].get("op") == "r"]
    assert snapshot and all(e["value"]["transaction"] is None for e in snapshot)
    for table in ("orders", "order_lines"):
        # The column the DDL added is in the rows changed after it only: compare the others.
        replayed = apply([e for e in got if e["topic"] == f"shop.{database}.{table}"])
        assert _without_note(replayed) == _without_note(expected[table])
    streamed = [e for e in got if not (e["value"] and e["value"].get("op") == "r")]

    begin, *changes, end = streamed[:8]
    gtid = changes[0]["value"]["source"]["gtid"]
    assert begin["value"] == {
        "status": "BEGIN",
        "id": gtid,
        "event_count": None,
        "data_collections": None,
        "ts_ms": begin["value"]["ts_ms"],
    }
    # Debezium's time of a BEGIN is the binlog event's before it (the oracle checks the value).
    assert begin["value"]["ts_ms"] <= changes[0]["value"]["source"]["ts_ms"]
    assert begin["key"] == {"id": gtid} and list(begin["value"]) == list(end["value"])
    blocks = [(e["topic"].rsplit(".", 1)[1], e["value"]["transaction"]) for e in changes if e["value"]]
    assert blocks == [
        ("orders", {"id": gtid, "total_order": 1, "data_collection_order": 1}),
        ("order_lines", {"id": gtid, "total_order": 2, "data_collection_order": 1}),
        ("order_lines", {"id": gtid, "total_order": 3, "data_collection_order": 2}),
        ("orders", {"id": gtid, "total_order": 4, "data_collection_order": 2}),
        ("order_lines", {"id": gtid, "total_order": 5, "data_collection_order": 3}),
    ]
    assert changes[-1]["value"] is None  # the tombstone
    assert end["key"] == {"id": gtid} and end["value"]["status"] == "END" and end["value"]["event_count"] == 5
    counts = {c["data_collection"]: c["event_count"] for c in end["value"]["data_collections"]}
    assert counts == {f"{database}.orders": 2, f"{database}.order_lines": 3}
    # The excluded table's transaction: BEGIN and an empty END. The DDL: a BEGIN, no END (as
    # Debezium's MariaDB source). Then the last insert's own transaction.
    rest = [(e["value"]["status"], e["value"]["event_count"]) if e["topic"] == TX_TOPIC else "c" for e in streamed[8:]]
    assert rest == [("BEGIN", None), ("END", 0), ("BEGIN", None), ("BEGIN", None), "c", ("END", 1)]
    assert streamed[-2]["value"]["transaction"]["total_order"] == 1


def test_a_restart_inside_a_transaction_continues_its_numbering(mariadb_server, mariadb_database, db):
    rows = 300
    run(db, "create table a (id int primary key)", "create table b (id int primary key)")
    store = MemoryOffsetStore(f"my-{mariadb_database}")
    config = engine_config(
        mariadb_server,
        mariadb_database,
        **{
            "provide.transaction.metadata": "true",
            "snapshot.mode": "no_data",
            "offset.commit.policy": "always",
            "max.batch.size": 20,
            "errors.max.retries": 0,
        },
    )
    first = Events(fail_after=250)  # BEGIN and about 250 of its 600 changes, then a crash
    runner = EngineRunner(Engine(config, consumer=first, serializer=JsonSerializer(), offset_store=store))
    with runner:
        # One row per statement: many row events, so the crash falls between two of them.
        run(db, "begin", *(f"insert into {t} values ({i})" for i in range(rows) for t in ("a", "b")), "commit")
        wait_until(lambda: runner.error is not None, 60, "the consumer's crash")
    stored = store.read({"server": "shop"})
    gtid = next(e for e in first.snapshot() if e["topic"] == TX_TOPIC)["value"]["id"]
    assert stored is not None and stored["transaction_id"] == gtid, stored
    assert stored[f"transaction_data_collection_order_{mariadb_database}.a"] > 0
    second = Events()
    with EngineRunner(Engine(config, consumer=second, serializer=JsonSerializer(), offset_store=store)):
        wait_until(lambda: any(e["topic"] == TX_TOPIC for e in second.snapshot()), 60, "the END")
    events = [e for e in first.snapshot() + second.snapshot() if e["topic"] != "shop"]
    statuses = [e["value"]["status"] for e in _tx(events)]
    assert statuses == ["BEGIN", "END"]  # no second BEGIN after the restart
    numbered: dict[int, tuple[Any, ...]] = {}
    for event in events:
        if event["topic"] != TX_TOPIC:
            block = event["value"]["transaction"]
            seen = numbered.setdefault(block["total_order"], (event["topic"], event["key"]["id"], block))
            assert seen == (event["topic"], event["key"]["id"], block)  # a repeat is the same event
    assert sorted(numbered) == list(range(1, 2 * rows + 1))
    for table in ("a", "b"):
        mine = [(k, b["data_collection_order"]) for t, k, b in numbered.values() if t.endswith(f".{table}")]
        assert sorted(mine) == [(i, i + 1) for i in range(rows)]
    end = _tx(events)[-1]["value"]
    assert end["event_count"] == 2 * rows
    assert {c["data_collection"]: c["event_count"] for c in end["data_collections"]} == {
        f"{mariadb_database}.a": rows,
        f"{mariadb_database}.b": rows,
    }
