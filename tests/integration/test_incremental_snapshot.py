"""Incremental snapshots (DBLog watermarks) on a real PostgreSQL, with signals and
notifications. The target is built only from what the engine emits (``snapshot.mode=no_data``:
rows that existed before the engine started reach it only through the incremental snapshot)."""

from __future__ import annotations

import json
import signal as signals
import threading
import urllib.error
import urllib.request
import uuid
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.snapshots.incremental import READ_AHEAD
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.pg_support import (
    WriteLoad,
    apply,
    child_stderr,
    create_load_table,
    engine_config,
    image_diff,
    read_events,
    source_image,
    start_child,
)

pytestmark = pytest.mark.integration

SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"


class Collector:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, record: Any) -> None:
        with self.lock:
            self.events.append({"key": record.key, "value": record.value, "topic": record.topic})

    def snapshot(self, topic: str = "shop.public.t") -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["topic"] == topic]


def setup(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SIGNAL_DDL)
        create_load_table(conn, rows)


def config(pg_server: Any, database: str, **extra: Any) -> dict[str, Any]:
    return engine_config(
        pg_server,
        database,
        **{"snapshot.mode": "no_data", "signal.data.collection": "public.debezium_signal", **extra},
    )


def send(dsn: str, kind: str, data: Any, signal_id: str | None = None) -> str:
    signal_id = signal_id or uuid.uuid4().hex
    payload = data if isinstance(data, str) or data is None else json.dumps(data)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into debezium_signal values (%s, %s, %s)", (signal_id, kind, payload))
    return signal_id


def notifications(engine: Engine, kind: str | None = None) -> list[dict[str, Any]]:
    items, _ = engine.notifications.since(0)
    return [n for n in items if kind is None or n["type"] == kind]


def completed(engine: Engine, signal_id: str) -> bool:
    return any(n["id"] == signal_id and n["type"] in ("COMPLETED", "ABORTED") for n in notifications(engine))


def slot_active(pg_server: Any, slot: str) -> bool:
    with pg_server.connect() as conn:
        row = conn.execute("select active from pg_replication_slots where slot_name = %s", (slot,)).fetchone()
    return bool(row and row[0])


def replay(collector: Collector) -> dict[str, dict[str, Any]]:
    return apply([{"key": e["key"], "value": e["value"]} for e in collector.snapshot()])


def assert_target_equals_source(collector: Collector, dsn: str) -> None:
    """Replaying the events converges on the source table (the writes have stopped)."""
    with psycopg.connect(dsn) as conn:
        expected = source_image(conn)
    try:
        wait_until(lambda: replay(collector) == expected, 60, "target equals source")
    except TimeoutError:
        raise AssertionError(image_diff(expected, replay(collector))) from None


@pytest.mark.parametrize(
    ("chunk", "strategy", "readers"),
    [
        (7, "insert_insert", 1),
        (100, "insert_delete", 1),
        (1024, "insert_insert", 1),
        (50, "insert_insert", 2),
        (300, "insert_delete", 3),
    ],
)
def test_snapshot_under_a_write_storm_converges_to_the_source(
    pg_server: Any, pg_database: str, chunk: int, strategy: str, readers: int
) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 3000)
    collector = Collector()
    engine = Engine(
        config(
            pg_server,
            pg_database,
            **{
                "incremental.snapshot.chunk.size": chunk,
                "incremental.snapshot.watermarking.strategy": strategy,
                "incremental.snapshot.max.threads": readers,
            },
        ),
        consumer=collector,
    )
    with EngineRunner(engine), WriteLoad(dsn, 3001, seed=chunk) as load:
        wait_until(lambda: load.transactions > 50, 30, "writes before the signal")
        signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public.t"], "type": "incremental"})
        wait_until(lambda: completed(engine, signal_id), 180, "snapshot completed")
        load.stop()
        assert_target_equals_source(collector, dsn)
    reads = [e for e in collector.snapshot() if e["value"] and e["value"]["op"] == "r"]
    assert reads and all(e["value"]["source"]["snapshot"] == "incremental" for e in reads)
    keys = [e["key"]["id"] for e in reads]
    assert len(keys) == len(set(keys))  # every row read once: no overlap between readers or chunks
    # The signal and the watermark rows are change events too, as in Debezium: the signal, then
    # one open and one close (insert_insert) or one open and its delete (insert_delete) a window.
    signal_rows = collector.snapshot("shop.public.debezium_signal")
    assert signal_rows[0]["key"] == {"id": signal_id}
    windows = [e["value"]["after"] for e in signal_rows[1:] if e["value"] and e["value"]["op"] == "c"]
    assert windows and all(w["type"].startswith("snapshot-window-") for w in windows)
    assert all(json.loads(w["data"])["correlationId"] == signal_id for w in windows)


