"""The apply job's three sources, each yielding the raw frame (``frames.RAW_SCHEMA``).

- ``kafka``: Spark's own Kafka source (spark-sql-kafka-0-10, the jars ``scripts/setup`` puts in
  ``.jars/spark``): the fast path, what a cluster runs. Its consumer asks the broker for the
  partition's earliest and latest offsets after every poll, so polls are made large here
  (``_KAFKA_READ``).
- ``kafka-python``: the Python streaming data source on kafka-python, for a Spark without that
  jar (``sources/kafka_python/``).
- ``changelog``: the engine's changelog directory through Spark's JSON file source; a topic's
  segments are ``<dir>/<topic>/*.jsonl`` and ``seq`` orders them, so it stands in for the offset.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.kafka_settings import java_client_settings

SOURCES = ("kafka", "kafka-python", "changelog")
_CHANGELOG_LINE = "topic string, key string, value string, seq long, ts_ms long"
#: Consumer settings of Spark's Kafka source (a ``kafka.*`` setting of the job wins). After each
#: poll its consumer makes two ListOffsets round trips (``InternalKafkaConsumer.fetch`` →
#: ``getAvailableOffsetRange``), and Kafka's defaults poll 500 records out of 1 MiB fetches: ~160
#: polls for 66,000 engine events of ~700 bytes, and 2.2-2.7 s of a task's 3-4.5 s in the consumer.
#: With these a poll hands over a whole 4 MiB fetch (~6,000 such events; 13 polls, 0.9-1.0 s).
#: Memory stays bounded per consumer by the fetch size.
_KAFKA_READ = {"kafka.max.poll.records": "10000", "kafka.max.partition.fetch.bytes": str(4 << 20)}
#: Spark's Kafka source reads a batch as one task per topic-partition: a large batch of 3
#: partitions on 2 cores runs two tasks, then one alone, and every step after the read keeps
#: that split. Ranges of more records are cut into tasks of at most this many (Spark's
#: ``maxRecordsPerPartition``), so a large batch spreads evenly; a small one is unchanged.
_KAFKA_SPLIT = {"maxRecordsPerPartition": "25000"}


@dataclass(frozen=True)
class SourceOptions:
    """Where the changes come from; names follow Spark's Kafka source where they overlap."""

    kind: str = "kafka"
    bootstrap_servers: str | None = None
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    changelog_dir: str | None = None
    starting_offsets: str = "earliest"
    max_records_per_batch: int | None = None
    #: Further ``kafka.*`` client settings (security.protocol, sasl.*, ssl.*, ...), by the names
    #: the engine's sink takes (Java's or librdkafka's): both Kafka sources read them.
    kafka: Mapping[str, str] = field(default_factory=dict)

    def check(self) -> None:
        problems = []
        if self.kind not in SOURCES:
            problems.append(ConfigProblem("--source", f"unknown source {self.kind!r}", f"one of {', '.join(SOURCES)}"))
        elif self.kind == "changelog":
            if not self.changelog_dir or not self.topics:
                problems.append(
                    ConfigProblem("--changelog-dir", "the changelog source needs a directory and topics", "give both")
                )
        elif not self.bootstrap_servers:
            problems.append(ConfigProblem("--bootstrap-servers", f"the {self.kind} source needs it", "the brokers"))
        if self.kind != "changelog" and bool(self.topics) == bool(self.topic_pattern):
            problems.append(
                ConfigProblem("--topics", "give topics or a pattern", "exactly one of --topics, --topic-pattern")
            )
        if problems:
            raise ConfigError(problems)


def read_stream(spark: SparkSession, options: SourceOptions, ending: dict[str, Any] | None = None) -> DataFrame:
    """A streaming raw frame from the chosen source; ``ending``: the Python Kafka source's
    ``endingOffsets`` (``available_now_end``)."""
    options.check()
    if options.kind == "changelog":
        return _changelog(spark, options)
    return _kafka(spark, options, ending)


