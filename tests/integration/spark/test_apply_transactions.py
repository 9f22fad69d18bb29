"""The apply job's transaction-consistent mode (ADR 0023) against real services.

Multi-table transactions on a PostgreSQL source (transfers between two account tables, orders
with their lines; ``tx_support.py``), captured with Debezium's transaction metadata, applied by the
job into a PostgreSQL and a MariaDB target while a reader checks the invariants on the target the
whole time: 0 violations with ``consistency=transaction``, violations with ``consistency=key`` (so
the check can fail), and target == source row by row afterwards; also across a SIGKILL of the
driver and a rerun.

The feed is a module-scoped fixture parameter, captured once and read by every test: ``connect``
(Debezium's PostgreSQL connector on Kafka Connect) and ``engine`` (our embedded engine, Kafka
sink), both with ``provide.transaction.metadata``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import RESULT_MARKER, TARGET_URL_ENV, ApplyJob, run
from airflow_cdc.spark.reading import SourceOptions
from tests.integration.spark.tx_support import DDL, TABLES, Reader, image, load, mariadb_snapshot, pg_snapshot

#: Connect's start, the load, and a few Spark batches of several small jobs each on 2 cores.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

#: Source transactions in the load; with ``BATCH`` records per micro-batch the job makes many
#: batches, most of which end inside a transaction.
TRANSACTIONS = 100
BATCH = 150


@dataclass
class Feed:
    """Captured changes of the load: the job's source and the source database."""

    options: SourceOptions
    source_dsn: str
    #: True once every change of the load is on the topics.
    delivered: Callable[[], bool]


def _source(pg_server: Any, database: str) -> str:
    dsn = pg_server.dsn(database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in DDL:
            conn.execute(statement)
    return dsn


def _end_count(bootstrap: str, topic: str) -> int:
    """Records on the (one-partition) transaction topic."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        if not consumer.partitions_for_topic(topic):
            return 0
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def _connect_feed(
    request: pytest.FixtureRequest, pg_server: Any, database: str, prefix: str, slot: str
) -> Iterator[None]:
    """Debezium's PostgreSQL connector on the test Connect worker."""
    from airflow_cdc.kafka_connect.client import ConnectClient

    worker = request.getfixturevalue("connect_worker")
    config = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "topic.prefix": prefix,
        "database.hostname": pg_server.host,
        "database.port": str(pg_server.port),
        "database.user": pg_server.user,
        "database.dbname": database,
        "slot.name": slot,
        "publication.name": f"pub_{slot}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": ",".join(f"public.{t}" for t in TABLES),
        "snapshot.mode": "no_data",
        "provide.transaction.metadata": "true",
        "slot.drop.on.stop": "true",
    }
    if pg_server.password:
        config["database.password"] = pg_server.password
    with ConnectClient(worker.url) as connect:
        connect.create(f"{prefix}-tx", config)
        yield
        connect.delete(f"{prefix}-tx")


def _engine_feed(pg_server: Any, database: str, prefix: str, slot: str, bootstrap: str, state: Path) -> Iterator[None]:
    """Our embedded engine, the same settings, its Kafka sink."""
    from airflow_cdc.engine.server.instance import EngineInstance

    instance = EngineInstance(
        {
            "name": f"{prefix}-tx",
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "topic.prefix": prefix,
            "database.hostname": pg_server.host,
            "database.port": pg_server.port,
            "database.user": pg_server.user,
            **({"database.password": pg_server.password} if pg_server.password else {}),
            "database.dbname": database,
            "slot.name": slot,
            "publication.name": f"pub_{slot}",
            "publication.autocreate.mode": "filtered",
            "table.include.list": ",".join(f"public.{t}" for t in TABLES),
            "snapshot.mode": "no_data",
            "provide.transaction.metadata": True,
            "slot.drop.on.stop": True,
            "state.dir": str(state),
            "api.enabled": False,
            "offset.flush.interval.ms": 200,
            "sink.type": "kafka",
            "sink.kafka.producer.bootstrap.servers": bootstrap,
        }
    )
    thread = threading.Thread(target=instance.run, name="tx-feed-engine", daemon=True)
    thread.start()
    try:
        yield
    finally:
        instance.request_stop()
        thread.join(60)


