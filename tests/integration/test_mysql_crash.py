"""The MariaDB source through outages, under a running write load: the engine process killed
(kill -9) several times mid-stream, and the server restarted while the engine streams. After
catch-up, replaying the captured events yields exactly the source table; a kill repeats no more
events than its bound (``crash_support``), a server restart none."""

from __future__ import annotations

import functools
import json
import random
import signal
import time
from collections import Counter
from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.requirements import require_module

from .crash_support import delivery_rate, duplicates_per_crash, kill_after_progress, lines, runs
from .mysql_support import Collector, DdlLoad, WriteLoad, create_load_table, engine_config, source_image
from .pg_support import apply, child_stderr, image_diff, read_events, start_child, wait_for_target

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration

ROWS, BATCH = 2000, 200
#: The DDL test's load table: its snapshot takes long enough for DDL to change u before u is read.
ROWS_T = 20_000


def identity(event: dict[str, Any]) -> tuple[Any, ...]:
    """A change's place in the binlog (transaction, event, row), its key and its op; a snapshot
    row has no place, its key tells it."""
    value = event["value"]
    source = value["source"]
    where = (source["gtid"], source["file"], source["pos"], source["row"])
    return (*where, json.dumps(event["key"], sort_keys=True), value["op"])


@pytest.fixture
def db(mariadb_server: Any, mariadb_database: str) -> Any:
    conn = mariadb_server.connect(database=mariadb_database)
    yield conn
    conn.close()


@pytest.mark.slow
def test_kill_9_under_write_load_loses_nothing_and_repeats_within_the_bound(
    mariadb_server, mariadb_database, db, tmp_path
):
    create_load_table(db, ROWS)
    # The bound is on row changes: the log holds every record, and the schema change topic's
    # snapshot events are repeated by each run that restarts the snapshot.
    config = engine_config(
        mariadb_server, mariadb_database, **{"max.batch.size": BATCH, "include.schema.changes": False}
    )
    flush_s = config["offset.flush.interval.ms"] / 1000
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"
    rng = random.Random(3)
    committed_at_kill = []
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    with WriteLoad(connect, first_new_id=ROWS + 1) as load:
        for _ in range(3):
            target = max(lines(log), ROWS) + rng.randint(300, 3000)
            committed_at_kill.append(kill_after_progress(config, log, offsets, target))
        load.stop()
        assert load.transactions > 100
    started = time.monotonic()
    child = start_child(config, log, offsets)
    expected = source_image(db)
    wait_for_target(log, expected, child, 180)
    catch_up_s = time.monotonic() - started
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 0, child_stderr(log)

    delivered = runs(log, identity)
    assert len(delivered) == 4
    report = duplicates_per_crash(delivered, committed_at_kill, flush_s, snapshot_rows=ROWS, batch=BATCH)
    print(
        f"duplicates per crash (measured, bound, busiest flush interval): {report}; "
        f"catch-up {len(delivered[-1])} events in {catch_up_s:.1f}s, "
        f"delivered at {delivery_rate(delivered[-1]):.0f} events/s; {load.transactions} transactions"
    )
    assert all(repeated <= bound for repeated, bound, _ in report), report


def test_a_server_restart_mid_stream_is_retried_and_loses_nothing(mariadb_server, mariadb_database, db):
    if mariadb_server.external:
        pytest.skip("CDC_TEST_MYSQL_URL points at a server the tests cannot restart")
    create_load_table(db, 200)
    collected = Collector()
    config = engine_config(mariadb_server, mariadb_database, **{"errors.retry.delay.max.ms": 1000})
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    streamed = lambda: sum(1 for e in collected.changes() if e["value"]["op"] != "r")  # noqa: E731
    with WriteLoad(connect, first_new_id=201, survive_restarts=True) as load, EngineRunner(engine):
        for restart in range(2):
            wait_until(lambda n=restart: streamed() > 300 * (n + 1), 60, "streaming under the load")
            mariadb_server.stop()
            mariadb_server.start()
        wait_until(lambda: streamed() > 300 * 3, 90, "streaming after the restarts")
        load.stop()
        assert load.connection_errors > 0, "the load never saw the server go"
        with connect() as conn:
            expected = source_image(conn)
        try:
            wait_until(lambda: apply(collected.snapshot()) == expected, 90, "target equals source")
        except TimeoutError:
            raise AssertionError(image_diff(expected, apply(collected.snapshot()))) from None
    # The reader reopens at the position it had read to, inside a transaction too: nothing twice.
    seen = Counter(identity(e) for e in collected.changes() if e["value"]["op"] != "r")
    assert [i for i, n in seen.items() if n > 1] == []


