"""A PySpark streaming data source on kafka-python: Kafka for a Spark without the JVM connector.

The apply job normally reads Kafka through Spark's own ``kafka`` source, which needs the
spark-sql-kafka-0-10 jar on the cluster. Where that jar is missing this source takes its place:
``spark.readStream.format("cdc_kafka")`` (after :func:`register`) yields the *raw* frame of
:mod:`airflow_cdc.spark.frames`, ``topic string, partition int, offset long, key string, value
string``: the columns Spark's source gives after ``CAST(key AS STRING)``, key and value decoded as
UTF-8 (an invalid sequence becomes U+FFFD), ``value`` null for a tombstone.

Options (names as in Spark's Kafka source where they overlap; case does not matter):

- ``kafka.bootstrap.servers`` (required): ``host:port,...``.
- ``subscribe``: a comma list of topics; ``subscribePattern``: a regular expression a topic's
  whole name must match. One of them (or both: the union) is required. Topics are resolved each
  time offsets are planned, so a topic created later that matches is read from its beginning,
  and so is a partition added later.
- ``startingOffsets``: ``latest`` (default, as in Spark), ``earliest``, or JSON such as
  ``{"t": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest; a partition not named starts at its
  earliest). Only for a new query: a restarted one continues from its checkpoint.
- ``maxOffsetsPerTrigger``: at most this many records per micro-batch, shared among the
  partitions in proportion to their lag. See "Admission control" below for what it does with
  ``Trigger.AvailableNow``.
- ``minPartitions``: by default each topic-partition with records in a batch is one Spark task,
  so a single-partition topic is read by one core. With ``minPartitions`` the ranges are split
  (as Spark's source does) until there are about that many tasks; each reads its slice of the
  partition with its own consumer.
- ``failOnDataLoss``: ``true`` (default): a batch whose records are gone (deleted by retention,
  the topic recreated) fails, naming the topic-partition. ``false``: the gone records are
  skipped with a warning.
- ``kafkaConsumer.pollTimeoutMs`` (default 120000, Spark's network timeout): how long a task waits
  for records it knows exist before it fails, naming the topic-partition.
- ``kafka.group.id``: when given, the end offsets of each batch Spark has finished are committed
  to this consumer group, for lag monitoring (see :meth:`KafkaPythonStreamReader.commit`: they
  trail by one batch); the reads themselves never join the group.
- ``kafka.<setting>``: any other Kafka client setting, by the Java client's or librdkafka's name
  as Spark's own source and the engine's sink take them, translated to kafka-python by
  :mod:`airflow_cdc.engine.kafka_settings`: ``kafka.security.protocol``, ``kafka.sasl.mechanism``,
  ``kafka.sasl.jaas.config`` (PLAIN or SCRAM) or ``kafka.sasl.username`` / ``kafka.sasl.password``,
  ``kafka.ssl.truststore.location`` with ``kafka.ssl.truststore.type=PEM`` or
  ``kafka.ssl.ca.location``, ``kafka.ssl.keystore.location`` (PEM) or
  ``kafka.ssl.certificate.location`` / ``kafka.ssl.key.location``,
  ``kafka.ssl.endpoint.identification.algorithm``, ``kafka.client.id``,
  ``kafka.request.timeout.ms``, ``kafka.fetch.max.bytes``, ``kafka.check.crcs``,
  ``kafka.api.version`` (``3.7``), ...; kafka-python's own names (``kafka.sasl.plain.username``,
  ``kafka.ssl.cafile``) too. What kafka-python cannot honour (JKS stores, Java classes) and the
  settings this source owns (``kafka.auto.offset.reset``, ``kafka.enable.auto.commit``, the
  deserializers) are refused with a :class:`~airflow_cdc.engine.errors.ConfigError` that says
  what to use instead, rather than ignored. A refused login fails with a ``ConfigError`` naming
  the option, not after the bootstrap timeout.

Offsets are Spark's Kafka JSON, ``{"topic": {"0": 12, "1": 3}}``: the next offset to read per
partition. Spark's checkpoint holds them; the source keeps nothing of its own.

Admission control: pyspark 4.1's Python ``DataSourceStreamReader`` has no ``latestOffset(start,
limit)``, ``getDefaultReadLimit()`` or ``prepareForTriggerAvailableNow()`` (the JVM side,
``PythonMicroBatchStream``, is a plain ``MicroBatchStream``). The reader therefore applies
``maxOffsetsPerTrigger`` itself: ``latestOffset()`` admits at most that many records past the end
of the last batch Spark planned, which the reader learns from ``partitions(start, end)`` (called
for every batch, and with ``(end, end)`` on a restart, through ``AcceptsLatestSeenOffset``) and
``commit(end)``. With ``Trigger.AvailableNow`` Spark 4.1 runs a source without availableNow support
as one batch (``spark.sql.streaming.triggerAvailableNowWrapper.enabled`` is off by default, and its
wrapper would also take a single offset): with ``maxOffsetsPerTrigger`` set, such a run reads at
most that many records and the next run continues. Leave it unset for availableNow runs that must
drain the topics.

Reads: one Spark input partition per topic-partition with records in the batch (or slices of
one, see ``minPartitions``); each task assigns its partition to a group-less consumer, seeks, and
yields ``pyarrow.RecordBatch``es of up to 10,000 rows (pyspark 4.1 accepts them from a stream
reader's ``read()``) until the batch's end offset. The record batches Kafka returns are decoded
straight into columns (see :func:`use_columnar_records`), which is what makes the source fast.

Does not import Airflow; from the project it takes only the raw schema and the engine's error
classes (ConfigError for options, RetriableError for an unreachable Kafka).
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import (
    CorruptRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
)
from kafka.record.util import decode_varint
from kafka.structs import OffsetAndMetadata
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from airflow_cdc.engine.errors import CdcError, ConfigError, ConfigProblem, RetriableError
from airflow_cdc.engine.kafka_settings import kafka_python_config, open_client
from airflow_cdc.spark.frames import RAW_SCHEMA

log = logging.getLogger(__name__)

#: The short name for ``spark.readStream.format(...)``.
NAME = "cdc_kafka"
#: Rows per Arrow batch a task yields: large enough to amortise the per-batch cost, small
#: enough to keep a task's memory at a few MB.
BATCH_ROWS = 10_000
#: ... and at most about this many bytes, far from Arrow's 2 GiB per string column.
BATCH_BYTES = 32 * 1024 * 1024
#: The Arrow schema of the raw frame (what Spark derives from ``RAW_SCHEMA``).
ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
    ]
)
EARLIEST, LATEST = -2, -1
METADATA_BACKOFF_MS = 20

#: Internal form of an offset: (topic, partition) -> the next offset to read.
Offsets = dict[tuple[str, int], int]

#: What the reading consumers use unless a ``kafka.*`` option says otherwise: big fetches, so a
#: task spends its time decoding rather than waiting for round trips.
_READ_DEFAULTS: dict[str, Any] = {
    "fetch_max_bytes": 64 * 1024 * 1024,
    "max_partition_fetch_bytes": 16 * 1024 * 1024,
    "max_poll_records": BATCH_ROWS,
}
#: Consumer settings this source owns: a ``kafka.*`` option must not change them.
_OWNED = {
    "bootstrap_servers": "kafka.bootstrap.servers is read as such",
    "group_id": "kafka.group.id is only used to commit offsets",
    "enable_auto_commit": "offsets are committed only for completed batches (kafka.group.id)",
    "auto_offset_reset": "use the startingOffsets option",
    "key_deserializer": "keys are always decoded as UTF-8 text",
    "value_deserializer": "values are always decoded as UTF-8 text",
    "allow_auto_create_topics": "the source never creates topics",
    "consumer_timeout_ms": "use kafkaConsumer.pollTimeoutMs",
}


class KafkaUnreachableError(RetriableError):
    """The brokers of ``kafka.bootstrap.servers`` did not answer (down, or the wrong address)."""


class KafkaDataLossError(CdcError):
    """Records a batch must read are gone from Kafka (retention, a recreated topic)."""


class KafkaReadTimeoutError(RetriableError):
    """Records known to exist did not arrive within ``kafkaConsumer.pollTimeoutMs``."""


# --- options -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceSettings:
    """The parsed options; picklable, since every Spark task gets a copy."""

    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    starting: str | Offsets = "latest"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    group_id: str | None = None
    #: kafka-python ``KafkaConsumer`` keyword arguments from ``kafka.*`` options.
    client: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is subscribed: named in ``subscribe`` or wholly matching the pattern."""
        if topic in self.topics:
            return True
        return self.pattern is not None and re.fullmatch(self.pattern, topic) is not None