@pytest.fixture(scope="module", params=["connect", "engine"])
def feed(request: pytest.FixtureRequest, pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Feed]:
    """The load, captured once per module by ``request.param`` with ``provide.transaction.metadata``:
    Debezium on Kafka Connect, or our engine. Each test applies it from the topics afresh."""
    database = pg_server.create_database()
    dsn = _source(pg_server, database)
    prefix = f"t{uuid.uuid4().hex[:12]}"
    broker = request.getfixturevalue("kafka_broker")
    slot = f"slot_{prefix}"
    if request.param == "connect":
        capture = _connect_feed(request, pg_server, database, prefix, slot)
    else:
        state = tmp_path_factory.mktemp("tx-engine")
        capture = _engine_feed(pg_server, database, prefix, slot, broker.bootstrap_servers, state)
    next(capture)

    def slot_ready() -> bool:
        with psycopg.connect(dsn) as conn:
            found = conn.execute("select 1 from pg_replication_slots where slot_name = %s", (slot,))
            return found.fetchone() is not None

    try:
        wait_until(slot_ready, 120, "the capturing side's slot")
        load(dsn, TRANSACTIONS)
        topics = tuple(f"{prefix}.public.{t}" for t in TABLES)
        options = SourceOptions(
            kind="kafka", bootstrap_servers=broker.bootstrap_servers, topics=topics, max_records_per_batch=BATCH
        )
        # BEGIN and END per transaction: the accounts' one and the load's.
        records = 2 * (TRANSACTIONS + 1)
        yield Feed(options, dsn, lambda: _end_count(broker.bootstrap_servers, f"{prefix}.transaction") >= records)
    finally:
        next(capture, None)
        pg_server.drop_database(database)


@dataclass
class Target:
    kind: str
    url: str
    table_map: dict[str, str]
    snapshot: Callable[[], tuple[Any, ...]]
    fetch: Callable[[str], list[tuple[Any, ...]]]


@pytest.fixture(params=["postgresql", "mariadb"])
def target(request: pytest.FixtureRequest, pg_server: Any, pg_database: str) -> Iterator[Target]:
    if request.param == "postgresql":
        database = f"{pg_database}_target"
        with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
            conn.execute(f"create database {database}")
        dsn = pg_server.dsn(database)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in DDL:
                conn.execute(statement)
        auth = quote(pg_server.user) + (":" + quote(pg_server.password) if pg_server.password else "")
        url = f"postgresql://{auth}@{pg_server.host}:{pg_server.port}/{database}"

        def fetch(sql: str) -> list[tuple[Any, ...]]:
            with psycopg.connect(dsn) as conn:
                return conn.execute(sql).fetchall()

        yield Target("postgresql", url, {}, pg_snapshot(dsn), fetch)
        with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
            conn.execute(f"drop database if exists {database} with (force)")
        return
    server = request.getfixturevalue("mariadb_server")
    database = request.getfixturevalue("mariadb_database")
    with server.connect(database=database) as conn, conn.cursor() as cur:
        for statement in DDL:
            cur.execute(statement)
    url = f"mysql://{quote(server.user)}:{quote(server.password)}@{server.host}:{server.port}/{database}"

    def fetch_maria(sql: str) -> list[tuple[Any, ...]]:
        with server.connect(database=database) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())

    yield Target("mariadb", url, {f"public.{t}": t for t in TABLES}, mariadb_snapshot(server, database), fetch_maria)


def source_image(dsn: str) -> dict[str, list[tuple[int, ...]]]:
    def fetch(sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn) as conn:
            return conn.execute(sql).fetchall()

    return image(fetch)


def apply_until_equal(spark: Any, feed: Feed, target: Target, job: ApplyJob) -> list[dict[str, Any]]:
    """Runs the job (available-now) until the target equals the source; the results."""
    wait_until(feed.delivered, 180, "the load on the topics")
    want = source_image(feed.source_dsn)
    results: list[dict[str, Any]] = []

    def caught_up() -> bool:
        results.append(run(spark, job))
        return image(target.fetch) == want

    wait_until(caught_up, 300, "target equals source")
    return results


def a_job(feed: Feed, target: Target, checkpoint: Path, consistency: str) -> ApplyJob:
    return ApplyJob(
        source=feed.options,
        target_url=target.url,
        checkpoint=str(checkpoint),
        table_map=target.table_map,
        lanes=4,
        consistency=consistency,
    )


