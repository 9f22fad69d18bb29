"""Read-only incremental snapshots (``read.only``: Debezium's read-only incremental snapshot
for MySQL/MariaDB with GTIDs) on a real MariaDB: the engine's user may not write anything, the
snapshot is asked for through a channel that is no table (a signal file, the control API), each
chunk's window is bounded by ``@@gtid_binlog_pos`` before and after its read, and the target
built from the events alone equals the source row by row, under inserts, updates and deletes
running while the chunks are read. ``snapshot.mode=no_data``: rows that existed before reach
the target only through the incremental snapshot."""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
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
def db(mariadb_server: Any, mariadb_database: str) -> Iterator[Any]:
    conn = mariadb_server.connect(database=mariadb_database)
    with conn.cursor() as cur:
        cur.execute(SIGNAL_DDL)  # where Debezium's default mode would write its watermarks
    yield conn
    conn.close()


@pytest.fixture
def reader(mariadb_server: Any, mariadb_database: str) -> Iterator[tuple[str, str]]:
    """A user that can read the database and the binlog, and write nothing."""
    user, password = f"ro_{mariadb_database[-8:]}", "ro-pw"
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create user '{user}'@'%' identified by '{password}'")
        cur.execute(f"grant select on `{mariadb_database}`.* to '{user}'@'%'")
        cur.execute(f"grant replication slave, binlog monitor on *.* to '{user}'@'%'")
    try:
        yield user, password
    finally:
        with mariadb_server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"drop user '{user}'@'%'")


