"""The contiguous-prefix offset tracker (seed 000 and seed 002).

Every polled record gets a sequence number in source order. A record may finish in any order
(parallel consumers, asynchronous Kafka acknowledgements), but the *committable* position only
ever covers the longest prefix of records that are all done. So the committed offset never
passes a record that was not fully delivered: after a crash we may see duplicates, never a gap.

Records are tracked per polled batch (a bytearray of done flags) rather than one dict entry per
record: the bookkeeping is then a few byte writes per record, cheap next to the record's own
transform and serialization.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.records import Offset, Partition, SourceRecord, partition_key


@dataclass(frozen=True, slots=True)
class Position:
    partition: Partition
    offset: Offset


class _Batch:
    __slots__ = ("base", "done", "keys", "offsets", "partitions", "size")

    def __init__(self, base: int, records: Sequence[SourceRecord]) -> None:
        self.base = base
        self.size = len(records)
        self.done = bytearray(self.size)
        self.offsets = [r.offset for r in records]
        # Consecutive records almost always share one partition object; compute its key once.
        keys: list[str] = []
        partitions: dict[str, Partition] = {}
        last_partition: Partition | None = None
        last_key = ""
        for record in records:
            if record.partition is not last_partition:
                last_partition = record.partition
                last_key = partition_key(last_partition)
                partitions.setdefault(last_key, last_partition)
            keys.append(last_key)
        self.keys = keys
        self.partitions = partitions


class BatchHandle:
    """Marks the records of one tracked batch done, by their index in the batch."""

    __slots__ = ("_batch", "_tracker")

    def __init__(self, tracker: OffsetTracker, batch: _Batch) -> None:
        self._tracker = tracker
        self._batch = batch

    @property
    def size(self) -> int:
        return self._batch.size

    def mark(self, index: int) -> None:
        self._tracker._mark(self._batch, index, index + 1)

    def mark_range(self, start: int, stop: int) -> None:
        self._tracker._mark(self._batch, start, stop)

    def mark_all(self) -> None:
        self._tracker._mark(self._batch, 0, self._batch.size)

    def fail(self, error: BaseException) -> None:
        """A record of this batch can never be delivered: the task stops with ``error``."""
        self._tracker.fail(error)


class OffsetTracker:
    """Tracks the records of one task; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._advanced = threading.Condition(self._lock)
        self._batches: deque[_Batch] = deque()
        self._next_seq = 0
        self._prefix = 0  # every record with seq < _prefix is done
        self._cursor = 0  # index of the first not-done record in the head batch
        self._committable: dict[str, Position] = {}
        #: Why a record can never be delivered (a sink said so, from any thread); the task stops.
        self.failure: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = error
            self._advanced.notify_all()  # a task waiting for room (back-pressure) looks again

    def track(self, records: Sequence[SourceRecord]) -> BatchHandle:
        """Register a polled batch, in source order; returns the handle to mark its records."""
        with self._lock:
            batch = _Batch(self._next_seq, records)
            self._next_seq += batch.size
            self._batches.append(batch)
            if batch.size == 0:
                self._advance()
        return BatchHandle(self, batch)

    def _mark(self, batch: _Batch, start: int, stop: int) -> None:
        if not 0 <= start <= stop <= batch.size:
            raise OffsetError(f"records {start}..{stop} are outside a batch of {batch.size}")
        with self._lock:
            if stop - start == 1:
                batch.done[start] = 1
            else:
                batch.done[start:stop] = b"\x01" * (stop - start)
            if self._batches and self._batches[0] is batch and start <= self._cursor:
                self._advance()

    def _advance(self) -> None:
        # Called with the lock held: move the prefix over every done record at the head.
        moved = False
        while self._batches:
            head = self._batches[0]
            end = head.done.find(0, self._cursor)
            end = head.size if end == -1 else end
            if end > self._cursor:
                self._record_positions(head, self._cursor, end)
                self._prefix += end - self._cursor
                self._cursor = end
                moved = True
            if end < head.size:
                break
            self._batches.popleft()
            self._cursor = 0
        if moved:
            self._advanced.notify_all()

    def _record_positions(self, batch: _Batch, start: int, end: int) -> None:
        if len(batch.partitions) == 1:
            key = batch.keys[end - 1]
            self._committable[key] = Position(batch.partitions[key], batch.offsets[end - 1])
            return
        seen: set[str] = set()
        for index in range(end - 1, start - 1, -1):
            key = batch.keys[index]
            if key not in seen:
                seen.add(key)
                self._committable[key] = Position(batch.partitions[key], batch.offsets[index])
            if len(seen) == len(batch.partitions):
                break

    @property
    def committed_seq(self) -> int:
        """How many records (counted from the start of this run) are done, as a prefix."""
        return self._prefix

    def pending(self) -> int:
        """Records tracked but not yet covered by the done prefix."""
        with self._lock:
            return self._next_seq - self._prefix

    def committable(self) -> tuple[int, dict[str, Position]]:
        """The prefix length and, per partition key, the latest position inside the prefix."""
        with self._lock:
            return self._prefix, dict(self._committable)

    def wait_for_pending_at_most(self, limit: int, timeout: float) -> bool:
        """Block until at most ``limit`` records are pending; False on timeout."""
        with self._advanced:
            return self._advanced.wait_for(lambda: self._next_seq - self._prefix <= limit, timeout)