def test_notifications_in_order_with_counts_and_estimates(pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 250)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table empty_one (id int primary key)")
        conn.execute("analyze t")
    engine = Engine(config(pg_server, pg_database, **{"incremental.snapshot.chunk.size": 100}), consumer=Collector())
    with EngineRunner(engine):
        signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public\\.(t|empty_one)"]})
        wait_until(lambda: completed(engine, signal_id), 60, "snapshot completed")
    seen = [n for n in notifications(engine) if n["id"] == signal_id]
    kinds = [n["type"] for n in seen]
    assert kinds == [
        "STARTED",
        "TABLE_SCAN_COMPLETED",  # empty_one comes first (tables in name order), with nothing in it
        "IN_PROGRESS",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
    ], kinds
    assert all(n["aggregate_type"] == "Incremental Snapshot" for n in seen)
    assert seen[0]["additional_data"]["data_collections"] == "public.empty_one, public.t"
    assert seen[1]["additional_data"].items() >= {"scanned_collection": "public.empty_one", "status": "EMPTY"}.items()
    progress = seen[2]["additional_data"]
    assert progress["current_collection_in_progress"] == "public.t"
    assert progress["maximum_key"] == "250" and progress["last_processed_key"] == "100"
    assert progress["rows_scanned"] == "100" and progress["estimated_total_rows"] == "250"
    assert progress["eta_seconds"] != ""
    done = seen[4]["additional_data"]
    assert done["scanned_collection"] == "public.t" and done["total_rows_scanned"] == "250"
    assert done["status"] == "SUCCEEDED"
    assert all(n["timestamp"].isdigit() for n in seen)


def test_a_second_signal_joins_the_running_snapshot_which_goes_on_under_its_id(
    pg_server: Any, pg_database: str
) -> None:
    """As Debezium: the second execute-snapshot's table is taken into the running snapshot, with
    no STARTED of its own, and everything after is reported under the second signal's id (so a
    sensor waiting for either signal sees its snapshot complete). Both signals in one transaction:
    the first has surely started when the second arrives."""
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 600)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table u (id int primary key, v text)")
        conn.execute("insert into u select g, 'u' || g from generate_series(1, 150) g")
    collector = Collector()
    engine = Engine(config(pg_server, pg_database, **{"incremental.snapshot.chunk.size": 100}), consumer=collector)
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    with EngineRunner(engine):
        with psycopg.connect(dsn) as conn:
            for signal_id, table in ((first, "public.t"), (second, "public.u")):
                conn.execute(
                    "insert into debezium_signal values (%s, 'execute-snapshot', %s)",
                    (signal_id, json.dumps({"data-collections": [table]})),
                )
        wait_until(lambda: completed(engine, second), 60, "the joined snapshot completed")
    seen = [(n["type"], n["id"]) for n in notifications(engine) if n["id"] in (first, second)]
    assert seen[0] == ("STARTED", first) and all(i == second for _, i in seen[1:]), seen
    assert [kind for kind, _ in seen].count("STARTED") == 1, seen
    scans = {
        n["additional_data"]["scanned_collection"]: n["additional_data"]["total_rows_scanned"]
        for n in notifications(engine, "TABLE_SCAN_COMPLETED")
    }
    assert scans == {"public.t": "600", "public.u": "150"}, scans
    for topic, rows in (("shop.public.t", 600), ("shop.public.u", 150)):
        read = {e["key"]["id"] for e in collector.snapshot(topic) if e["value"]["op"] == "r"}
        assert read == set(range(1, rows + 1)), topic