def parse_options(options: Mapping[str, str]) -> SourceSettings:
    """The settings of ``options``, or a ConfigError listing every problem with them at once."""
    opts = {key.lower(): str(value) for key, value in options.items()}
    problems: list[ConfigProblem] = []
    settings = SourceSettings(
        bootstrap_servers=_required(opts, "kafka.bootstrap.servers", problems),
        topics=tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()),
        pattern=_pattern(opts.get("subscribepattern"), problems),
        starting=_starting(opts.get("startingoffsets", "latest"), problems),
        max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", problems),
        min_partitions=_positive(opts, "minpartitions", "minPartitions", problems),
        fail_on_data_loss=_boolean(opts.get("failondataloss", "true"), "failOnDataLoss", problems),
        poll_timeout_ms=_positive(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs", problems)
        or 120_000,
        group_id=opts.get("kafka.group.id") or None,
        client=_client_settings(opts, problems),
    )
    if not settings.topics and settings.pattern is None:
        problems.append(ConfigProblem("subscribe", "no topics to read", "give subscribe or subscribePattern"))
    if problems:
        raise ConfigError(problems)
    return settings


def _required(opts: Mapping[str, str], key: str, problems: list[ConfigProblem]) -> str:
    value = opts.get(key, "").strip()
    if not value:
        problems.append(ConfigProblem(key, "missing", "the Kafka brokers, host:port[,host:port...]"))
    return value