def _kafka_options(options: SourceOptions) -> dict[str, str]:
    out = {} if options.kind == "kafka-python" else {"failOnDataLoss": "true", **_KAFKA_READ, **_KAFKA_SPLIT}
    out["kafka.bootstrap.servers"] = str(options.bootstrap_servers)
    if options.topics:
        out["subscribe"] = ",".join(options.topics)
    else:
        out["subscribePattern"] = str(options.topic_pattern)
    out["startingOffsets"] = options.starting_offsets
    if options.max_records_per_batch:
        out["maxOffsetsPerTrigger"] = str(options.max_records_per_batch)
    client = {key.removeprefix("kafka."): value for key, value in options.kafka.items()}
    if options.kind == "kafka":  # the JVM client: librdkafka's SASL and CA names in Java's
        client = java_client_settings(client)
    return {**out, **{f"kafka.{key}": value for key, value in client.items()}}


def _kafka(spark: SparkSession, options: SourceOptions, ending: dict[str, Any] | None = None) -> DataFrame:
    if options.kind == "kafka-python":
        from airflow_cdc.spark.sources.kafka_python import register

        register(spark)
        reader = spark.readStream.format("cdc_kafka")
    else:
        reader = spark.readStream.format("kafka")
    reader = reader.options(**_kafka_options(options))
    if ending is not None:
        reader = reader.option("endingOffsets", json.dumps(ending))
    frame = reader.load()
    return frame.select(
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
    )


def _changelog(spark: SparkSession, options: SourceOptions) -> DataFrame:
    root = str(options.changelog_dir).rstrip("/")
    for topic in options.topics:
        # A topic the engine has not written yet is an empty stream, not an error.
        Path(root, topic).mkdir(parents=True, exist_ok=True)
    # One stream over every topic directory (a Hadoop glob); Spark skips dot-files, so an open
    # segment (still being written) stays invisible until the sink renames it.
    paths = f"{root}/{{{','.join(options.topics)}}}" if len(options.topics) > 1 else f"{root}/{options.topics[0]}"
    reader = spark.readStream.schema(_CHANGELOG_LINE)
    if options.max_records_per_batch:
        # The file source admits whole files; a segment holds up to segment.max.records lines.
        reader = reader.option("maxFilesPerTrigger", str(max(1, options.max_records_per_batch // 1000)))
    lines = reader.json(paths)
    return lines.select(
        "topic",
        F.lit(0).alias("partition"),
        F.col("seq").alias("offset"),
        "key",
        "value",
    )


def available_now_end(options: SourceOptions) -> dict[str, Any] | None:
    """For an availableNow run of the Python Kafka source with ``max_records_per_batch``: the
    topics' end offsets now, which the run drains in batches of at most that many records (Spark
    4.1 runs a Python source under availableNow as one batch; Spark's own Kafka source does this
    in ``prepareForTriggerAvailableNow``). None for every other source: Spark's own do it."""
    if options.kind != "kafka-python" or not options.max_records_per_batch:
        return None
    from airflow_cdc.spark.sources.kafka_python import KafkaMetadata, offsets_to_json, parse_options

    kafka = KafkaMetadata(parse_options(_kafka_options(options)))
    try:
        return offsets_to_json(kafka.latest(kafka.partitions(required=True)))
    finally:
        kafka.close()


def drain(query: Any, end: Mapping[str, Any], poll: float = 0.2) -> None:
    """Let ``query`` (started with a processing-time trigger of 0 over a source capped at
    ``end``) run its batches back to back, and stop it once one - or an empty trigger - ended
    at ``end``: what Trigger.AvailableNow does for a source that supports it."""
    from airflow_cdc.spark.apply import offset_data
    from airflow_cdc.spark.sources.kafka_python import offsets_from_json

    want = offsets_from_json(end)
    while query.isActive:
        status = query.status
        if not status.get("isTriggerActive"):
            # The source, capped at ``end``, has nothing more (Spark's words for an empty trigger).
            if not status.get("isDataAvailable") and status.get("message") == "Waiting for data to arrive":
                break
            sources = (query.lastProgress or {}).get("sources") or [{}]
            reached = offset_data(sources[0].get("endOffset"))
            if isinstance(reached, dict):
                got = offsets_from_json(reached)
                if all(got.get(tp, -1) >= offset for tp, offset in want.items()):
                    break
        query.awaitTermination(poll)
    deadline = time.monotonic() + 600
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        query.awaitTermination(poll)  # an empty trigger started meanwhile: let it end
    query.stop()