def test_conditions_surrogate_and_composite_keys_and_a_keyless_table(pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table pair (a int, b text, v int, primary key (a, b))")
        conn.execute("insert into pair select g % 7, 'k' || g, g from generate_series(1, 200) g")
        conn.execute("create table loose (n int, v text)")
        conn.execute("insert into loose select g, 'v' || g from generate_series(1, 30) g")
        conn.execute("create table colors (id int primary key, color text)")
        conn.execute(
            "insert into colors select g, case when g % 3 = 0 then 'blue' else 'red' end from generate_series(1, 90) g"
        )
    collector = Collector()
    engine = Engine(config(pg_server, pg_database, **{"incremental.snapshot.chunk.size": 16}), consumer=collector)
    with EngineRunner(engine):
        first = send(
            dsn,
            "execute-snapshot",
            {
                "data-collections": ["public.pair", "public.colors", "public.loose"],
                # A '%' in a filter is SQL, not a placeholder.
                "additional-conditions": [{"data-collection": "public.colors", "filter": "color like 'bl%'"}],
            },
        )
        wait_until(lambda: completed(engine, first), 60, "first snapshot")
        second = send(dsn, "execute-snapshot", {"data-collections": ["public.loose"], "surrogate-key": "n"})
        wait_until(lambda: completed(engine, second), 60, "surrogate-key snapshot")
    statuses = {
        n["additional_data"]["scanned_collection"]: n["additional_data"]
        for n in notifications(engine, "TABLE_SCAN_COMPLETED")
        if n["id"] == first
    }
    assert statuses["public.pair"]["total_rows_scanned"] == "200"
    assert statuses["public.colors"]["total_rows_scanned"] == "30"  # only the blue ones
    assert statuses["public.loose"]["status"] == "NO_PRIMARY_KEY"
    pairs = [e for e in collector.snapshot("shop.public.pair") if e["value"]["op"] == "r"]
    assert sorted((e["key"]["a"], e["key"]["b"]) for e in pairs) == sorted((g % 7, f"k{g}") for g in range(1, 201))
    blue = [e["value"]["after"] for e in collector.snapshot("shop.public.colors")]
    assert len(blue) == 30 and {row["color"] for row in blue} == {"blue"}
    loose = [e["value"]["after"]["n"] for e in collector.snapshot("shop.public.loose")]
    assert sorted(loose) == list(range(1, 31))


@pytest.mark.parametrize("readers", [1, 2])
def test_a_chunk_the_server_fails_fails_its_table_and_the_next_goes_on(
    pg_server: Any, pg_database: str, readers: int
) -> None:
    """The filter passes the check (it is a predicate) but fails once the read reaches id 50:
    the table is reported SQL_EXCEPTION, and the next one is read on the same connections."""
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table boom (id int primary key)")
        conn.execute("insert into boom select generate_series(1, 100)")
        conn.execute("create table calm (id int primary key, v text)")
        conn.execute("insert into calm select g, 'v' || g from generate_series(1, 40) g")
    collector = Collector()
    settings = {"incremental.snapshot.chunk.size": 16, "incremental.snapshot.max.threads": readers}
    engine = Engine(config(pg_server, pg_database, **settings), consumer=collector)
    with EngineRunner(engine):
        signal_id = send(
            dsn,
            "execute-snapshot",
            {
                "data-collections": ["public.boom", "public.calm"],
                "additional-conditions": [{"data-collection": "public.boom", "filter": "1 / (id - 50) <> 0"}],
            },
        )
        wait_until(lambda: completed(engine, signal_id), 60, "snapshot completed")
    statuses = {
        n["additional_data"]["scanned_collection"]: n["additional_data"]["status"]
        for n in notifications(engine, "TABLE_SCAN_COMPLETED")
    }
    assert statuses == {"public.boom": "SQL_EXCEPTION", "public.calm": "SUCCEEDED"}
    calm = sorted(e["value"]["after"]["id"] for e in collector.snapshot("shop.public.calm"))
    assert calm == list(range(1, 41))
    boom = [e["value"]["after"]["id"] for e in collector.snapshot("shop.public.boom")]
    assert boom == list(range(1, len(boom) + 1)) and len(boom) < 50  # the chunks before it


def test_stop_with_a_list_pause_resume_and_stop_all(pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 2000)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table u (id int primary key)")
        conn.execute("insert into u select generate_series(1, 500)")
    collector = Collector()
    engine = Engine(config(pg_server, pg_database, **{"incremental.snapshot.chunk.size": 50}), consumer=collector)
    with EngineRunner(engine):
        send(dsn, "pause-snapshot", {})  # nothing runs yet: rejected, streaming goes on
        first = send(dsn, "execute-snapshot", {"data-collections": ["public.t", "public.u"]})
        wait_until(lambda: notifications(engine, "STARTED"), 30, "started")
        send(dsn, "stop-snapshot", {"data-collections": ["public.u"], "type": "incremental"})
        send(dsn, "pause-snapshot", {"type": "incremental"})
        wait_until(lambda: notifications(engine, "PAUSED"), 30, "paused")
        paused_at = len(collector.snapshot())
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("insert into t values (999999, 'while paused', 1)")
        wait_until(lambda: any(e["key"] == {"id": 999999} for e in collector.snapshot()), 30, "streaming while paused")
        # Windows already being read when the pause came still close (READ_AHEAD of them), and a
        # chunk released just before may still be on its way to the consumer.
        assert len([e for e in collector.snapshot() if e["value"]["op"] == "r"]) <= paused_at + 50 * (READ_AHEAD + 1)
        send(dsn, "resume-snapshot", {"type": "incremental"})
        wait_until(lambda: completed(engine, first), 60, "completed after resume")
        second = send(dsn, "execute-snapshot", {"data-collections": ["public.t"]})
        wait_until(lambda: any(n["id"] == second for n in notifications(engine, "IN_PROGRESS")), 30, "second runs")
        send(dsn, "stop-snapshot", {"data-collections": [], "type": "incremental"})
        wait_until(lambda: completed(engine, second), 30, "aborted")
    assert not collector.snapshot("shop.public.u")  # removed before its turn
    assert [n["type"] for n in notifications(engine) if n["id"] == second][-1] == "ABORTED"
    skipped = [n for n in notifications(engine, "TABLE_SCAN_COMPLETED") if n["id"] == first]
    assert {n["additional_data"]["scanned_collection"]: n["additional_data"]["status"] for n in skipped} == {
        "public.u": "SKIPPED",
        "public.t": "SUCCEEDED",
    }
    assert notifications(engine, "RESUMED")
    rejected = notifications(engine, "REJECTED")
    assert rejected and "no incremental snapshot is running" in rejected[0]["additional_data"]["problem"]


def test_bad_signals_are_answered_and_streaming_goes_on(pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 10)
    collector = Collector()
    engine = Engine(config(pg_server, pg_database), consumer=collector)
    bad = {
        "json": ("execute-snapshot", "{not json"),
        "type": ("explode", "{}"),
        "table": ("execute-snapshot", {"data-collections": ["public.nope"]}),
        "nolist": ("execute-snapshot", {"data-collections": "public.t"}),
        "drop": (
            "execute-snapshot",
            {
                "data-collections": ["public.t"],
                "additional-conditions": [{"data-collection": "public.t", "filter": "true; drop table t"}],
            },
        ),
        "union": (
            "execute-snapshot",
            {
                "data-collections": ["public.t"],
                "additional-conditions": [{"data-collection": "public.t", "filter": "true) union (select 1"}],
            },
        ),
        "notbool": (
            "execute-snapshot",
            {
                "data-collections": ["public.t"],
                "additional-conditions": [{"data-collection": "public.t", "filter": "n + 1"}],
            },
        ),
    }
    with EngineRunner(engine):
        ids = {name: send(dsn, kind, data, signal_id=f"bad-{name}") for name, (kind, data) in bad.items()}
        wait_until(lambda: len(notifications(engine, "REJECTED")) >= len(bad), 30, "every bad signal answered")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("insert into t values (11, 'after the bad signals', 11)")
        wait_until(lambda: any(e["key"] == {"id": 11} for e in collector.snapshot()), 30, "still streaming")
    problems = {n["id"]: n["additional_data"]["problem"] for n in notifications(engine, "REJECTED")}
    assert "not valid JSON" in problems[ids["json"]]
    assert "unknown signal type 'explode'" in problems[ids["type"]]
    assert "no captured table matches" in problems[ids["table"]]
    assert "data-collections" in problems[ids["nolist"]]
    assert "not a single predicate" in problems[ids["drop"]]
    assert "not a single predicate" in problems[ids["union"]]
    assert "refused by the server" in problems[ids["notbool"]]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("select count(*) from t").fetchone() == (11,)  # the table survived


def test_read_only_mode_and_the_api_channel(pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 500)  # no signal table at all
    collector = Collector()
    cfg = engine_config(
        pg_server, pg_database, **{"snapshot.mode": "no_data", "read.only": True, "incremental.snapshot.chunk.size": 64}
    )
    engine = Engine(cfg, consumer=collector)
    with EngineRunner(engine), WriteLoad(dsn, 501, seed=9) as load:
        wait_until(lambda: load.transactions > 20, 30, "writes")
        signal_id = engine.signals.send("execute-snapshot", {"data-collections": ["public.t"]})
        wait_until(lambda: completed(engine, signal_id), 60, "read-only snapshot completed")
        load.stop()
        with psycopg.connect(dsn) as conn:
            expected = source_image(conn)
        wait_until(lambda: replay(collector) == expected, 60, "target equals source")


def test_a_crash_mid_snapshot_resumes_from_the_last_chunk(pg_server: Any, pg_database: str, tmp_path: Any) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 40_000)
    chunk = 200
    # Commit after every batch: what is re-read is then the snapshot's doing, not the flush interval's.
    cfg = config(
        pg_server,
        pg_database,
        **{"incremental.snapshot.chunk.size": chunk, "max.batch.size": 100, "offset.commit.policy": "always"},
    )
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"

    def reads() -> list[dict[str, Any]]:
        return [e for e in read_events(log) if e["value"] and e["value"]["op"] == "r"]

    child = start_child(cfg, log, offsets)
    try:
        wait_until(lambda: child.poll() is not None or slot_active(pg_server, cfg["slot.name"]), 30, "streaming")
        send(dsn, "execute-snapshot", {"data-collections": ["public.t"]})
        wait_until(lambda: child.poll() is not None or len(reads()) >= 2000, 60, "part of the snapshot")
        assert child.poll() is None, child_stderr(log)
        child.send_signal(signals.SIGKILL)
        child.wait(30)
        before = len(reads())
        child = start_child(cfg, log, offsets)
        with psycopg.connect(dsn) as conn:
            expected = source_image(conn)
        try:
            wait_until(lambda: child.poll() is not None or apply(read_events(log)) == expected, 120, "resumed")
        except TimeoutError:
            raise AssertionError(image_diff(expected, apply(read_events(log))) + child_stderr(log)) from None
        assert child.poll() is None, child_stderr(log)
    finally:
        child.send_signal(signals.SIGTERM)
        child.wait(30)
    keys = [json.dumps(e["key"]) for e in reads()]
    again = len(keys) - len(set(keys))
    assert before < 40_000  # the kill came mid-snapshot
    # At most the chunk in flight (whose rows were not all delivered) and one batch after the commit.
    assert again <= chunk + 100, f"{again} rows read twice: more than the chunk in flight"