def _pattern(value: str | None, problems: list[ConfigProblem]) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        problems.append(ConfigProblem("subscribePattern", f"not a regular expression: {exc}", "a valid pattern"))
    return value


def _starting(value: str, problems: list[ConfigProblem]) -> str | Offsets:
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        return offsets_from_json(json.loads(text))
    except (ValueError, TypeError, AttributeError):
        problems.append(
            ConfigProblem("startingOffsets", f"{value!r} is not understood", 'earliest, latest or {"topic": {"0": 12}}')
        )
        return "latest"


def _positive(opts: Mapping[str, str], key: str, name: str, problems: list[ConfigProblem]) -> int | None:
    if key not in opts:
        return None
    try:
        number = int(opts[key])
    except ValueError:
        number = 0
    if number <= 0:
        problems.append(ConfigProblem(name, f"{opts[key]!r} is not a positive whole number", "e.g. 100000"))
        return None
    return number


def _boolean(value: str, name: str, problems: list[ConfigProblem]) -> bool:
    if value.strip().lower() not in ("true", "false"):
        problems.append(ConfigProblem(name, f"{value!r} is not a boolean", "true or false"))
    return value.strip().lower() != "false"


def _client_settings(opts: Mapping[str, str], problems: list[ConfigProblem]) -> dict[str, Any]:
    """kafka-python keyword arguments for the ``kafka.*`` options, through the package's one
    translation of Kafka client settings (``airflow_cdc.engine.kafka_settings``)."""
    client_opts = {k: v for k, v in opts.items() if k not in ("kafka.bootstrap.servers", "kafka.group.id")}
    try:
        return kafka_python_config(client_opts, KafkaConsumer.DEFAULT_CONFIG, prefix="kafka.", owned=_OWNED)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return {}


# --- offsets -------------------------------------------------------------------------------


