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
- ``endingOffsets``: JSON offsets as in ``startingOffsets``; the stream reads no further (a
  partition not named: nothing). The apply job's availableNow run passes the end offsets of
  the moment it starts (``reading.available_now_end``), see "Admission control".
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
wrapper would also take a single offset): with ``maxOffsetsPerTrigger`` set, such a run would
read at most that many records. So the apply job runs availableNow for this source as Spark's
own Kafka source does it (``prepareForTriggerAvailableNow``): it reads the end offsets when it
starts, passes them as ``endingOffsets``, runs batches of at most ``maxOffsetsPerTrigger``
records back to back, and stops once a batch (or an empty trigger) reached those offsets
(``reading.drain``).

Reads: one Spark input partition per topic-partition with records in the batch (or slices of
one, see ``minPartitions``); each task assigns its partition to a group-less consumer, seeks, and
yields ``pyarrow.RecordBatch``es of up to 10,000 rows (pyspark 4.1 accepts them from a stream
reader's ``read()``) until the batch's end offset. The record batches Kafka returns are decoded
straight into columns (see :func:`use_columnar_records`), which is what makes the source fast.

Does not import Airflow; from the project it takes only the raw schema and the engine's error
classes (ConfigError for options, RetriableError for an unreachable Kafka).

The modules:

- ``options.py``: :class:`SourceSettings` and :func:`parse_options`.
- ``offsets.py``: Spark's offset JSON and admission control (:func:`admit`), pure.
- ``consumers.py``: opening consumers, and the driver's :class:`KafkaMetadata`.
- ``ranges.py``: :class:`TopicPartitionRange`, one task's work, and :func:`split_ranges`.
- ``datasource.py``: :class:`KafkaPythonDataSource`, its stream reader and :func:`register`.
- ``reader.py``: :func:`read_range`, a task's read (:class:`RangeReader`).
- ``columnar.py``: :class:`Columns`, the sans-IO record decoder and the Arrow conversion.
- ``kafka_internals.py``: all that reaches into kafka-python's private internals (the fetcher
  hook behind :func:`use_columnar_records`), with why and for which kafka-python version.
- ``errors.py``: what the source raises.
"""

from __future__ import annotations

from airflow_cdc.spark.sources.kafka_python.columnar import ARROW_SCHEMA, BATCH_BYTES, BATCH_ROWS, Columns, utf8
from airflow_cdc.spark.sources.kafka_python.consumers import KafkaMetadata, open_consumer
from airflow_cdc.spark.sources.kafka_python.datasource import (
    NAME,
    KafkaPythonDataSource,
    KafkaPythonStreamReader,
    register,
)
from airflow_cdc.spark.sources.kafka_python.errors import (
    KafkaDataLossError,
    KafkaReadTimeoutError,
    KafkaUnreachableError,
)
from airflow_cdc.spark.sources.kafka_python.kafka_internals import (
    METADATA_BACKOFF_MS,
    PendingBatch,
    decode_batch,
    use_columnar_records,
)
from airflow_cdc.spark.sources.kafka_python.offsets import (
    EARLIEST,
    LATEST,
    Offsets,
    admit,
    offsets_from_json,
    offsets_to_json,
)
from airflow_cdc.spark.sources.kafka_python.options import SourceSettings, parse_options
from airflow_cdc.spark.sources.kafka_python.ranges import TopicPartitionRange, split_ranges
from airflow_cdc.spark.sources.kafka_python.reader import RangeReader, read_range

__all__ = [
    "ARROW_SCHEMA",
    "BATCH_BYTES",
    "BATCH_ROWS",
    "EARLIEST",
    "LATEST",
    "METADATA_BACKOFF_MS",
    "NAME",
    "Columns",
    "KafkaDataLossError",
    "KafkaMetadata",
    "KafkaPythonDataSource",
    "KafkaPythonStreamReader",
    "KafkaReadTimeoutError",
    "KafkaUnreachableError",
    "Offsets",
    "PendingBatch",
    "RangeReader",
    "SourceSettings",
    "TopicPartitionRange",
    "admit",
    "decode_batch",
    "offsets_from_json",
    "offsets_to_json",
    "open_consumer",
    "parse_options",
    "read_range",
    "register",
    "split_ranges",
    "use_columnar_records",
    "utf8",
]
