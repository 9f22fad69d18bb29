"""End to end: PostgreSQL → engine → Kafka or changelog → the Spark apply job → PostgreSQL.

The strong check: after the job, the target table equals the source table row by row - after a
snapshot, a write load with updates, deletes, TOASTed values left unchanged, and after the job's
driver was killed with SIGKILL mid-run and run again.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import RESULT_MARKER, TARGET_URL_ENV, ApplyJob, run
from airflow_cdc.spark.reading import SourceOptions

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DDL = (
    "create table items (id int primary key, name text, price numeric(12,2), qty bigint, "
    "seen timestamp, at timestamptz, day date, ok boolean, raw bytea, doc text, meta jsonb)"
)
LOAD_STATEMENTS = (
    "insert into items select g, 'item ' || g, g * 1.25, g::bigint * 1000000000, "
    "timestamp '2026-01-01 10:00:00.123456' + g * interval '1 minute', "
    "timestamptz '2026-01-01 10:00:00+02' + g * interval '1 hour', date '2026-01-01' + g, mod(g, 2) = 0, "
    "decode(md5(g::text), 'hex'), case when mod(g, 10) = 0 then repeat(md5(g::text), 400) else 'small' end, "
    "jsonb_build_object('g', g) from generate_series(%s::int, %s::int) g"
)


def target_dsn(pg_server: Any, database: str) -> str:
    """The target as the job takes it: a postgresql:// URL."""
    from urllib.parse import quote

    password = f":{quote(pg_server.password, safe='')}" if getattr(pg_server, "password", None) else ""
    return (
        f"postgresql://{quote(pg_server.user, safe='')}{password}@{pg_server.host}:{pg_server.port}/{database}_target"
    )


@pytest.fixture
def databases(pg_server: Any, pg_database: str) -> Iterator[tuple[str, str]]:
    """(source dsn, target dsn): the source with 2000 rows, the target empty with the same table."""
    source = pg_server.dsn(pg_database)
    with psycopg.connect(source, autocommit=True) as conn:
        conn.execute(DDL)
        conn.execute(LOAD_STATEMENTS, (1, 2000))
        conn.execute(f"create database {pg_database}_target")
    target = target_dsn(pg_server, pg_database)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(DDL)
    yield source, target
    with psycopg.connect(source, autocommit=True) as conn:
        conn.execute(f"drop database if exists {pg_database}_target with (force)")