def offsets_from_json(offsets: Mapping[str, Mapping[str, Any]]) -> Offsets:
    """Spark's Kafka offset JSON (``{"t": {"0": 12}}``) as {(topic, partition): offset}."""
    return {(topic, int(p)): int(offset) for topic, parts in offsets.items() for p, offset in parts.items()}


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """The JSON form, topics and partitions in order: Spark compares offsets as JSON text, so
    equal offsets must serialise to equal text."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return result


def admit(start: Offsets, latest: Offsets, limit: int | None) -> Offsets:
    """The end offsets of the next batch: ``latest``, or, when more than ``limit`` records lie
    between ``start`` and ``latest``, ``limit`` records shared among the partitions in proportion
    to their lag (largest remainders get the records the rounding left over, so exactly
    ``limit`` are admitted). A partition never goes back behind its start."""
    lags = {tp: max(0, end - start[tp]) for tp, end in latest.items()}
    total = sum(lags.values())
    if limit is None or total <= limit:
        return {tp: start[tp] + lag for tp, lag in lags.items()}
    shares = {tp: limit * lag // total for tp, lag in lags.items()}
    left = limit - sum(shares.values())
    for tp in sorted(lags, key=lambda tp: (shares[tp] - lags[tp] * limit / total, tp))[:left]:
        shares[tp] += 1
    return {tp: start[tp] + shares[tp] for tp in lags}


# --- the Kafka side ------------------------------------------------------------------------


def open_consumer(settings: SourceSettings, *, group: bool = False, **overrides: Any) -> KafkaConsumer:
    """A consumer without subscriptions (partitions are assigned), or a KafkaUnreachableError
    naming ``kafka.bootstrap.servers``. ``group``: with ``kafka.group.id``, to commit offsets."""
    config: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers.split(","),
        "group_id": settings.group_id if group else None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "allow_auto_create_topics": False,
        **overrides,
        **settings.client,
    }
    try:
        # A refused login or certificate is a ConfigError naming the kafka.* option (one more
        # connection when TLS or SASL is on), not an unreachable broker retried to the timeout.
        consumer = open_client(KafkaConsumer, config, setting_prefix="kafka.")
    except KafkaError as exc:
        raise KafkaUnreachableError(
            f"cannot reach Kafka at kafka.bootstrap.servers={settings.bootstrap_servers!r} ({exc}); fix the "
            "option kafka.bootstrap.servers (or kafka.security.protocol and the other kafka.* client options), or "
            "check that the brokers are up and reachable from here"
        ) from exc
    _shorten_metadata_backoff(consumer)
    return consumer


def _shorten_metadata_backoff(consumer: KafkaConsumer) -> None:
    """kafka-python 3.0 spaces metadata requests 100 ms apart whatever ``retry.backoff.ms`` says,
    so the first request for a topic's leader, right after bootstrapping, waits 100 ms: a tenth
    of a second per task. Allow 20 ms (where the internals are as expected)."""
    cluster = getattr(getattr(consumer, "_manager", None), "cluster", None)
    config = getattr(cluster, "config", None)
    if isinstance(config, dict) and "retry_backoff_ms" in config:
        config["retry_backoff_ms"] = min(config["retry_backoff_ms"], METADATA_BACKOFF_MS)


class KafkaMetadata:
    """The driver's view of the subscribed topics: which partitions exist, and their offsets."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.consumer = open_consumer(settings, group=True)
        self._timeout = self.consumer.config["request_timeout_ms"]

    @contextmanager
    def _answering(self, what: str) -> Iterator[None]:
        """Kafka's silence (a refused connection, a timeout) as a KafkaUnreachableError naming
        the brokers, rather than kafka-python's bare error."""
        try:
            yield
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            raise KafkaUnreachableError(
                f"Kafka at kafka.bootstrap.servers={self.settings.bootstrap_servers!r} did not answer {what}: {exc}"
            ) from exc

    def partitions(self, *, required: bool) -> list[TopicPartition]:
        """The subscribed topics' partitions, asked afresh; ``required``: none is a ConfigError."""
        with self._answering("which topics exist"):
            topics = sorted(t for t in self.consumer.topics() if self.settings.matches(t))
        if required and not topics:
            raise ConfigError([self._no_topics_problem()])
        return [TopicPartition(t, p) for t in topics for p in sorted(self.consumer.partitions_for_topic(t))]

    def _no_topics_problem(self) -> ConfigProblem:
        if self.settings.pattern is not None:
            what = f"subscribePattern={self.settings.pattern!r}" + (
                f" / subscribe={','.join(self.settings.topics)!r}" if self.settings.topics else ""
            )
            return ConfigProblem("subscribePattern", f"no topic matches {what}", "a pattern that matches a topic")
        return ConfigProblem(
            "subscribe",
            f"none of the topics {', '.join(self.settings.topics)} exists",
            "name existing topics (the source does not create them)",
        )

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        return self._offsets(self.consumer.beginning_offsets, partitions)

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        return self._offsets(self.consumer.end_offsets, partitions)

    def _offsets(self, lookup: Any, partitions: Iterable[TopicPartition]) -> Offsets:
        wanted = list(partitions)
        if not wanted:
            return {}
        with self._answering("a request for offsets"):
            found = lookup(wanted, timeout_ms=self._timeout)
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def commit(self, offsets: Offsets) -> None:
        self.consumer.commit(
            {TopicPartition(t, p): OffsetAndMetadata(offset, "", -1) for (t, p), offset in offsets.items()},
            timeout_ms=self._timeout,
        )

    def close(self) -> None:
        self.consumer.close(autocommit=False)


# --- Spark ---------------------------------------------------------------------------------


class TopicPartitionRange(InputPartition):
    """One Spark task's work: the records ``[start, end)`` of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end

    def __repr__(self) -> str:
        return f"TopicPartitionRange({self.topic}-{self.partition} [{self.start}, {self.end}))"


def split_ranges(ranges: list[TopicPartitionRange], min_partitions: int | None) -> list[TopicPartitionRange]:
    """``ranges``, or, when there are fewer than ``min_partitions``, the ranges split into
    pieces of about ``total / min_partitions`` records (small ranges stay whole)."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    target = max(1, math.ceil(sum(r.end - r.start for r in ranges) / min_partitions))
    pieces = []
    for r in ranges:
        step = math.ceil((r.end - r.start) / math.ceil((r.end - r.start) / target))
        pieces += [
            TopicPartitionRange(r.topic, r.partition, start, min(start + step, r.end))
            for start in range(r.start, r.end, step)
        ]
    return pieces


