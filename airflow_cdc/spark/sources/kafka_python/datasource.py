"""The PySpark side: :class:`KafkaPythonDataSource` (``format("cdc_kafka")``) and its stream
reader, which plans micro-batches on the driver (offsets, admission control, input
partitions, group commits) and hands each task a range to read (:mod:`.reader`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from kafka import TopicPartition
from kafka.errors import KafkaError
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from airflow_cdc.spark.frames import RAW_SCHEMA
from airflow_cdc.spark.sources.kafka_python.consumers import KafkaMetadata
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
from airflow_cdc.spark.sources.kafka_python.reader import read_range

log = logging.getLogger(__name__)

#: The short name for ``spark.readStream.format(...)``.
NAME = "cdc_kafka"


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
        """The end of the next batch: every subscribed partition's end offset (at most
        ``endingOffsets``), limited by ``maxOffsetsPerTrigger``. Partitions (and topics) not
        seen before start at their earliest offset; those that vanished keep theirs."""
        kafka = self._kafka()
        partitions = kafka.partitions(required=self._planned is None)
        start = self._start(kafka, partitions)
        latest = kafka.latest(partitions)
        ending = self.settings.ending
        if ending is not None:  # an availableNow run: what was there when it started, no more
            latest = {tp: min(offset, ending.get(tp, start[tp])) for tp, offset in latest.items()}
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