def config(server: Any, database: str, user: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return engine_config(
        server,
        database,
        **{
            "database.user": user[0],
            "database.password": user[1],
            "snapshot.mode": "no_data",
            "read.only": True,
            "signal.data.collection": f"{database}.{SIGNAL_TABLE}",
            **extra,
        },
    )


def kinds(engine: Engine, signal_id: str) -> list[str]:
    items, _ = engine.notifications.since(0)
    return [n["type"] for n in items if n["id"] == signal_id]


def notifications(engine: Engine, signal_id: str) -> list[dict[str, Any]]:
    items, _ = engine.notifications.since(0)
    return [n for n in items if n["id"] == signal_id]


def events_of(collected: Collector, table: str) -> list[dict[str, Any]]:
    return [e for e in collected.changes() if e["value"]["source"]["table"] == table]


def consistent_history(events: list[dict[str, Any]]) -> list[str]:
    """Where the events of one table are no history a consumer can follow: each change's
    ``before`` must be the row as the events before it left it, a create must find no row. A
    chunk row emitted before a change it already includes (a window closed too early), or after
    a change it missed (a stale row kept), breaks it at the next change of that key."""
    image: dict[str, Any] = {}
    broken = []
    for event in events:
        value, key = event["value"], json.dumps(event["key"], sort_keys=True)
        known = key in image
        if value["op"] == "c" and known:
            broken.append(f"create of {key} over {image[key]}")
        if value["op"] in ("u", "d") and known and value["before"] != image[key]:
            broken.append(f"{value['op']} of {key}: before {value['before']} but the row was {image[key]}")
        if value["op"] == "d":
            image.pop(key, None)
        else:
            image[key] = value["after"]
    return broken


def test_the_reader_user_cannot_write(mariadb_server: Any, mariadb_database: str, db: Any, reader: Any) -> None:
    """What the tests below rely on: any write of the engine would fail."""
    conn = mariadb_server.connect(user=reader[0], password=reader[1], database=mariadb_database)
    with conn, conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as refused:
        cur.execute(f"insert into {SIGNAL_TABLE} values ('x', 'log', '{{}}')")
    assert refused.value.args[0] == 1142  # ER_TABLEACCESS_DENIED_ERROR


@pytest.mark.slow
def test_a_read_only_snapshot_under_writes_converges_on_the_source_and_writes_nothing(
    mariadb_server: Any, mariadb_database: str, db: Any, reader: Any, tmp_path: Path
) -> None:
    rows, chunk = 12_000, 512
    create_load_table(db, rows)
    signal_file = tmp_path / "signals.jsonl"
    cfg = config(
        mariadb_server,
        mariadb_database,
        reader,
        **{
            "signal.enabled.channels": "file",
            "signal.file": str(signal_file),
            "incremental.snapshot.chunk.size": chunk,
        },
    )
    collected = Collector()
    engine = Engine(cfg, consumer=collected, serializer=JsonSerializer())
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    with EngineRunner(engine), WriteLoad(connect, first_new_id=rows + 1, seed=16) as load:
        wait_until(lambda: len(events_of(collected, "t")) > 100, 30, "streaming before the signal")
        started = time.monotonic()
        signal_id = "read-only-1"
        signal = {"id": signal_id, "type": "execute-snapshot", "data": {"data-collections": [f"{mariadb_database}.t"]}}
        signal_file.write_text(json.dumps(signal) + "\n")
        wait_until(lambda: "COMPLETED" in kinds(engine, signal_id), 300, "the read-only snapshot completed")
        seconds = time.monotonic() - started
        load.stop()
        assert load.transactions > 100
        expected = source_image(db)
        try:
            wait_until(lambda: apply(collected.snapshot()) == expected, 60, "target equals source")
        except TimeoutError:
            raise AssertionError(image_diff(expected, apply(collected.snapshot()))) from None

    assert consistent_history(events_of(collected, "t")) == []
    reads = [e for e in events_of(collected, "t") if e["value"]["op"] == "r"]
    print(
        f"read-only incremental snapshot: {len(reads)} rows in {seconds:.1f}s "
        f"({len(reads) / seconds:.0f} rows/s) under {load.transactions} transactions"
    )
    assert reads and all(e["value"]["source"]["snapshot"] == "incremental" for e in reads)
    assert [k for k, n in Counter(e["key"]["id"] for e in reads).items() if n > 1] == []  # no chunk overlaps
    seen = kinds(engine, signal_id)
    assert seen[0] == "STARTED" and seen[-1] == "COMPLETED", seen
    # A window per chunk of what was read: the load's deletes shrink the table while it is read
    # (11,242 of the 12,000 rows were left in one loaded run), so count chunks from the reads.
    assert seen.count("IN_PROGRESS") >= -(-len(reads) // chunk) - 1
    scanned = [n for n in notifications(engine, signal_id) if n["type"] == "TABLE_SCAN_COMPLETED"]
    assert [n["additional_data"]["status"] for n in scanned] == ["SUCCEEDED"]
    # The writes made some rows stale while their chunk waited for its window to close: dropped,
    # their streamed changes stand instead. Most rows are read.
    assert int(scanned[0]["additional_data"]["total_rows_scanned"]) >= len(reads) >= rows * 0.8
    # No watermark, nothing at all, went into the signal table.
    assert events_of(collected, SIGNAL_TABLE) == []
    with db.cursor() as cur:
        cur.execute(f"select count(*) from {SIGNAL_TABLE}")
        assert cur.fetchone() == (0,)


def test_on_an_idle_database_each_window_closes_at_once(
    mariadb_server: Any, mariadb_database: str, db: Any, reader: Any
) -> None:
    """No transaction during a read: the low and high watermarks are equal and the window
    closes where the stream stands (Debezium: on the server's heartbeat)."""
    create_load_table(db, 3000)
    with db.cursor() as cur:  # a second captured table, never written during the snapshot
        cur.execute("create table u (id int primary key, v varchar(20))")
        cur.execute("insert into u values (1, 'a'), (2, 'b'), (3, 'c')")
    cfg = config(mariadb_server, mariadb_database, reader, **{"incremental.snapshot.chunk.size": 400})
    collected = Collector()
    engine = Engine(cfg, consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        signal_id = engine.signals.send(
            "execute-snapshot", {"data-collections": [f"{mariadb_database}\\.(t|u)"], "type": "incremental"}
        )
        wait_until(lambda: "COMPLETED" in kinds(engine, signal_id), 60, "the read-only snapshot completed")
        expected_t, expected_u = source_image(db, "t"), source_image(db, "u")
    assert apply(events_of(collected, "t")) == expected_t
    assert apply(events_of(collected, "u")) == expected_u
    assert all(e["value"]["op"] == "r" for e in events_of(collected, "t") + events_of(collected, "u"))
    assert len(events_of(collected, "t")) == 3000  # nothing changed: nothing dropped, nothing twice
    assert events_of(collected, SIGNAL_TABLE) == []