class KafkaPythonStreamReader(DataSourceStreamReader):
    """Plans micro-batches on the driver (offsets, partitions, commits) and reads them in tasks.

    Spark keeps one instance per query in a long-lived Python process on the driver for
    ``initialOffset``/``latestOffset``/``partitions``/``commit``/``stop``; ``read`` runs in tasks on
    a pickled copy, which must not carry the driver's consumer."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self._metadata: KafkaMetadata | None = None
        self._initial: Offsets | None = None
        #: Per partition, the furthest batch end Spark planned or committed: where the next
        #: batch starts, for admission control.
        self._planned: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "_metadata": None, "_initial": None, "_planned": None}

    def _kafka(self) -> KafkaMetadata:
        if self._metadata is None:
            self._metadata = KafkaMetadata(self.settings)
        return self._metadata

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """Where a new query starts (``startingOffsets``)."""
        return offsets_to_json(self._initial_offsets())

    def _initial_offsets(self, partitions: list[TopicPartition] | None = None) -> Offsets:
        """Resolved once per query: Spark may ask after ``latestOffset``, and the two must agree
        (``latest`` moves)."""
        if self._initial is None:
            kafka = self._kafka()
            if partitions is None:
                partitions = kafka.partitions(required=True)
            self._initial = self._resolve_starting(kafka, partitions)
        return self._initial

    def _resolve_starting(self, kafka: KafkaMetadata, partitions: list[TopicPartition]) -> Offsets:
        starting = self.settings.starting
        if starting == "earliest":
            return kafka.earliest(partitions)
        if starting == "latest":
            return kafka.latest(partitions)
        assert isinstance(starting, dict)
        wanted = {(tp.topic, tp.partition): starting.get((tp.topic, tp.partition), EARLIEST) for tp in partitions}
        earliest = kafka.earliest(tp for tp in partitions if wanted[(tp.topic, tp.partition)] == EARLIEST)
        latest = kafka.latest(tp for tp in partitions if wanted[(tp.topic, tp.partition)] == LATEST)
        return {tp: earliest.get(tp, latest.get(tp, offset)) for tp, offset in wanted.items()}

    def latestOffset(self) -> dict[str, dict[str, int]]:
        """The end of the next batch: every subscribed partition's end offset, limited by
        ``maxOffsetsPerTrigger``. Partitions (and topics) not seen before start at their earliest
        offset; those that vanished keep theirs."""
        kafka = self._kafka()
        partitions = kafka.partitions(required=self._planned is None)
        start = self._start(kafka, partitions)
        latest = kafka.latest(partitions)
        return offsets_to_json({**start, **admit(start, latest, self.settings.max_offsets_per_trigger)})

    def _start(self, kafka: KafkaMetadata, partitions: list[TopicPartition]) -> Offsets:
        if self._planned is None:
            self._planned = dict(self._initial_offsets(partitions))
        new = [tp for tp in partitions if (tp.topic, tp.partition) not in self._planned]
        return {**self._planned, **kafka.earliest(new)}

    def _advance(self, end: Offsets) -> None:
        planned = dict(self._planned or {})
        for tp, offset in end.items():
            planned[tp] = max(offset, planned.get(tp, offset))
        self._planned = planned

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[TopicPartitionRange]:
        """One input partition per topic-partition with records in ``[start, end)``; a partition
        missing from ``start`` (new since) starts at its earliest offset."""
        first, last = offsets_from_json(start), offsets_from_json(end)
        self._advance(last)
        new = [TopicPartition(t, p) for (t, p) in last if (t, p) not in first]
        if new:
            first = {**self._kafka().earliest(new), **first}
        ranges = [
            TopicPartitionRange(topic, partition, first[(topic, partition)], offset)
            for (topic, partition), offset in sorted(last.items())
            if offset > first[(topic, partition)]
        ]
        return split_ranges(ranges, self.settings.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TopicPartitionRange)
        return read_range(self.settings, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark finished every batch up to ``end``. Its checkpoint holds the offsets, so there
        is nothing to keep; with ``kafka.group.id`` they are committed to that consumer group too,
        so the usual lag tools see how far the query is. Spark calls this for a batch when it
        plans the next one (and on a restart), so the group trails the query by one batch; an
        availableNow run's only batch is committed by the next run. A failed group commit only
        warns: the query's own progress is already safe in the checkpoint."""
        offsets = offsets_from_json(end)
        self._advance(offsets)
        if self.settings.group_id is None or not offsets:
            return
        try:
            self._kafka().commit(offsets)
        except KafkaError as exc:
            log.warning("committing offsets to consumer group %r failed: %s", self.settings.group_id, exc)

    def stop(self) -> None:
        if self._metadata is not None:
            self._metadata.close()
            self._metadata = None


