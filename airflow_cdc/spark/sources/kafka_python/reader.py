"""A Spark task's read: one topic-partition range polled by a group-less consumer and yielded
as Arrow batches of the raw frame, with lost and missing records reported by partition."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, OffsetOutOfRangeError

from airflow_cdc.spark.sources.kafka_python.columnar import BATCH_ROWS, Columns
from airflow_cdc.spark.sources.kafka_python.consumers import open_consumer
from airflow_cdc.spark.sources.kafka_python.errors import KafkaDataLossError, KafkaReadTimeoutError
from airflow_cdc.spark.sources.kafka_python.kafka_internals import use_columnar_records
from airflow_cdc.spark.sources.kafka_python.options import SourceSettings
from airflow_cdc.spark.sources.kafka_python.ranges import TopicPartitionRange

log = logging.getLogger(__name__)

#: What the reading consumers use unless a ``kafka.*`` option says otherwise: big fetches, so a
#: task spends its time decoding rather than waiting for round trips.
_READ_DEFAULTS: dict[str, Any] = {
    "fetch_max_bytes": 64 * 1024 * 1024,
    "max_partition_fetch_bytes": 16 * 1024 * 1024,
    "max_poll_records": BATCH_ROWS,
}


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