def test_blocking_snapshot_pauses_streaming_then_goes_on(pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    setup(dsn, 3000)
    collector = Collector()
    engine = Engine(config(pg_server, pg_database), consumer=collector)
    with EngineRunner(engine), WriteLoad(dsn, 3001, seed=11) as load:
        wait_until(lambda: load.transactions > 30, 30, "writes")
        signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public.t"], "type": "blocking"})
        wait_until(lambda: any(n["id"] == signal_id for n in notifications(engine, "COMPLETED")), 60, "blocking done")
        load.stop()
        assert_target_equals_source(collector, dsn)
    done = [n for n in notifications(engine) if n["id"] == signal_id]
    assert [n["type"] for n in done] == ["STARTED", "COMPLETED"]
    assert done[0]["aggregate_type"] == "Blocking Snapshot"
    assert int(done[1]["additional_data"]["total_rows_scanned"]) >= 3000 - 1000  # deletes ran meanwhile
    reads = [e for e in collector.snapshot() if e["value"] and e["value"]["op"] == "r"]
    assert len(reads) == int(done[1]["additional_data"]["total_rows_scanned"])


def test_signals_through_the_control_api_and_a_file(pg_server: Any, pg_database: str, tmp_path: Any) -> None:
    from airflow_cdc.engine.server.instance import EngineInstance
    from airflow_cdc.engine.server.instance_files import read_status
    from tests.integration.test_engine_instance import get

    dsn = pg_server.dsn(pg_database)
    setup(dsn, 300)
    signal_file = tmp_path / "signals.jsonl"
    props = {
        **config(pg_server, pg_database, **{"offset.storage": "file"}),
        "signal.enabled.channels": "source,api,file",
        "signal.file": str(signal_file),
        "state.dir": str(tmp_path / "state"),
        "api.token": "t",
        "sink.type": "null",
        "notification.enabled.channels": "log,api,sink",
        "notification.sink.topic.name": "shop.notifications",
    }
    instance = EngineInstance(props)
    thread = threading.Thread(target=instance.run)
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 30, "polling")
        base = str(read_status(instance.directory)["api"])  # type: ignore[index]
        request = urllib.request.Request(
            base + "/signals",
            method="POST",
            data=json.dumps(
                {"id": "api-1", "type": "execute-snapshot", "data": {"data-collections": ["public.t"]}}
            ).encode(),
            headers={"Authorization": "Bearer t", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 202 and json.loads(response.read()) == {"id": "api-1"}
        bad = urllib.request.Request(
            base + "/signals", method="POST", data=b'{"type": "explode"}', headers={"Authorization": "Bearer t"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bad, timeout=10)
        assert refused.value.code == 400 and "unknown signal type" in refused.value.read().decode()

        def api_notifications(since: int = 0) -> dict[str, Any]:
            return get(f"{base}/notifications?since={since}", token="t")[1]

        wait_until(lambda: any(n["type"] == "COMPLETED" for n in api_notifications()["notifications"]), 60, "done")
        page = api_notifications()
        incremental = [n for n in page["notifications"] if n["aggregate_type"] == "Incremental Snapshot"]
        assert incremental[0]["type"] == "STARTED"  # (after the initial snapshot's SKIPPED)
        assert api_notifications(page["cursor"])["notifications"] == []  # the cursor moves past what was read

        signal_file.write_text(json.dumps({"id": "file-1", "type": "log", "data": {"message": "hello"}}) + "\n{oops\n")

        def taken() -> bool:
            try:
                return signal_file.stat().st_size == 0
            except FileNotFoundError:  # between the channel's rename and its new empty file
                return False

        wait_until(taken, 30, "the file channel took the signals")
        rejected = wait_until(
            lambda: [n for n in api_notifications()["notifications"] if n["type"] == "REJECTED"],
            30,
            "bad line reported",
        )
        assert "not valid JSON" in rejected[0]["additional_data"]["problem"]
        sunk = wait_until(lambda: instance.sink.metrics()["delivered"] >= 1, 30, "notifications through the sink")
        assert sunk
    finally:
        instance.request_stop()
        thread.join(60)


def test_signals_through_a_kafka_topic(pg_server: Any, pg_database: str, kafka_broker: Any, topic_prefix: str) -> None:
    from kafka import KafkaProducer

    dsn = pg_server.dsn(pg_database)
    setup(dsn, 100)
    signal_topic = f"{topic_prefix}.signals"
    cfg = config(
        pg_server,
        pg_database,
        **{
            "signal.enabled.channels": "kafka",
            "signal.kafka.topic": signal_topic,
            "signal.kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
        },
    )
    engine = Engine(cfg, consumer=Collector())
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    with EngineRunner(engine):
        wait_until(lambda: slot_active(pg_server, cfg["slot.name"]), 30, "streaming")
        value = {"type": "execute-snapshot", "data": {"data-collections": ["public.t"]}}
        producer.send(signal_topic, key=b"other-connector", value=json.dumps({"type": "log"}).encode())
        producer.send(signal_topic, key=b"shop", value=json.dumps(value).encode()).get(30)
        wait_until(lambda: notifications(engine, "COMPLETED"), 60, "snapshot from a Kafka signal")
    producer.close()
    assert not notifications(engine, "REJECTED")  # another connector's signal is not ours to judge
