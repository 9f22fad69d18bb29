"""The apply job writes one table with several tasks, and a TRUNCATE mid-stream stays correct.

A table's keys spread over the job's ``lanes`` partitions (``transforms.for_lanes``), one target
transaction each. PostgreSQL shows how many transactions wrote the rows: a row's ``xmin`` is the
transaction that wrote it, so after one batch the target holds as many distinct ``xmin`` as
tasks that wrote. The strong check as everywhere: target == source row by row, after key
changes, a TRUNCATE with changes before and after it, and a replay of everything from the start.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import run
from airflow_cdc.spark.reading import SourceOptions
from tests.integration.spark.test_apply_job import (  # noqa: F401 (databases: a fixture)
    LOAD_STATEMENTS,
    assert_same,
    change_load,
    databases,
    delivered_past,
    engine_props,
    job,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def writers(dsn: str) -> int:
    """How many transactions wrote the rows the target holds."""
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("select count(distinct xmin::text) from items").fetchone()[0])  # type: ignore[index]


def around_a_truncate(dsn: str) -> None:
    """Changes the truncate discards, the TRUNCATE, then inserts (old keys among them), updates,
    deletes and a key change after it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("update items set name = 'before truncate' where mod(id, 3) = 0")
        conn.execute("delete from items where id between 100 and 120")
        conn.execute("truncate items")
        conn.execute(LOAD_STATEMENTS, (1, 600))
        conn.execute("update items set qty = -qty, name = name || ' after' where mod(id, 4) = 0")
        conn.execute("delete from items where id between 200 and 230")
        conn.execute("update items set id = 7000 where id = 8")


def test_one_table_is_written_by_every_lane_and_a_truncate_mid_stream_stays_exact(
    pg_server: Any,
    pg_database: str,
    tmp_path: Path,
    spark: Any,
    databases: tuple[str, str],  # noqa: F811
) -> None:
    source, target = databases
    topic = f"{pg_database}.public.items"
    sink = {"sink.type": "changelog", "sink.changelog.segment.max.ms": 50, "skipped.operations": "none"}
    instance = EngineInstance(engine_props(tmp_path, pg_server, pg_database, sink))
    options = SourceOptions(kind="changelog", changelog_dir=str(tmp_path / "state" / "changelog"), topics=(topic,))
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()

    def captured_all() -> None:
        with psycopg.connect(source) as conn:
            lsn = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        wait_until(lambda: delivered_past(instance, lsn), 60, "everything committed")

    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 60, "polling")
        change_load(source)  # updates, deletes, inserts, a key change
        captured_all()
        first = run(spark, job(options, target, tmp_path / "checkpoint", lanes=2))
        assert first["batches"] == 1 and first["upserted"] >= 2000
        assert_same(source, target)
        assert writers(target) == 2  # one batch of one table, written by both lanes

        around_a_truncate(source)
        captured_all()
        second = run(spark, job(options, target, tmp_path / "checkpoint", lanes=2))
        assert second["records"] > 0 and second["truncated"] > 0
        assert_same(source, target)
    finally:
        instance.request_stop()
        thread.join(60)

    # Everything again from the start, in one batch (snapshot, changes, the truncate, what
    # followed it): the position guard leaves the target as it is.
    replay = run(spark, job(options, target, tmp_path / "checkpoint-2", lanes=3))
    assert replay["records"] == first["records"] + second["records"]
    assert_same(source, target)