def change_load(dsn: str) -> None:
    """Updates (TOASTed docs left unchanged), deletes, inserts, a key change, in small transactions."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for step in range(20):
            with conn.transaction():
                conn.execute("update items set qty = qty + 1, name = name || '+' where mod(id, 20) = %s", (step,))
                conn.execute("delete from items where id = %s", (1500 + step,))
                conn.execute(LOAD_STATEMENTS, (3000 + step * 10, 3000 + step * 10 + 9))
        conn.execute("update items set id = 9999 where id = 7")
        conn.execute("update items set doc = 'rewritten' where id = 20")


def rows(dsn: str) -> dict[int, tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        cursor = conn.execute("select id, name, price, qty, seen, at, day, ok, raw, doc, meta from items order by id")
        return {row[0]: row for row in cursor}


def assert_same(source: str, target: str) -> None:
    want, got = rows(source), rows(target)
    missing = sorted(set(want) - set(got))[:5]
    extra = sorted(set(got) - set(want))[:5]
    wrong = [k for k in want if k in got and want[k] != got[k]][:3]
    assert not missing and not extra and not wrong, (
        f"missing {missing}, extra {extra}, different {[(want[k], got[k]) for k in wrong]}"
    )


def engine_props(tmp_path: Path, pg_server: Any, database: str, sink: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": f"apply-{database}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": database,
        "database.hostname": pg_server.host,
        "database.port": pg_server.port,
        "database.user": pg_server.user,
        "database.dbname": database,
        "slot.name": f"slot_{database}",
        "publication.name": f"pub_{database}",
        "table.include.list": "public.items",
        "snapshot.mode": "initial",
        "state.dir": str(tmp_path / "state"),
        "offset.flush.interval.ms": 100,
        "poll.interval.ms": 50,
        "slot.drop.on.stop": True,
        **sink,
    }


@pytest.fixture(params=["changelog", "kafka"])
def captured(
    request: pytest.FixtureRequest, tmp_path: Path, pg_server: Any, pg_database: str, databases: tuple[str, str]
) -> Iterator[tuple[SourceOptions, str, str]]:
    """The engine captured the snapshot and the change load: (job source, source dsn, target dsn)."""
    source_dsn, target = databases
    topic = f"{pg_database}.public.items"
    if request.param == "kafka":
        broker = request.getfixturevalue("kafka_broker")
        sink = {"sink.type": "kafka", "sink.kafka.producer.bootstrap.servers": broker.bootstrap_servers}
        options = SourceOptions(kind="kafka", bootstrap_servers=broker.bootstrap_servers, topics=(topic,))
    else:
        sink = {"sink.type": "changelog", "sink.changelog.segment.max.ms": 50}
        changelog = str(tmp_path / "state" / "changelog")
        options = SourceOptions(kind="changelog", changelog_dir=changelog, topics=(topic,))
    instance = EngineInstance(engine_props(tmp_path, pg_server, pg_database, sink))
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 60, "polling")
        change_load(source_dsn)
        with psycopg.connect(source_dsn) as conn:
            lsn = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        wait_until(lambda: delivered_past(instance, lsn), 60, "everything committed")
        yield options, source_dsn, target
    finally:
        instance.request_stop()
        thread.join(60)


def delivered_past(instance: EngineInstance, lsn: str) -> bool:
    return bool(instance.position(target=lsn).reached)


def job(options: SourceOptions, target: str, checkpoint: Path, **extra: Any) -> ApplyJob:
    return ApplyJob(source=options, target_url=target, checkpoint=str(checkpoint), **extra)


def test_the_job_leaves_the_target_equal_to_the_source_and_a_rerun_applies_nothing(
    captured: tuple[SourceOptions, str, str], tmp_path: Path, spark: Any
) -> None:
    options, source, target = captured
    first = run(spark, job(options, target, tmp_path / "checkpoint", lanes=2))
    assert first["records"] > 2000 and first["upserted"] >= 2000
    # Each phase of the batches timed, so the run says where its time went.
    assert set(first["phases_s"]) == {"read", "transform", "write"}
    assert all(seconds > 0 for seconds in first["phases_s"].values()), first["phases_s"]
    assert_same(source, target)
    again = run(spark, job(options, target, tmp_path / "checkpoint"))
    assert again["records"] == 0
    # A new checkpoint replays everything: the position guard makes it a no-op.
    replay = run(spark, job(options, target, tmp_path / "checkpoint-2"))
    assert replay["records"] == first["records"]
    assert_same(source, target)


def test_the_python_kafka_source_gives_the_same_target(
    pg_server: Any, pg_database: str, tmp_path: Path, spark: Any, kafka_broker: Any, databases: tuple[str, str]
) -> None:
    source, target = databases
    topic = f"{pg_database}.public.items"
    sink = {"sink.type": "kafka", "sink.kafka.producer.bootstrap.servers": kafka_broker.bootstrap_servers}
    instance = EngineInstance(engine_props(tmp_path, pg_server, pg_database, sink))
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 60, "polling")
        change_load(source)
        options = SourceOptions(
            kind="kafka-python",
            bootstrap_servers=kafka_broker.bootstrap_servers,
            topics=(topic,),
            max_records_per_batch=700,
        )
        checkpoint = tmp_path / "checkpoint"
        done: dict[str, Any] = {"records": 0}

        def caught_up() -> bool:
            done["records"] += run(spark, job(options, target, checkpoint))["records"]
            return rows(source) == rows(target)

        wait_until(caught_up, 120, "target equals source")
    finally:
        instance.request_stop()
        thread.join(60)
    assert done["records"] > 2000


def test_a_driver_killed_mid_run_then_rerun_neither_loses_nor_applies_twice(
    captured: tuple[SourceOptions, str, str], tmp_path: Path
) -> None:
    options, source, target = captured
    args = [
        sys.executable,
        "-m",
        "airflow_cdc.spark.apply",
        "--source",
        options.kind,
        "--topics",
        ",".join(options.topics),
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--max-records-per-batch",
        "500",
    ]
    if options.bootstrap_servers:
        args += ["--bootstrap-servers", options.bootstrap_servers]
    if options.changelog_dir:
        args += ["--changelog-dir", options.changelog_dir]
    env = {**os.environ, TARGET_URL_ENV: target, "CDC_SPARK_MASTER": "local[2]"}
    log = tmp_path / "driver.log"
    with open(log, "w") as out:
        driver = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: "applied batch 1:" in log.read_text() or driver.poll() is not None, 180, "two batches")
            assert driver.poll() is None, log.read_text()[-3000:]
            os.kill(driver.pid, signal.SIGKILL)  # mid-run: batch 2 is under way or about to be
        finally:
            driver.wait(30)
    partial = rows(target)
    assert len(partial) > 0
    rerun = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    (tmp_path / "rerun.log").write_text(rerun.stdout + rerun.stderr)
    assert rerun.returncode == 0, f"rerun failed, see {tmp_path / 'rerun.log'}: " + rerun.stderr[-1500:]
    result = json.loads(
        next(line for line in rerun.stdout.splitlines() if line.startswith(RESULT_MARKER))[len(RESULT_MARKER) :]
    )
    assert result["records"] > 0
    assert_same(source, target)


LAKE_COLUMNS = (
    "id int, name string, price decimal(12,2), qty long, seen timestamp_ntz, at timestamp, day date, "
    "ok boolean, raw binary, doc string, meta string"
)


def lake_rows(spark: Any, kind: str, path: Path) -> dict[int, tuple[Any, ...]]:
    frame = (
        spark.read.format("delta").load(str(path))
        if kind == "delta"
        else spark.read.parquet(str(path / (path / "_current").read_text()))
    )
    out = {}
    for row in frame.collect():
        at = row.at.astimezone(dt.UTC) if row.at.tzinfo else row.at.replace(tzinfo=dt.UTC)
        out[row.id] = (
            row.id,
            row.name,
            row.price,
            row.qty,
            row.seen,
            at,
            row.day,
            row.ok,
            bytes(row.raw),
            row.doc,
            json.loads(row.meta),
        )
    return out


def source_rows(dsn: str) -> dict[int, tuple[Any, ...]]:
    return {k: (*v[:5], v[5].astimezone(dt.UTC), v[6], v[7], bytes(v[8]), v[9], v[10]) for k, v in rows(dsn).items()}


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_delta_and_parquet_targets_equal_the_source(
    captured: tuple[SourceOptions, str, str], tmp_path: Path, spark: Any, kind: str
) -> None:
    from airflow_cdc.spark.targets.lake import create_table

    options, source, _ = captured
    url = f"{kind}:{tmp_path / 'lake'}"
    path = create_table(spark, url, "public.items", LAKE_COLUMNS)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    first = run(spark, job(options, url, tmp_path / "checkpoint", max_duration=None))
    assert first["records"] > 2000
    want, got = source_rows(source), lake_rows(spark, kind, path)
    assert set(got) == set(want)
    assert [k for k in want if got[k] != want[k]][:3] == [], [(want[k], got[k]) for k in want if got[k] != want[k]][:2]
    # Replaying every change from a new checkpoint changes nothing.
    run(spark, job(options, url, tmp_path / "checkpoint-2"))
    assert lake_rows(spark, kind, path) == got


def test_continuous_mode_applies_what_arrives_and_ends_after_max_duration(
    captured: tuple[SourceOptions, str, str], tmp_path: Path, spark: Any
) -> None:
    import time

    options, source, target = captured
    started = time.monotonic()
    result = run(
        spark,
        job(
            options, target, tmp_path / "checkpoint", trigger="continuous", max_duration=12, processing_time="1 second"
        ),
    )
    assert 12 <= time.monotonic() - started < 60
    assert result["records"] > 2000 and result["batches"] >= 1
    assert_same(source, target)