class KafkaPythonDataSource(DataSource):
    """``spark.readStream.format("cdc_kafka")``: Kafka as the raw frame, without the JVM jar."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Fail at load(), before the query starts, on options that can never work.
        self.settings = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return RAW_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaPythonStreamReader:
        return KafkaPythonStreamReader(self.settings)


def register(spark: SparkSession) -> None:
    """Make ``format("cdc_kafka")`` available in ``spark`` (idempotent)."""
    spark.dataSource.register(KafkaPythonDataSource)


# --- reading one range ---------------------------------------------------------------------


def read_range(settings: SourceSettings, part: TopicPartitionRange) -> Iterator[pa.RecordBatch]:
    """The records ``[start, end)`` of one topic-partition as Arrow batches of the raw frame."""
    consumer = open_consumer(settings, **_READ_DEFAULTS)
    try:
        yield from RangeReader(consumer, settings, part).batches()
    finally:
        consumer.close(autocommit=False)


class RangeReader:
    """Polls one assigned partition from ``start`` until its position reaches ``end``.

    The position, not the last record's offset, says when to stop: transaction markers and
    compaction leave offsets without records. Each poll that brings nothing must be followed by
    one that does within ``kafkaConsumer.pollTimeoutMs``, so a read never hangs."""

    def __init__(self, consumer: KafkaConsumer, settings: SourceSettings, part: TopicPartitionRange) -> None:
        self.consumer, self.settings, self.part = consumer, settings, part
        self.tp = TopicPartition(part.topic, part.partition)
        self.position = part.start
        self.columnar = use_columnar_records(consumer)
        # Learn the leader now: a first poll without it sleeps retry.backoff.ms, twice.
        consumer.partitions_for_topic(part.topic)
        consumer.assign([self.tp])
        consumer.seek(self.tp, part.start)

    def batches(self) -> Iterator[pa.RecordBatch]:
        pending = Columns()
        while self.position < self.part.end:
            for chunk in self._chunks():
                if not pending.fits(chunk):
                    yield pending.to_arrow(self.part.topic, self.part.partition)
                    pending = Columns()
                pending.extend(chunk)
        if pending.offsets:
            yield pending.to_arrow(self.part.topic, self.part.partition)

    def _chunks(self) -> list[Columns]:
        """Records before ``end``, polling until some arrive or the range is done."""
        deadline = time.monotonic() + self.settings.poll_timeout_ms / 1000
        while True:
            chunks = self._poll(max(0.0, deadline - time.monotonic()))
            if chunks or self.position >= self.part.end:
                return chunks
            if time.monotonic() >= deadline:
                raise self._stuck()

    def _poll(self, timeout: float) -> list[Columns]:
        try:
            polled = self.consumer.poll(timeout_ms=min(1000, int(timeout * 1000)), max_records=BATCH_ROWS)
        except OffsetOutOfRangeError:
            self._lost()
            return []
        self.position = self.consumer.position(self.tp)
        records = polled.get(self.tp, [])
        if not self.columnar:
            return [Columns.of_records(records).before(self.part.end)] if records else []
        chunks = (chunk.columns().before(self.part.end) for chunk in records)
        return [chunk for chunk in chunks if chunk.offsets]

    def _log_range(self) -> tuple[int, int]:
        timeout = self.consumer.config["request_timeout_ms"]
        first = self.consumer.beginning_offsets([self.tp], timeout_ms=timeout)[self.tp]
        return first, self.consumer.end_offsets([self.tp], timeout_ms=timeout)[self.tp]

    def _lost(self) -> None:
        """The position is outside the partition's log: its records are gone. Fail, or (with
        failOnDataLoss=false) skip to what is left."""
        first, last = self._log_range()
        what = (
            f"records [{self.position}, {min(first, self.part.end)}) of {self.part.topic}-{self.part.partition} "
            f"needed by this batch ([{self.part.start}, {self.part.end})) are gone from Kafka; the partition now "
            f"holds [{first}, {last}) (deleted by retention, or the topic was recreated)"
        )
        if self.settings.fail_on_data_loss or self.position >= last:
            raise KafkaDataLossError(f"{what}. Set failOnDataLoss=false to skip lost records.")
        log.warning("%s; skipping them (failOnDataLoss=false)", what)
        self.position = max(first, self.position)
        self.consumer.seek(self.tp, self.position)

    def _stuck(self) -> Exception:
        try:
            first, last = self._log_range()
            held = f"the partition holds [{first}, {last})"
        except KafkaError as exc:
            held = f"the broker does not answer ({exc})"
        return KafkaReadTimeoutError(
            f"no records of {self.part.topic}-{self.part.partition} between offsets {self.position} and "
            f"{self.part.end} arrived within kafkaConsumer.pollTimeoutMs={self.settings.poll_timeout_ms}; {held}. "
            "The records were deleted (retention, a recreated topic) or the broker is unreachable."
        )


# --- records as columns --------------------------------------------------------------------


class Columns:
    """Records of one partition as three columns: offsets, keys and values (bytes or None)."""

    __slots__ = ("keys", "nbytes", "offset", "offsets", "values")

    def __init__(
        self, offsets: list[int] | None = None, keys: list[Any] | None = None, values: list[Any] | None = None
    ) -> None:
        self.offsets: list[int] = offsets if offsets is not None else []
        self.keys: list[Any] = keys if keys is not None else []
        self.values: list[Any] = values if values is not None else []
        #: The first offset: kafka-python's fetcher drops "records" below the fetch offset by it.
        self.offset = self.offsets[0] if self.offsets else -1
        self.nbytes = 0

    @classmethod
    def of_records(cls, records: list[Any]) -> Columns:
        """kafka-python ``ConsumerRecord``s (topic, partition, leader_epoch, offset, timestamp,
        timestamp_type, key, value, ...) as columns."""
        columns = list(zip(*records, strict=False))
        result = cls(list(columns[3]), list(columns[6]), list(columns[7]))
        result.nbytes = sum(r.serialized_key_size + r.serialized_value_size for r in records)
        return result

    def before(self, end: int) -> Columns:
        """Only the records with offsets below ``end``."""
        if not self.offsets or self.offsets[-1] < end:
            return self
        cut = bisect.bisect_left(self.offsets, end)
        return Columns(self.offsets[:cut], self.keys[:cut], self.values[:cut])

    def columns(self) -> Columns:
        return self

    def extend(self, other: Columns) -> None:
        self.offsets += other.offsets
        self.keys += other.keys
        self.values += other.values
        self.nbytes += other.nbytes

    def fits(self, other: Columns) -> bool:
        """Whether ``other`` may join these columns in one Arrow batch (BATCH_ROWS, BATCH_BYTES)."""
        if not self.offsets:
            return True
        return len(self.offsets) + len(other.offsets) <= BATCH_ROWS and self.nbytes + other.nbytes <= BATCH_BYTES

    def to_arrow(self, topic: str, partition: int) -> pa.RecordBatch:
        """One Arrow batch of the raw frame, built from buffers: no Python loop per row, and no
        ``pa.array``/``pa.scalar`` (whose first call imports pandas: 0.4 s in every new worker)."""
        count = len(self.offsets)
        return pa.RecordBatch.from_arrays(
            [
                _repeated_text(topic, count),
                pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(np.full(count, partition, np.int32))]),
                pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(np.array(self.offsets, np.int64))]),
                utf8(self.keys),
                utf8(self.values),
            ],
            schema=ARROW_SCHEMA,
        )


def _repeated_text(text: str, count: int) -> pa.Array:
    """``text`` ``count`` times (the topic column)."""
    data = text.encode()
    offsets = (np.arange(count + 1, dtype=np.int64) * len(data)).astype(np.int32)
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data * count))


def utf8(blobs: list[bytes | None]) -> pa.Array:
    """Bytes (None stays null) as Arrow text; invalid UTF-8 becomes U+FFFD rather than failing."""
    count = len(blobs)
    validity, nulls = None, 0
    if None in blobs:
        present = np.fromiter((b is not None for b in blobs), np.bool_, count)
        validity, nulls = pa.py_buffer(np.packbits(present, bitorder="little")), count - int(present.sum())
    data: list[bytes] = [b"" if b is None else b for b in blobs] if nulls else blobs  # type: ignore[assignment]
    ends = np.cumsum(np.fromiter(map(len, data), np.int64, count))
    if count and ends[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"{ends[-1]} bytes of keys or values do not fit one Arrow batch")
    offsets = np.zeros(count + 1, np.int32)
    offsets[1:] = ends
    text = pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(b"".join(data)), validity, nulls)
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in blobs], pa.string())
    return text


def use_columnar_records(consumer: KafkaConsumer) -> bool:
    """Make ``consumer.poll()`` return one :class:`PendingBatch` per record batch instead of one
    ``ConsumerRecord`` per record, where this kafka-python has the fetcher internals it needs.

    Decoding dominates a read: kafka-python builds three objects per record and parses each
    varint in a function call, about 5 µs a record; decoding a batch straight into columns takes
    about 1.5 µs. Without those internals (another kafka-python), the records are read as usual."""
    fetcher = getattr(consumer, "_fetcher", None)
    if _PartitionRecords is object or getattr(fetcher, "PartitionRecords", None) is not _PartitionRecords:
        return False
    fetcher.PartitionRecords = _ColumnarRecords  # type: ignore[union-attr]
    return True


def decode_batch(batch: Any, fetch_offset: int) -> Columns:
    """A magic-2 record batch as columns, records below ``fetch_offset`` left out.

    Record: length varint, attributes int8, timestamp delta, offset delta, key length, key,
    value length, value, header count, headers. Varints are zigzag-encoded."""
    batch._maybe_uncompress()
    buf = bytes(batch._buffer)
    columns = Columns()
    columns.nbytes = len(buf)
    try:
        end = _decode_records(buf, batch._pos, batch.records_count, batch.base_offset, columns)
    except (IndexError, ValueError) as exc:
        raise CorruptRecordError(f"record batch at offset {batch.base_offset} is malformed: {exc!r}") from exc
    if end != len(buf):
        raise CorruptRecordError(f"record batch at offset {batch.base_offset}: {len(buf) - end} bytes left over")
    if columns.offsets and columns.offsets[0] < fetch_offset:
        columns = Columns(*(c[bisect.bisect_left(columns.offsets, fetch_offset) :] for c in _columns(columns)))
    columns.offset = columns.offsets[0] if columns.offsets else -1
    return columns


class PendingBatch:
    """A record batch as the fetcher hands it over, decoded only by :meth:`columns`: after
    ``poll()`` has returned, and so after it has sent the next fetch request, which then
    travels while this one is decoded."""

    __slots__ = ("batch", "fetch_offset", "offset")

    def __init__(self, batch: Any, fetch_offset: int) -> None:
        self.batch, self.fetch_offset = batch, fetch_offset
        #: What the fetcher compares with the fetch offset to drop records already read.
        self.offset = max(batch.base_offset, fetch_offset)

    def columns(self) -> Columns:
        return decode_batch(self.batch, self.fetch_offset)


def _columns(columns: Columns) -> tuple[list[int], list[Any], list[Any]]:
    return columns.offsets, columns.keys, columns.values


def _decode_records(buf: bytes, pos: int, count: int, base: int, columns: Columns) -> int:
    """Appends ``count`` records from ``buf[pos:]`` to ``columns``; returns where they end.

    The hot loop of a read, hence inlined varints: the record's length is only needed to skip
    headers, which CDC records rarely have; the timestamp is not needed at all."""
    offsets, keys, values = columns.offsets.append, columns.keys.append, columns.values.append
    for _ in range(count):
        start = pos
        while buf[pos] >= 128:  # the record's length
            pos += 1
        pos += 2  # its last byte, and the attributes
        while buf[pos] >= 128:  # the timestamp delta
            pos += 1
        x = buf[pos + 1]
        if x < 128:
            offsets(base + ((x >> 1) ^ -(x & 1)))
            pos += 2
        elif buf[pos + 2] < 128:  # batches of up to 8192 records
            raw = (x & 127) | (buf[pos + 2] << 7)
            offsets(base + ((raw >> 1) ^ -(raw & 1)))
            pos += 3
        else:
            delta, pos = decode_varint(buf, pos + 1)
            offsets(base + delta)
        key, pos = _sized_bytes(buf, pos)
        keys(key)
        value, pos = _sized_bytes(buf, pos)
        values(value)
        if buf[pos]:  # headers: skip them by the record's length
            length, pos = decode_varint(buf, start)
            pos += length
        else:
            pos += 1
    return pos


def _sized_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    """A varint length (-1: null) and that many bytes; lengths up to 8 KiB take one or two bytes."""
    x = buf[pos]
    if x < 128:
        size, pos = (x >> 1) ^ -(x & 1), pos + 1
    elif buf[pos + 1] < 128:
        raw = (x & 127) | (buf[pos + 1] << 7)
        size, pos = (raw >> 1) ^ -(raw & 1), pos + 2
    else:
        size, pos = decode_varint(buf, pos)
    if size < 0:
        return None, pos
    return buf[pos : pos + size], pos + size


def _decode_legacy(batch: Any, fetch_offset: int) -> tuple[Columns, int]:
    """A message-format v0/v1 batch (brokers before 0.11) as columns, the slow way, and the
    offset after it."""
    records = list(batch)
    kept = [r for r in records if r.offset >= fetch_offset]
    columns = Columns([r.offset for r in kept], [r.key for r in kept], [r.value for r in kept])
    return columns, (records[-1].offset + 1 if records else fetch_offset)


try:
    from kafka.consumer.fetcher import Fetcher
    from kafka.protocol.consumer import IsolationLevel

    _PartitionRecords: Any = Fetcher.PartitionRecords
    _READ_COMMITTED: Any = IsolationLevel.READ_COMMITTED
except (ImportError, AttributeError):  # another kafka-python: read records as usual
    _PartitionRecords, _READ_COMMITTED = object, None


class _ColumnarRecords(_PartitionRecords):  # type: ignore[misc]
    """The fetcher's per-fetch record iterator, yielding one :class:`PendingBatch` per record
    batch instead of one ``ConsumerRecord`` per record. It follows kafka-python 3.0's
    ``Fetcher.PartitionRecords._unpack_records``: CRC check, aborted transactions skipped under
    read_committed, control batches skipped, the next fetch offset taken from each batch."""

    def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any) -> Any:
        batch = records.next_batch()
        while batch is not None:
            if self.check_crcs and not batch.validate_crc():
                raise CorruptRecordError(f"record batch of {tp} at offset {batch.base_offset} failed its CRC check")
            if not self._skipped(batch):
                pending: PendingBatch | Columns
                if batch.magic == 2:
                    pending, after = PendingBatch(batch, self.fetch_offset), batch.next_offset
                    count = batch.records_count
                else:
                    pending, after = _decode_legacy(batch, self.fetch_offset)
                    count = len(pending.offsets)
                self.records_read += count
                self.bytes_read += batch.size_in_bytes
                self.next_fetch_offset = after
                yield pending
            batch = records.next_batch()
        self.drain()

    def _skipped(self, batch: Any) -> bool:
        """Whether ``batch`` holds no data records: a control batch or an aborted transaction."""
        if batch.magic != 2:
            return False
        self.leader_epoch = batch.leader_epoch
        skip = bool(batch.is_control_batch)
        if self.isolation_level == _READ_COMMITTED and batch.has_producer_id():
            self._consume_aborted_transactions_up_to(batch.last_offset)
            if self._contains_abort_marker(batch):
                self.aborted_producer_ids.discard(batch.producer_id)
            elif self._is_batch_aborted(batch):
                skip = True
        if skip:
            self.next_fetch_offset = batch.next_offset
        return skip
