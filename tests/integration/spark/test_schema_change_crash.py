"""A driver killed with SIGKILL between a schema change it made on the target and the batch that
needed it, then run again: the rerun finds the column there, applies the batch, and the target
equals the source - including the default the source's existing rows got from ``ADD COLUMN``
(on MariaDB, whose DDL commits at once, the column and its default come in one statement)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import TARGET_URL_ENV, ApplyJob, run
from airflow_cdc.spark.reading import SourceOptions
from tests.integration.spark.evolution_support import Side, assert_same

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def has_column(side: Side, name: str) -> bool:
    table = side.table_names.get("public.t", "public.t")
    schema, bare = table.split(".")
    with side._connect() as conn:
        query = (
            "select 1 from information_schema.columns where table_schema = %s and table_name = %s and column_name = %s"
        )
        if side.kind == "postgresql":
            return conn.execute(query, (schema, bare, name)).fetchone() is not None
        with conn.cursor() as cur:
            cur.execute(query, (schema, bare, name))
            return cur.fetchone() is not None


def test_a_driver_killed_after_the_ddl_then_rerun_leaves_the_target_equal(
    tmp_path: Path, pg_server: Any, pg_database: str, kafka_broker: Any, spark: Any, empty_target: tuple[str, Side]
) -> None:
    url, side = empty_target
    if side.kind == "mariadb":  # into the target's database (the fixture's "" entry names it)
        side.table_names["public.t"] = f"{side.table_names.pop('')}.t"
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table t (id int primary key, n int not null)")
        conn.execute("insert into t select g, g from generate_series(1, 2000) g")
    prefix = f"kc{uuid.uuid4().hex[:8]}"
    instance = EngineInstance(
        {
            "name": f"crash-{pg_database}",
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "topic.prefix": prefix,
            "database.hostname": pg_server.host,
            "database.port": pg_server.port,
            "database.user": pg_server.user,
            "database.dbname": pg_database,
            "slot.name": f"slot_{pg_database}",
            "publication.name": f"pub_{pg_database}",
            "table.include.list": "public.t",
            "state.dir": str(tmp_path / "state"),
            "offset.flush.interval.ms": 100,
            "poll.interval.ms": 50,
            "slot.drop.on.stop": True,
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "sink.type": "kafka",
            "sink.kafka.producer.bootstrap.servers": kafka_broker.bootstrap_servers,
        }
    )
    args = [
        sys.executable,
        "-m",
        "airflow_cdc.spark.apply",
        "--source",
        "kafka",
        "--bootstrap-servers",
        kafka_broker.bootstrap_servers,
        "--topics",
        f"{prefix}.public.t",
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        *(f"--table-map={k}={v}" for k, v in side.table_names.items()),
    ]
    env = {**os.environ, TARGET_URL_ENV: url, "CDC_SPARK_MASTER": "local[2]"}

    def captured() -> None:
        with psycopg.connect(dsn) as conn:
            lsn = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        wait_until(lambda: instance.position(target=lsn).reached, 60, "captured")

    def run_to_the_end(log: Path) -> None:
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        log.write_text(done.stdout + done.stderr)
        assert done.returncode == 0, f"the job failed, see {log}: " + done.stderr[-1500:]

    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 60, "polling")
        captured()
        # The first run in this process (the test's SparkSession): it creates the target table.
        job = ApplyJob(
            source=SourceOptions(
                kind="kafka", bootstrap_servers=kafka_broker.bootstrap_servers, topics=(f"{prefix}.public.t",)
            ),
            target_url=url,
            checkpoint=str(tmp_path / "checkpoint"),
            table_map=dict(side.table_names),
        )
        run(spark, job)
        assert_same(Side("postgresql", lambda: psycopg.connect(dsn), {}), side, "public.t", "the first run")

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("alter table t add column c text not null default 'dflt'")
            conn.execute("update t set n = -n, c = 'changed' where id % 3 = 0")
            conn.execute("insert into t (id, n) select g, g from generate_series(5001, 5100) g")
        captured()
        log = tmp_path / "killed.log"
        with open(log, "w") as out:
            driver = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                wait_until(lambda: has_column(side, "c") or driver.poll() is not None, 180, "the DDL on the target")
                assert driver.poll() is None, log.read_text()[-3000:]
                os.kill(driver.pid, signal.SIGKILL)
            finally:
                driver.wait(30)
        # Killed between the schema change and the batch that needed it: the column is there,
        # the batch's changes are not.
        assert has_column(side, "c")
        applied = side.rows("public.t", ["id", "n"])
        assert all(row[1] > 0 for row in applied.values()), "the batch was written before the kill"

        run_to_the_end(tmp_path / "rerun.log")
        assert_same(Side("postgresql", lambda: psycopg.connect(dsn), {}), side, "public.t", "the rerun")
    finally:
        instance.request_stop()
        thread.join(60)
