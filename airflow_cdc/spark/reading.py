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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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


def read_stream(spark: SparkSession, options: SourceOptions) -> DataFrame:
    """A streaming raw frame from the chosen source."""
    options.check()
    if options.kind == "changelog":
        return _changelog(spark, options)
    return _kafka(spark, options)


def _kafka(spark: SparkSession, options: SourceOptions) -> DataFrame:
    if options.kind == "kafka-python":
        from airflow_cdc.spark.sources.kafka_python import register

        register(spark)
        reader = spark.readStream.format("cdc_kafka")
    else:
        reader = spark.readStream.format("kafka").option("failOnDataLoss", "true")
        for key, value in _KAFKA_READ.items():
            reader = reader.option(key, value)
    reader = reader.option("kafka.bootstrap.servers", options.bootstrap_servers)
    if options.topics:
        reader = reader.option("subscribe", ",".join(options.topics))
    else:
        reader = reader.option("subscribePattern", options.topic_pattern)
    reader = reader.option("startingOffsets", options.starting_offsets)
    if options.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(options.max_records_per_batch))
    client = {key.removeprefix("kafka."): value for key, value in options.kafka.items()}
    if options.kind == "kafka":  # the JVM client: librdkafka's SASL and CA names in Java's
        client = java_client_settings(client)
    for key, value in client.items():
        reader = reader.option(f"kafka.{key}", value)
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
