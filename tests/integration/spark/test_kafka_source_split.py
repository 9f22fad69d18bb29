"""Spark's Kafka source splits a large batch of one topic-partition into several tasks (the job's
``maxRecordsPerPartition``), so a big batch spreads over the cores; a small one stays whole."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import NewTopic

from airflow_cdc.spark.reading import SourceOptions, _kafka_options

pytestmark = pytest.mark.integration


def _read_partitions(spark: Any, bootstrap: str, topic: str, checkpoint: Path) -> list[tuple[int, int]]:
    """(Spark partitions, records) of each micro-batch of an availableNow run over ``topic``."""
    options = _kafka_options(SourceOptions(kind="kafka", bootstrap_servers=bootstrap, topics=(topic,)))
    seen: list[tuple[int, int]] = []

    def batch(frame: Any, _: int) -> None:
        seen.append((frame.rdd.getNumPartitions(), frame.count()))

    query = (
        spark.readStream.format("kafka")
        .options(**options)
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert not query.isActive
    return seen


def test_a_large_batch_of_one_partition_is_read_by_several_tasks(spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    big, small = f"split-{uuid.uuid4().hex[:8]}", f"whole-{uuid.uuid4().hex[:8]}"
    admin = kafka_broker.admin()
    try:
        admin.create_topics([NewTopic(big, 1, 1), NewTopic(small, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, linger_ms=20, batch_size=1 << 20)
    for i in range(60_000):
        producer.send(big, key=b"%d" % i, value=b"{}")
    for i in range(100):
        producer.send(small, key=b"%d" % i, value=b"{}")
    producer.flush()
    producer.close()

    assert _read_partitions(spark, kafka_broker.bootstrap_servers, big, tmp_path / "big") == [(3, 60_000)]
    assert _read_partitions(spark, kafka_broker.bootstrap_servers, small, tmp_path / "small") == [(1, 100)]