@pytest.mark.slow
def test_kill_9_mid_incremental_snapshot_under_writes_resumes_from_the_last_chunk(
    mariadb_server, mariadb_database, db, tmp_path
):
    rows, chunk = 30_000, 200
    create_load_table(db, rows)
    with db.cursor() as cur:
        cur.execute("create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data text)")
    # Commit after every batch: what is read again is then the snapshot's doing, not the flush's.
    config = engine_config(
        mariadb_server,
        mariadb_database,
        **{
            "snapshot.mode": "no_data",
            "signal.data.collection": f"{mariadb_database}.debezium_signal",
            "incremental.snapshot.chunk.size": chunk,
            "max.batch.size": 100,
            "offset.commit.policy": "always",
        },
    )
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"

    def reads() -> list[dict[str, Any]]:
        return [e for e in read_events(log) if e["value"] and e["value"]["op"] == "r"]

    def snapshot_reached(running: Any, target: int) -> bool:
        return running.poll() is not None or len(reads()) >= target

    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    read_at_kill = []
    with WriteLoad(connect, first_new_id=rows + 1, seed=7) as load:
        child = start_child(config, log, offsets)
        try:
            wait_until(lambda: child.poll() is not None or offsets.exists(), 30, "streaming")
            with db.cursor() as cur:
                cur.execute(
                    "insert into debezium_signal values ('kill-9', 'execute-snapshot', %s)",
                    (json.dumps({"data-collections": [f"{mariadb_database}.t"]}),),
                )
            for target in (3000, 12_000):
                wait_until(functools.partial(snapshot_reached, child, target), 90, "part of the snapshot")
                assert child.poll() is None, child_stderr(log)
                child.send_signal(signal.SIGKILL)
                child.wait(30)
                read_at_kill.append(len(reads()))
                child = start_child(config, log, offsets)
            wait_until(lambda: child.poll() is not None or len(reads()) >= rows * 0.9, 120, "the rest of it")
            load.stop()
            assert load.transactions > 50
            wait_for_target(log, source_image(db), child, 120)
        finally:
            child.send_signal(signal.SIGTERM)
            child.wait(30)
    assert all(n < rows for n in read_at_kill), read_at_kill  # both kills came mid-snapshot
    keys = [json.dumps(e["key"]) for e in reads()]
    again = len(keys) - len(set(keys))
    # Per kill at most the window in flight (rows not all delivered) and one batch after the commit.
    assert again <= 2 * (chunk + 100), f"{again} rows read twice in 2 kills: more than the chunks in flight"


def _table_image(events: list[dict[str, Any]], table: str) -> dict[str, dict[str, Any]]:
    return apply([e for e in events if e.get("value") is None or e["value"]["source"]["table"] == table])


def _converged(log: Any, db: Any, tables: tuple[str, ...]) -> str:
    """'' when the target replayed from the log equals the source, table by table and row by
    row, on the source's columns (a column a DDL added is NULL in both until a row sets it);
    else what differs."""
    events = read_events(log)
    problems = []
    for table in tables:
        expected = source_image(db, table)
        target = _table_image(events, table)
        actual = {key: {c: row.get(c) for c in expected[key]} for key, row in target.items() if key in expected}
        actual.update({key: row for key, row in target.items() if key not in expected})
        if actual != expected:
            problems.append(f"{table}: {image_diff(expected, actual)}")
    return "; ".join(problems)


@pytest.mark.slow
def test_kill_9s_and_ddl_during_the_snapshots_under_write_load_lose_nothing(
    mariadb_server, mariadb_database, db, tmp_path
):
    """The initial snapshot and an incremental one run while one table's columns are added
    (FIRST and AFTER), widened and dropped over and over and the other takes a write load, and
    the engine is killed -9 three times (twice in the initial snapshot's run, once in the
    incremental snapshot). After catch-up both tables equal the source row by row: no value
    under another column's name, no row lost."""
    create_load_table(db, ROWS_T)
    with db.cursor() as cur:
        cur.execute("create table u (id int primary key, a varchar(20), b int not null)")
        cur.execute("insert into u select seq, concat('a', seq), seq from seq_1_to_4000")
        cur.execute("create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data text)")
    config = engine_config(
        mariadb_server,
        mariadb_database,
        **{
            "max.batch.size": 200,
            "snapshot.fetch.size": 200,
            "include.schema.changes": False,
            "signal.data.collection": f"{mariadb_database}.debezium_signal",
            "incremental.snapshot.chunk.size": 400,
        },
    )
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"
    connect = functools.partial(mariadb_server.connect, database=mariadb_database)
    rng = random.Random(5)

    def reads() -> int:
        return sum(1 for e in read_events(log) if e.get("value") and e["value"]["op"] == "r")

    with WriteLoad(connect, first_new_id=ROWS_T + 1, seed=11) as load, DdlLoad(connect, "u") as ddl:
        # The first kill inside t's snapshot; u is read after t, while DDL changes it.
        for target in (rng.randint(3000, ROWS_T // 2), rng.randint(ROWS_T + 1000, ROWS_T + 3000)):
            kill_after_progress(config, log, offsets, max(lines(log), target))
        child = start_child(config, log, offsets)
        try:
            wait_until(lambda: child.poll() is not None or reads() >= ROWS_T + 4000, 90, "the initial snapshot")
            before = reads()
            with db.cursor() as cur:
                cur.execute(
                    "insert into debezium_signal values ('ddl-kill', 'execute-snapshot', %s)",
                    (json.dumps({"data-collections": [f"{mariadb_database}.u", f"{mariadb_database}.t"]}),),
                )
            wait_until(lambda: child.poll() is not None or reads() >= before + 1500, 90, "part of the incremental")
            assert child.poll() is None, child_stderr(log)
            child.send_signal(signal.SIGKILL)
            child.wait(30)
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
        child = start_child(config, log, offsets)
        try:
            wait_until(
                lambda: child.poll() is not None or reads() >= before + ROWS_T + 4000, 120, "the incremental snapshot"
            )
            load.stop()
            ddl.stop()
            assert load.transactions > 50 and ddl.statements > 20, (load.transactions, ddl.statements)
            try:
                wait_until(
                    lambda: child.poll() is not None or not _converged(log, db, ("t", "u")), 120, "target == source"
                )
            except TimeoutError:
                raise AssertionError(f"{_converged(log, db, ('t', 'u'))}\n{child_stderr(log)}") from None
            assert child.poll() is None, child_stderr(log)
        finally:
            child.send_signal(signal.SIGTERM)
            child.wait(30)
