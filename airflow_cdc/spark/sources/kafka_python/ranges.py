"""What one Spark task reads: a range of one topic-partition's offsets, and the splitting of
ranges into more tasks (``minPartitions``)."""

from __future__ import annotations

import math

from pyspark.sql.datasource import InputPartition


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