def test_a_reader_never_sees_half_a_source_transaction_in_transaction_mode(
    feed: Feed, target: Target, spark: Any, tmp_path: Path
) -> None:
    reader = Reader(target.snapshot).start()
    try:
        results = apply_until_equal(spark, feed, target, a_job(feed, target, tmp_path / "checkpoint", "transaction"))
    finally:
        reader.stop()
    assert sum(r["batches"] for r in results) >= 3  # several batches, cut inside transactions
    assert reader.checks > 50, reader
    assert reader.violations == 0, reader.examples


def test_key_mode_shows_half_transactions_to_the_same_reader(
    feed: Feed, target: Target, spark: Any, tmp_path: Path
) -> None:
    """The check above can fail: without the mode, the reader sees them."""
    reader = Reader(target.snapshot).start()
    try:
        apply_until_equal(spark, feed, target, a_job(feed, target, tmp_path / "checkpoint", "key"))
    finally:
        reader.stop()
    assert reader.violations > 0, f"no violation in {reader.checks} checks"


# The crash and the lake target do not depend on who captured: one feed (ours) is enough.
@pytest.mark.parametrize("feed", ["engine"], indirect=True)
def test_a_driver_killed_mid_run_then_rerun_keeps_transactions_whole(
    feed: Feed, target: Target, tmp_path: Path
) -> None:
    wait_until(feed.delivered, 180, "the load on the topics")
    options = feed.options
    args = [
        sys.executable,
        "-m",
        "airflow_cdc.spark.apply",
        *("--source", options.kind, "--topics", ",".join(options.topics)),
        *("--bootstrap-servers", str(options.bootstrap_servers), "--checkpoint", str(tmp_path / "checkpoint")),
        *("--max-records-per-batch", str(BATCH), "--consistency", "transaction", "--lanes", "4"),
        *(arg for source, table in target.table_map.items() for arg in ("--table-map", f"{source}={table}")),
    ]
    env = {**os.environ, TARGET_URL_ENV: target.url, "CDC_SPARK_MASTER": "local[2]"}
    log = tmp_path / "driver.log"
    reader = Reader(target.snapshot).start()
    try:
        with open(log, "w") as out:
            driver = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                wait_until(lambda: "applied batch 1:" in log.read_text() or driver.poll() is not None, 240, "batches")
                assert driver.poll() is None, log.read_text()[-3000:]
                os.kill(driver.pid, signal.SIGKILL)
            finally:
                driver.wait(60)
        rerun = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        (tmp_path / "rerun.log").write_text(rerun.stdout + rerun.stderr)
        assert rerun.returncode == 0, rerun.stderr[-2000:]
    finally:
        reader.stop()
    result = json.loads(
        next(line for line in rerun.stdout.splitlines() if line.startswith(RESULT_MARKER))[len(RESULT_MARKER) :]
    )
    assert result["records"] > 0
    assert image(target.fetch) == source_image(feed.source_dsn)
    assert reader.checks > 20 and reader.violations == 0, reader.examples


LAKE_COLUMNS = {
    "acct_a": "id int, balance long",
    "acct_b": "id int, balance long",
    "orders": "id int, n_lines int",
    "order_lines": "order_id int, line int, qty int",
}


@pytest.mark.parametrize("feed", ["engine"], indirect=True)
def test_a_delta_target_applies_only_complete_transactions_and_ends_equal_to_the_source(
    feed: Feed, spark: Any, tmp_path: Path
) -> None:
    """Delta commits table by table (the job says so), but incomplete transactions still wait:
    the batches end held records, none is lost, and the tables end equal to the source."""
    from airflow_cdc.spark.targets.lake import create_table

    url = f"delta:{tmp_path / 'lake'}"
    paths = {t: create_table(spark, url, f"public.{t}", LAKE_COLUMNS[t]) for t in TABLES}

    def fetch(sql: str) -> list[tuple[Any, ...]]:
        table = next(t for t in sorted(TABLES, key=len, reverse=True) if f" from {t}" in sql)
        columns = sql.split("select ", 1)[1].split(" from ", 1)[0]
        frame = spark.read.format("delta").load(str(paths[table]))
        return [tuple(r) for r in frame.selectExpr(*columns.split(", ")).collect()]

    lake = Target("delta", url, {}, lambda: (), fetch)
    results = apply_until_equal(spark, feed, lake, a_job(feed, lake, tmp_path / "checkpoint", "transaction"))
    assert sum(r["batches"] for r in results) >= 3
    held = json.loads(next((tmp_path / "lake" / "_cdc_pending").glob("*.json")).read_text())
    assert held["held"] == []  # everything complete in the end, nothing left behind
