"""Incremental snapshots (DBLog watermarks in the signal table) and signals on a real MariaDB,
through the same coordinator as PostgreSQL's. The target is built only from what the engine
emits (``snapshot.mode=no_data``: the binlog is read from where it stands at the test's start,
and rows that existed before reach the target only through the incremental snapshot)."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.requirements import require_module

from .mysql_support import Collector, WriteLoad, create_load_table, engine_config, source_image
from .pg_support import SIGNAL_TABLE, apply, image_diff

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration

SIGNAL_DDL = f"create table {SIGNAL_TABLE} (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"


@pytest.fixture
def db(mariadb_server: Any, mariadb_database: str) -> Any:
    conn = mariadb_server.connect(database=mariadb_database)
    with conn.cursor() as cur:
        cur.execute(SIGNAL_DDL)
    yield conn
    conn.close()


def config(server: Any, database: str, **extra: Any) -> dict[str, Any]:
    return engine_config(
        server,
        database,
        **{"snapshot.mode": "no_data", "signal.data.collection": f"{database}.{SIGNAL_TABLE}", **extra},
    )


def send(conn: Any, kind: str, data: Any) -> str:
    signal_id = uuid.uuid4().hex
    with conn.cursor() as cur:
        cur.execute(f"insert into {SIGNAL_TABLE} values (%s, %s, %s)", (signal_id, kind, json.dumps(data)))
    return signal_id


def notifications(engine: Engine, signal_id: str) -> list[dict[str, Any]]:
    items, _ = engine.notifications.since(0)
    return [n for n in items if n["id"] == signal_id]


def kinds(engine: Engine, signal_id: str) -> list[str]:
    return [n["type"] for n in notifications(engine, signal_id)]


def table_events(collected: Collector, table: str = "t") -> list[dict[str, Any]]:
    return [e for e in collected.snapshot() if e["value"] is None or e["value"]["source"]["table"] == table]


@pytest.mark.slow
def test_a_snapshot_of_20k_rows_under_a_write_load_converges_on_the_source(mariadb_server, mariadb_database, db):
    create_load_table(db, 20_000)
    collected = Collector()
    engine = Engine(config(mariadb_server, mariadb_database), consumer=collected, serializer=JsonSerializer())
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    with EngineRunner(engine), WriteLoad(connect, first_new_id=20_001) as load:
        wait_until(lambda: len(collected.changes()) > 100, 30, "streaming before the signal")
        started = time.monotonic()
        signal_id = send(db, "execute-snapshot", {"data-collections": [f"{mariadb_database}.t"], "type": "incremental"})
        wait_until(lambda: "COMPLETED" in kinds(engine, signal_id), 300, "the snapshot completed")
        seconds = time.monotonic() - started
        load.stop()
        assert load.transactions > 100
        expected = source_image(db)
        try:
            wait_until(lambda: apply(collected.snapshot()) == expected, 60, "target equals source")
        except TimeoutError:
            raise AssertionError(image_diff(expected, apply(collected.snapshot()))) from None

    reads = [e for e in table_events(collected) if e["value"] and e["value"]["op"] == "r"]
    print(f"incremental snapshot: {len(reads)} rows read in {seconds:.1f}s under {load.transactions} transactions")
    assert reads and all(e["value"]["source"]["snapshot"] == "incremental" for e in reads)
    assert [k for k, n in Counter(e["key"]["id"] for e in reads).items() if n > 1] == []  # no chunk overlaps
    seen = kinds(engine, signal_id)
    assert seen[0] == "STARTED" and seen[-1] == "COMPLETED" and "IN_PROGRESS" in seen, seen
    scanned = [n for n in notifications(engine, signal_id) if n["type"] == "TABLE_SCAN_COMPLETED"]
    assert [(n["additional_data"]["data_collection"], n["additional_data"]["status"]) for n in scanned] == [
        (f"{mariadb_database}.t", "SUCCEEDED")
    ]
    # Rows read, those the stream's changes made stale included (dropped, not emitted).
    assert int(scanned[0]["additional_data"]["total_rows_scanned"]) >= len(reads) >= 20_000 // 2
    # A row left out of its chunk was left out for a change the stream carried (DBLog): how many
    # depends on the load and the machine's speed, which rows does not.
    changed = {e["key"]["id"] for e in table_events(collected) if e["value"] and e["value"]["op"] in ("c", "u", "d")}
    missing = set(range(1, 20_001)) - {e["key"]["id"] for e in reads}
    assert missing <= changed, sorted(missing - changed)[:10]
    # The watermarks are rows of the signal table, emitted as change events with Debezium's ids.
    marks = [e["value"]["after"] for e in collected.changes() if e["value"]["source"]["table"] == SIGNAL_TABLE]
    windows = [m for m in marks if m["type"] in ("snapshot-window-open", "snapshot-window-close")]
    assert len(windows) >= 2 * (20_000 // 1024) and all(m["id"].endswith(("-open", "-close")) for m in windows)
    assert json.loads(windows[0]["data"])["correlationId"] == signal_id


def test_pause_resume_and_stop_signals_act_on_the_running_snapshot(mariadb_server, mariadb_database, db):
    create_load_table(db, 3000)
    with db.cursor() as cur:
        cur.execute("create table u (id int primary key, v varchar(20))")
        cur.execute("insert into u values (1, 'a'), (2, 'b')")
    collected = Collector()
    cfg = config(mariadb_server, mariadb_database, **{"incremental.snapshot.chunk.size": 100})
    engine = Engine(cfg, consumer=collected, serializer=JsonSerializer())
    database = mariadb_database
    with EngineRunner(engine):
        signal_id = send(db, "execute-snapshot", {"data-collections": [f"{database}.t", f"{database}.u"]})
        wait_until(lambda: "IN_PROGRESS" in kinds(engine, signal_id), 60, "chunks read")
        send(db, "pause-snapshot", {})
        wait_until(lambda: "PAUSED" in kinds(engine, signal_id), 30, "paused")
        # Paused on t: taking t out goes on with u once resumed.
        send(db, "stop-snapshot", {"data-collections": [f"{database}.t"], "type": "incremental"})
        wait_until(lambda: "TABLE_SCAN_COMPLETED" in kinds(engine, signal_id), 30, "t taken out")
        send(db, "resume-snapshot", {})
        wait_until(lambda: "COMPLETED" in kinds(engine, signal_id), 60, "the rest of the snapshot")
        expected_u = source_image(db, "u")
    assert (
        kinds(engine, signal_id)[:3] == ["STARTED", "IN_PROGRESS", "IN_PROGRESS"][: len(kinds(engine, signal_id)[:3])]
    )
    assert {"PAUSED", "RESUMED"} <= set(kinds(engine, signal_id))
    scanned = {
        n["additional_data"]["data_collection"]: n["additional_data"]["status"]
        for n in notifications(engine, signal_id)
        if n["type"] == "TABLE_SCAN_COMPLETED"
    }
    assert scanned == {f"{database}.t": "SKIPPED", f"{database}.u": "SUCCEEDED"}
    assert apply(table_events(collected, "u")) == expected_u
    assert 0 < sum(1 for e in table_events(collected, "t") if e["value"]) < 3000  # stopped part way


def test_a_blocking_snapshot_pauses_the_binlog_then_streams_on_and_converges(mariadb_server, mariadb_database, db):
    create_load_table(db, 3000)
    collected = Collector()
    engine = Engine(config(mariadb_server, mariadb_database), consumer=collected, serializer=JsonSerializer())
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    with EngineRunner(engine), WriteLoad(connect, first_new_id=3001, seed=5) as load:
        wait_until(lambda: load.transactions > 30 and collected.changes(), 30, "streaming under writes")
        signal_id = send(db, "execute-snapshot", {"data-collections": [f"{mariadb_database}.t"], "type": "blocking"})
        wait_until(lambda: "COMPLETED" in kinds(engine, signal_id), 60, "the blocking snapshot completed")
        streamed_before = load.transactions
        wait_until(lambda: load.transactions > streamed_before + 20, 30, "writes after it")
        load.stop()
        expected = source_image(db)
        try:
            wait_until(lambda: apply(collected.snapshot()) == expected, 60, "target equals source")
        except TimeoutError:
            raise AssertionError(image_diff(expected, apply(collected.snapshot()))) from None

    done = notifications(engine, signal_id)
    assert [n["type"] for n in done] == ["STARTED", "COMPLETED"]
    assert done[0]["aggregate_type"] == "Blocking Snapshot"
    reads = [e["value"] for e in table_events(collected) if e["value"] and e["value"]["op"] == "r"]
    assert len(reads) == int(done[1]["additional_data"]["total_rows_scanned"]) >= 2000  # deletes ran meanwhile
    # Debezium's markers, and the binlog point the rows were read at (not older than the stream's).
    assert [r["source"]["snapshot"] for r in (reads[0], reads[-1])] == ["first", "last"]
    assert {r["source"]["snapshot"] for r in reads[1:-1]} == {"true"}
    points = {(r["source"]["file"], r["source"]["pos"]) for r in reads}
    assert len(points) == 1 and next(iter(points))[1] > 0


def test_a_blocking_snapshot_is_refused_while_an_incremental_one_runs(mariadb_server, mariadb_database, db):
    create_load_table(db, 3000)
    collected = Collector()
    cfg = config(mariadb_server, mariadb_database, **{"incremental.snapshot.chunk.size": 50})
    engine = Engine(cfg, consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        incremental = send(db, "execute-snapshot", {"data-collections": [f"{mariadb_database}.t"]})
        wait_until(lambda: "IN_PROGRESS" in kinds(engine, incremental), 60, "chunks read")
        send(db, "pause-snapshot", {})
        wait_until(lambda: "PAUSED" in kinds(engine, incremental), 30, "paused")
        blocking = send(db, "execute-snapshot", {"data-collections": [f"{mariadb_database}.t"], "type": "blocking"})
        wait_until(lambda: kinds(engine, blocking), 30, "the blocking signal answered")
    [refused] = notifications(engine, blocking)
    assert refused["type"] == "REJECTED" and "incremental snapshot is running" in refused["additional_data"]["problem"]


def test_enum_and_set_keys_are_chunked_in_the_servers_order(mariadb_server, mariadb_database, db):
    """ENUM sorts by its members' index and SET by its bits, not by their text: chunk bounds
    compared as text would skip rows (after 'zeta', the first member, nothing is greater)."""
    with db.cursor() as cur:
        cur.execute("create table e (k enum('zeta','alpha','mid') primary key, v int)")
        cur.execute("insert into e values ('zeta', 1), ('alpha', 2), ('mid', 3)")
        cur.execute("create table s (k set('x','b','a') not null, n int not null, primary key (k, n))")
        cur.execute("insert into s values ('x', 1), ('x', 2), ('b', 1), ('a,x', 1), ('a', 1), ('a,b,x', 3)")
    collected = Collector()
    cfg = config(mariadb_server, mariadb_database, **{"incremental.snapshot.chunk.size": 1})
    engine = Engine(cfg, consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        signal_id = send(db, "execute-snapshot", {"data-collections": [f"{mariadb_database}.[es]"]})
        wait_until(lambda: "COMPLETED" in kinds(engine, signal_id), 60, "the snapshot completed")
    reads = [e["value"]["after"] for e in collected.snapshot() if e["value"] and e["value"]["op"] == "r"]
    enums = [r["k"] for r in reads if "v" in r]
    sets = sorted((r["k"], r["n"]) for r in reads if "n" in r)
    assert enums == ["zeta", "alpha", "mid"]  # each once, in the server's order
    # The server writes a SET's members in their definition's order.
    assert sets == sorted([("x", 1), ("x", 2), ("b", 1), ("x,a", 1), ("a", 1), ("x,b,a", 3)])
