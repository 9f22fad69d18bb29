"""provide.transaction.metadata on a real PostgreSQL: BEGIN/END events on <prefix>.transaction,
each change event's transaction block, and a restart inside a transaction continuing its
numbering (Debezium's TransactionMetadataIT, the same checks). The oracle
(tests/compat/test_postgres_oracle.py) compares the same against Debezium itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sinks import build_sink
from airflow_cdc.engine.storage import MemoryOffsetStore
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .pg_support import apply, engine_config
from .test_changelog_sink import read_changelog
from .transaction_support import Events

TX_TOPIC = "shop.transaction"


def _image(conn: Any, table: str) -> dict[str, dict[str, Any]]:
    cursor = conn.execute(f"select * from {table}")
    names = [c.name for c in cursor.description or []]
    return {json.dumps({"id": row[0]}, sort_keys=True): dict(zip(names, row, strict=True)) for row in cursor}


def _table_events(events: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    return [e for e in events if e["topic"] == f"shop.public.{table}"]


def test_transactions_get_debeziums_begin_end_events_and_blocks(pg_server: Any, pg_database: str) -> None:
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table orders (id int primary key, v text)")
        conn.execute("create table lines (id int primary key, order_id int, qty int)")
        conn.execute("create table audit (id int primary key)")  # published, but not captured
        conn.execute("insert into orders values (0, 'before')")  # a snapshot read: no block
    config = engine_config(
        pg_server,
        pg_database,
        **{"provide.transaction.metadata": True, "table.exclude.list": r"public\.audit"},
    )
    events = Events()
    with EngineRunner(Engine(config, consumer=events, serializer=JsonSerializer())):
        wait_until(lambda: len(events.snapshot()) == 1, 30, "the snapshot read")
        with pg_server.connect(pg_database) as conn:
            with conn.transaction():  # one transaction over two tables
                conn.execute("insert into orders values (1, 'a')")
                conn.execute("insert into lines values (1, 1, 2), (2, 1, 3)")
                conn.execute("update orders set v = 'b' where id = 1")
                conn.execute("delete from lines where id = 2")
            conn.execute("begin")
            conn.execute("insert into orders values (2, 'rolled back')")
            conn.execute("rollback")
            conn.execute("begin")  # empty: writes nothing, so pgoutput sends nothing
            conn.execute("commit")
            conn.execute("insert into audit values (1)")  # only an excluded table's change
            conn.execute("insert into lines values (3, 0, 1)")  # an autocommit transaction
        wait_until(
            lambda: sum(1 for e in events.snapshot() if e["topic"] == TX_TOPIC) == 6, 30, "three BEGIN/END pairs"
        )
        with pg_server.connect(pg_database) as conn:
            expected = {"orders": _image(conn, "orders"), "lines": _image(conn, "lines")}
    got = events.snapshot()
    assert got[0]["value"]["op"] == "r" and got[0]["value"]["transaction"] is None
    streamed = got[1:]
    assert {t: apply(_table_events(got, t)) for t in ("orders", "lines")} == expected

    # The multi-table transaction: BEGIN, its 5 change events (+1 tombstone), END.
    begin, *changes, end = streamed[:8]
    xid = changes[0]["value"]["source"]["txId"]
    assert begin == {
        "topic": TX_TOPIC,
        "key": {"id": begin["value"]["id"]},
        "value": {"status": "BEGIN", "id": begin["value"]["id"], "event_count": None, "data_collections": None,
                  "ts_ms": changes[0]["value"]["source"]["ts_ms"]},
    }  # fmt: skip
    assert begin["value"]["id"].startswith(f"{xid}:")
    blocks = [(e["topic"][len("shop.public.") :], e["value"]["transaction"]) for e in changes if e["value"]]
    assert [(t, b["total_order"], b["data_collection_order"]) for t, b in blocks] == [
        ("orders", 1, 1),
        ("lines", 2, 1),
        ("lines", 3, 2),
        ("orders", 4, 2),
        ("lines", 5, 3),
    ]
    for event in changes:
        if event["value"]:  # the id is <xid>:<the event's own LSN>
            source = event["value"]["source"]
            assert event["value"]["transaction"]["id"] == f"{xid}:{source['lsn']}"
    assert changes[-1]["value"] is None  # the delete's tombstone, no block of its own
    assert end["topic"] == TX_TOPIC and end["key"] == {"id": end["value"]["id"]}
    assert end["value"]["id"].startswith(f"{xid}:") and end["value"]["id"] != begin["value"]["id"]
    assert end["value"]["status"] == "END" and end["value"]["event_count"] == 5
    # The Java HashMap order of Debezium's counts (a JVM iterates these two keys so).
    assert end["value"]["data_collections"] == [
        {"data_collection": "public.orders", "event_count": 2},
        {"data_collection": "public.lines", "event_count": 3},
    ]
    assert list(end["value"]) == ["status", "id", "event_count", "data_collections", "ts_ms"]
    # The rolled-back and the empty transaction: nothing. The excluded table's: BEGIN and END
    # with no event, as Debezium sends them (it begins at pgoutput's Begin).
    excluded_begin, excluded_end, last_begin, last_change, last_end = streamed[8:]
    assert excluded_begin["value"]["status"] == "BEGIN" and excluded_end["value"]["event_count"] == 0
    assert excluded_end["value"]["data_collections"] == []
    assert last_begin["value"]["status"] == "BEGIN" and last_end["value"]["event_count"] == 1
    assert last_change["value"]["transaction"]["total_order"] == 1


def test_a_restart_inside_a_transaction_continues_its_numbering(pg_server: Any, pg_database: str) -> None:
    rows = 300
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table a (id int primary key)")
        conn.execute("create table b (id int primary key)")
    store = MemoryOffsetStore(f"pg-{pg_database}")
    config = engine_config(
        pg_server,
        pg_database,
        **{
            "provide.transaction.metadata": True,
            "snapshot.mode": "no_data",
            "offset.commit.policy": "always",
            "max.batch.size": 20,
            "errors.max.retries": 0,
        },
    )
    first = Events(fail_after=250)  # BEGIN and about 250 of its 600 changes, then a crash
    runner = EngineRunner(Engine(config, consumer=first, serializer=JsonSerializer(), offset_store=store))
    with runner:
        with pg_server.connect(pg_database) as conn, conn.transaction():
            for i in range(rows):
                conn.execute("insert into a values (%s)", (i,))
                conn.execute("insert into b values (%s)", (i,))
        wait_until(lambda: runner.error is not None, 60, "the consumer's crash")
    stored = store.read({"server": "shop"})
    xid = first.snapshot()[1]["value"]["source"]["txId"]
    # Debezium's offsets inside a transaction: its id and counts (TransactionContext.store).
    assert stored is not None and stored["transaction_id"] == str(xid), stored
    assert stored["transaction_data_collection_order_public.a"] > 0
    second = Events()
    with EngineRunner(Engine(config, consumer=second, serializer=JsonSerializer(), offset_store=store)):
        wait_until(lambda: any(e["topic"] == TX_TOPIC for e in second.snapshot()), 60, "the END")
    events = first.snapshot() + second.snapshot()
    begins = [e for e in events if e["topic"] == TX_TOPIC and e["value"]["status"] == "BEGIN"]
    ends = [e for e in events if e["topic"] == TX_TOPIC and e["value"]["status"] == "END"]
    assert len(begins) == 1 and len(ends) == 1  # no second BEGIN after the restart
    # Every change once or repeated identically (at-least-once), numbered on across the restart.
    numbered = {}
    for event in events:
        if event["topic"] != TX_TOPIC:
            block = event["value"]["transaction"]
            assert numbered.setdefault(block["total_order"], (event["topic"], event["key"], block)) == (
                event["topic"],
                event["key"],
                block,
            )
    assert sorted(numbered) == list(range(1, 2 * rows + 1))
    for table in ("a", "b"):
        orders = sorted(b["data_collection_order"] for t, k, b in numbered.values() if t == f"shop.public.{table}")
        assert orders == list(range(1, rows + 1))
        assert sorted(k["id"] for t, k, b in numbered.values() if t == f"shop.public.{table}") == list(range(rows))
    assert ends[0]["value"]["event_count"] == 2 * rows
    assert {c["data_collection"]: c["event_count"] for c in ends[0]["value"]["data_collections"]} == {
        "public.a": rows,
        "public.b": rows,
    }


def test_the_changelog_sink_carries_the_transaction_topic(pg_server: Any, pg_database: str, tmp_path: Path) -> None:
    """A consumer of the changelog can tell complete transactions: every END's counts match
    the change events of its xid in the tables' directories."""
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table a (id int primary key)")
        conn.execute("create table b (id int primary key)")
    config = engine_config(pg_server, pg_database, **{"provide.transaction.metadata": True, "snapshot.mode": "no_data"})
    root = tmp_path / "changelog"
    with build_sink({"sink.type": "changelog", "sink.changelog.dir": str(root)}) as sink:
        engine = Engine(config, batch_handler=sink, serializer=JsonSerializer())
        with EngineRunner(engine):
            with pg_server.connect(pg_database) as conn:
                for n in range(1, 11):
                    with conn.transaction():
                        for i in range(n):
                            conn.execute("insert into a values (%s)", (n * 100 + i,))
                        conn.execute("insert into b values (%s)", (n,))
            wait_until(lambda: len(read_changelog(root).get(TX_TOPIC, [])) == 20, 30, "10 BEGIN/END pairs")
    topics = read_changelog(root)
    assert set(topics) == {TX_TOPIC, "shop.public.a", "shop.public.b"}
    counted: dict[str, dict[str, int]] = {}
    for table in ("a", "b"):
        for line in topics[f"shop.public.{table}"]:
            xid = line["value"]["transaction"]["id"].split(":")[0]
            counted.setdefault(xid, {}).setdefault(f"public.{table}", 0)
            counted[xid][f"public.{table}"] += 1
    ends = [line["value"] for line in topics[TX_TOPIC] if line["value"]["status"] == "END"]
    assert len(ends) == 10
    for end in ends:
        expected = {c["data_collection"]: c["event_count"] for c in end["data_collections"]}
        assert counted[end["id"].split(":")[0]] == expected
        assert end["event_count"] == sum(expected.values())
