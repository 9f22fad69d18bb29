"""The apply job's availableNow run over the Python Kafka source with a batch limit: every record
there when the run starts, in batches of at most ``maxOffsetsPerTrigger``, then the run ends - as
Spark's own Kafka source does (``prepareForTriggerAvailableNow``). Spark 4.1 alone runs a Python
source under availableNow as one batch (``test_kafka_python_source``); the job drains instead
(``reading.available_now_end`` / ``reading.drain``, what ``apply.run`` calls)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.spark.reading import SourceOptions, available_now_end, drain, read_stream
from tests.integration.spark.test_kafka_python_source import (
    Batches,
    assert_exactly,
    changes,
    create_topic,
    produce,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def run_like_the_job(spark: Any, options: SourceOptions, checkpoint: Path, later: Any = None) -> Batches:
    """What ``apply.run`` does for an availableNow run; ``later`` runs between the moment the run
    fixed its end and its first batch (records produced then belong to the next run)."""
    sink = Batches()
    end = available_now_end(options)
    assert end is not None
    if later is not None:
        later()
    writer = read_stream(spark, options, end).writeStream.foreachBatch(sink)
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start()
    try:
        drain(query, end)
    finally:
        query.stop()
    assert query.exception() is None
    return sink


def test_available_now_with_a_limit_reads_everything_there_at_start_in_batches(
    spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    topic = f"{kafka_topic_prefix}.public.t"
    create_topic(kafka_broker, topic, partitions=3)
    expected = produce(kafka_broker, topic, changes(1000))
    options = SourceOptions(
        kind="kafka-python",
        bootstrap_servers=kafka_broker.bootstrap_servers,
        topics=(topic,),
        max_records_per_batch=400,
    )
    after: list[Any] = []
    first = run_like_the_job(
        spark,
        options,
        tmp_path / "checkpoint",
        lambda: after.extend(produce(kafka_broker, topic, changes(50, 3, 1000))),
    )
    assert first.sizes() == [400, 400, 200]
    assert_exactly(first.rows, expected)
    # The records produced after the run started are the next run's, and then nothing is left.
    second = run_like_the_job(spark, options, tmp_path / "checkpoint")
    assert_exactly(second.rows, after)
    third = run_like_the_job(spark, options, tmp_path / "checkpoint")
    assert third.rows == []


def test_other_sources_and_runs_without_a_limit_use_sparks_own_available_now() -> None:
    assert (
        available_now_end(SourceOptions(kind="kafka", bootstrap_servers="x:1", topics=("t",), max_records_per_batch=5))
        is None
    )
    assert available_now_end(SourceOptions(kind="kafka-python", bootstrap_servers="x:1", topics=("t",))) is None


def test_the_job_applies_everything_there_at_start_in_batches(
    spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    """Through ``apply.run`` into a Parquet target: 1000 inserts, 400 per batch. Without the
    drain, Spark ran one batch of 400 and the run ended with 600 left."""
    from airflow_cdc.spark.apply import ApplyJob, run
    from airflow_cdc.spark.targets.lake import create_table

    topic = f"{kafka_topic_prefix}.public.items"
    create_topic(kafka_broker, topic, partitions=3)
    source = {"schema": "public", "table": "items"}
    records = [(i % 3, json.dumps({"id": i}).encode(), json.dumps(_insert(i, source)).encode()) for i in range(1, 1001)]
    produce(kafka_broker, topic, records)
    url = f"parquet:{tmp_path / 'lake'}"
    path = create_table(spark, url, "public.items", "id int, name string")
    options = SourceOptions(
        kind="kafka-python",
        bootstrap_servers=kafka_broker.bootstrap_servers,
        topics=(topic,),
        max_records_per_batch=400,
    )
    result = run(spark, ApplyJob(source=options, target_url=url, checkpoint=str(tmp_path / "checkpoint")))
    assert (result["batches"], result["records"]) == (3, 1000)
    rows = spark.read.parquet(str(path / (path / "_current").read_text().strip())).select("id", "name").collect()
    assert sorted((r.id, r.name) for r in rows) == [(i, f"item {i}") for i in range(1, 1001)]


def _insert(i: int, source: dict[str, Any]) -> dict[str, Any]:
    return {"before": None, "after": {"id": i, "name": f"item {i}"}, "op": "c", "source": {**source, "lsn": i}}
