"""The transaction-consistent mode's stall stop and its report of orphaned state (ADR 0023),
against real services: the captured load of ``test_apply_transactions.py`` on Kafka (our engine
with transaction metadata), a PostgreSQL target, and the engine's changelog format read by Spark.

* A job started past the first events of a multi-event transaction (its Kafka offset moved past
  them) holds it back forever, and everything after it: it must stop, naming the transaction and
  what it lacks, within ``transaction_stall_batches``; a rerun stops again (the count is kept).
* A healthy stream whose ENDs arrive many batches before their events must not stop, even with
  the tightest bound.
* A new streaming query on the same target and transaction topic is told of another query's rows,
  with the statement that deletes them (and the statement works).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import ApplyJob, run
from airflow_cdc.spark.reading import SourceOptions
from tests.integration.spark import test_apply_transactions as tx_tests
from tests.integration.spark.test_apply_transactions import Feed, Target
from tests.integration.spark.tx_support import ACCOUNTS, BALANCE, image

# The captured load and the targets of the mode's main tests (module-scoped: captured again here).
feed, target = tx_tests.feed, tx_tests.target

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def _first_message(bootstrap: str, topic: str) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = consumer.poll(timeout_ms=10_000).get(tp, [])
        value = json.loads(records[0].value)
        return dict(value.get("payload", value))
    finally:
        consumer.close()


def _offsets_past_first_line(feed: Feed) -> str:
    """startingOffsets: earliest everywhere but ``order_lines``, whose first event (the first
    order's first line) the job never reads - as if its Kafka offset had been moved."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=feed.options.bootstrap_servers)
    try:
        prefix = feed.options.topics[0].split(".")[0]
        offsets: dict[str, dict[str, int]] = {}
        for topic in (*feed.options.topics, f"{prefix}.transaction"):
            partitions = sorted(consumer.partitions_for_topic(topic) or ())
            assert partitions == [0], f"{topic}: the test moves partition 0's offset only, has {partitions}"
            offsets[topic] = {"0": 1 if topic.endswith(".order_lines") else -2}
        return json.dumps(offsets)
    finally:
        consumer.close()


def _stalled_job(feed: Feed, target: Target, checkpoint: Path, bound: int) -> ApplyJob:
    options = SourceOptions(
        kind="kafka",
        bootstrap_servers=feed.options.bootstrap_servers,
        topics=feed.options.topics,
        max_records_per_batch=feed.options.max_records_per_batch,
        starting_offsets=_offsets_past_first_line(feed),
    )
    return ApplyJob(
        source=options,
        target_url=target.url,
        checkpoint=str(checkpoint),
        table_map=target.table_map,
        consistency="transaction",
        transaction_stall_batches=bound,
    )


@pytest.mark.parametrize("feed", ["engine"], indirect=True)
@pytest.mark.parametrize("target", ["postgresql"], indirect=True)
def test_a_job_started_past_a_transactions_first_event_stops_naming_it(
    feed: Feed, target: Target, spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wait_until(feed.delivered, 180, "the load on the topics")
    line = _first_message(str(feed.options.bootstrap_servers), next(t for t in feed.options.topics if "order_l" in t))
    xid = line["transaction"]["id"].split(":")[0]
    bound = 2
    job = _stalled_job(feed, target, tmp_path / "checkpoint", bound)
    with pytest.raises(Exception) as stopped:
        run(spark, job)
    text = str(stopped.value)
    assert f"source transaction {xid} on " in text, text[-3000:]
    lacks = re.search(r"public\.order_lines (\d+) of (\d+)", text)
    assert lacks and int(lacks[1]) == int(lacks[2]) - 1, text[-3000:]
    assert f"for {bound} batches" in text and "earliest" in text and "consistency=key" in text, text[-3000:]
    # What committed before it applied, nothing after it: the accounts only.
    accounts = [(i, BALANCE) for i in range(1, ACCOUNTS + 1)]
    assert image(target.fetch) == {"acct_a": accounts, "acct_b": accounts, "orders": [], "order_lines": []}

    # A rerun (available-now ends; the count is in the target's state) stops again at once.
    with pytest.raises(Exception) as again:
        run(spark, job)
    assert f"source transaction {xid} on " in str(again.value)

    # A new checkpoint (a new streaming query) is told of the old one's rows on the same topic.
    old = target.fetch("select distinct query_id from _cdc_pending")
    assert len(old) == 1
    caplog.set_level(logging.WARNING)
    fresh = ApplyJob(
        source=feed.options,
        target_url=target.url,
        checkpoint=str(tmp_path / "checkpoint-new"),
        table_map=target.table_map,
        consistency="transaction",
    )
    run(spark, fresh)
    told = [r.getMessage() for r in caplog.records if "other streaming queries" in r.getMessage()]
    assert told and old[0][0] in told[0], caplog.text[-2000:]
    statement = told[0].split("If no running job uses them: ", 1)[1]
    with psycopg.connect(target.url) as conn:
        conn.execute(statement)
    for table in ("_cdc_pending", "_cdc_applied_batch", "_cdc_query"):
        assert target.fetch(f"select count(*) from {table} where query_id = '{old[0][0]}'") == [(0,)]
    assert target.fetch("select count(*) from _cdc_query") == [(1,)]  # the new query's row stays


def _changelog(root: Path, transactions: int) -> Any:
    """Debezium PostgreSQL events with transaction metadata as the engine's changelog, every
    transaction topic segment older than every table segment: the file source reads oldest
    first, so the ENDs arrive batches before their events."""
    import importlib

    bench = importlib.import_module("bench.apply_consistency")
    generated = bench.events(transactions)
    generated.write(root, segment=500)
    stamp = 1_700_000_000
    for n, path in enumerate(sorted(root.glob("*.transaction/*.jsonl"))):
        os.utime(path, (stamp + n, stamp + n))
    for n, path in enumerate(sorted(p for p in root.glob("*/*.jsonl") if ".transaction" not in str(p.parent))):
        os.utime(path, (stamp + 1000 + n, stamp + 1000 + n))
    return generated


def test_ends_that_arrive_batches_before_their_events_do_not_stop_the_job(
    spark: Any, pg_server: Any, pg_database: str, tmp_path: Path
) -> None:
    import importlib

    bench = importlib.import_module("bench.apply_consistency")
    generated = _changelog(tmp_path / "changelog", 600)
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in bench.DDL:
            conn.execute(statement)
    source = SourceOptions(
        kind="changelog",
        changelog_dir=str(tmp_path / "changelog"),
        topics=tuple(f"bench.public.{t}" for t in bench.TABLES),
        max_records_per_batch=1000,  # one segment (file) a batch: reading.py
    )
    job = ApplyJob(
        source=source,
        target_url=_url(pg_server, pg_database),
        checkpoint=str(tmp_path / "checkpoint"),
        consistency="transaction",
        transaction_stall_batches=1,  # the tightest bound
    )
    result = run(spark, job)
    tx_segments = len(list((tmp_path / "changelog").glob("*.transaction/*.jsonl")))
    assert result["batches"] > tx_segments + 2  # the ENDs came alone, several batches ahead
    with psycopg.connect(dsn) as conn:
        for table in bench.TABLES:
            columns = "order_id, line, qty" if table == "order_lines" else "*"
            rows = conn.execute(f"select {columns} from {table}").fetchall()
            width = 2 if table == "order_lines" else 1
            assert {tuple(r[:width]): tuple(r[: width + 1]) for r in rows} == generated.rows[table], table


def _url(pg_server: Any, database: str) -> str:
    from urllib.parse import quote

    auth = quote(pg_server.user) + (":" + quote(pg_server.password) if pg_server.password else "")
    return f"postgresql://{auth}@{pg_server.host}:{pg_server.port}/{database}"
