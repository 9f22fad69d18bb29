"""The record pipeline: transform chain -> serializer -> consumer, on a thread pool.

Seed 000's six processing modes are three processors, each with or without a serializer:

* :class:`BatchProcessor` - a batch handler gets the whole batch in source order, after the
  batch was transformed and serialized in parallel. It marks records processed itself through
  the :class:`RecordCommitter` (possibly later, e.g. when Kafka acknowledges them).
* :class:`OrderedProcessor` - a per-record consumer called in source order
  (``record.processing.order=ORDERED``).
* :class:`UnorderedProcessor` - a per-record consumer called on the pool as records finish
  (``UNORDERED``): faster for I/O-bound consumers, no ordering.

Work goes to the pool in contiguous chunks, not one future per record: a future costs about as
much as transforming and serializing a small record, so per-record futures would halve the
throughput for nothing.
"""

from __future__ import annotations

import abc
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeAlias, runtime_checkable

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.offsets import BatchHandle
from airflow_cdc.engine.records import PositionMarker, SerializedRecord, SourceRecord
from airflow_cdc.engine.retry import RetryPolicy, RetryWatch
from airflow_cdc.engine.serialization import Serializer
from airflow_cdc.engine.transforms.base import TransformChain

Delivered: TypeAlias = SourceRecord | SerializedRecord
RecordConsumer: TypeAlias = Callable[[Any], None]

#: Below this many records per chunk, the pool costs more than it saves.
MIN_CHUNK = 128
#: Records per chunk in ORDERED and batch mode: small enough that a chunk's results stay in the
#: CPU cache until they are consumed. Measured here (bench/engine.py): up to 32 retained results
#: run at the speed of a bare loop, 64 cost 40% more per record, 2048 more than double.
CHUNK = 24


class BlockingGauge:
    """How much of the pipeline's wall time is spent off the CPU (blocked in I/O, sleeping).

    Under the GIL, preparing chunks on other threads only pays while someone blocks: then the
    pool prepares while the consumer waits. For CPU-bound work it only adds contention. The
    gauge measures chunks processed inline (wall time against the CPU time of the process) and,
    while prefetching, drops back to one inline chunk every ``PROBE_EVERY`` chunks to measure
    again. The process's CPU time, not the thread's: a thread waiting for the GIL while another
    runs Python (an incremental snapshot's reader, say) is not blocked in any way a pool could
    use, and counting that wait as blocking turned prefetching on for about a fifth of the
    chunks of an incremental snapshot, adding contention.
    """

    THRESHOLD = 0.2
    PROBE_EVERY = 64
    #: While the work looks CPU-bound, one inline chunk in this many is measured: the process's
    #: CPU clock is a system call, and reading it around every chunk cost 9% of an incremental
    #: snapshot's task thread (profile). Chunks processed inline while prefetching are probes,
    #: always measured.
    SAMPLE_EVERY = 8

    def __init__(
        self, wall: Callable[[], float] = time.perf_counter, cpu: Callable[[], float] = time.process_time
    ) -> None:
        self._wall, self._cpu = wall, cpu
        self.off_cpu = 0.0
        self._since_probe = 0
        self._unmeasured = self.SAMPLE_EVERY - 1  # the first chunk is measured

    def measure(self, work: Callable[[], None]) -> None:
        if self.off_cpu < self.THRESHOLD and self._unmeasured < self.SAMPLE_EVERY - 1:
            self._unmeasured += 1
            work()
            return
        self._unmeasured = 0
        wall, cpu = self._wall(), self._cpu()
        work()
        wall, cpu = self._wall() - wall, self._cpu() - cpu
        if wall > 0:
            self.off_cpu += 0.25 * (max(0.0, 1.0 - cpu / wall) - self.off_cpu)
        self._since_probe = 0

    def prefetch_pays(self) -> bool:
        if self.off_cpu < self.THRESHOLD:
            return False
        self._since_probe += 1
        return self._since_probe < self.PROBE_EVERY


class RecordCommitter:
    """Handed to a batch handler with each batch (Debezium's ``RecordCommitter``)."""

    def __init__(
        self,
        handle: BatchHandle,
        records: Sequence[Delivered],
        indices: Sequence[int],
        stopping: threading.Event | None = None,
    ) -> None:
        self._handle = handle
        self._records = records
        self._indices = indices
        self._index_of: dict[int, int] | None = None
        self.finished = threading.Event()
        #: Set when the engine stops: a handler retrying a delivery should give up (its records
        #: stay unmarked, so their offsets are not committed and they are delivered again later).
        self.stopping = stopping or threading.Event()

    def mark_processed(self, record: Delivered) -> None:
        """This record is delivered: its offset may now be committed (once all before it are)."""
        if self._index_of is None:
            self._index_of = {id(r): i for r, i in zip(self._records, self._indices, strict=True)}
        index = self._index_of.get(id(record))
        if index is None:
            raise ValueError("mark_processed() got a record that is not part of this batch")
        self._handle.mark(index)

    def mark_all_processed(self) -> None:
        """Every record of this batch is delivered."""
        self._handle.mark_all()

    def mark_batch_finished(self) -> None:
        """The handler is done with this batch (records it marked may still be pending)."""
        self.finished.set()

    def fail(self, error: BaseException) -> None:
        """A record of this batch can never be delivered (from any thread, later too): the task
        stops with ``error``; nothing from that record on is committed."""
        self._handle.fail(error)


class BatchHandler(Protocol):
    def handle_batch(self, records: list[Any], committer: RecordCommitter) -> None: ...


@runtime_checkable
class Flushable(Protocol):
    """A batch handler that buffers (a sink's open segment) and can deliver what it holds now."""

    def flush(self, timeout: float) -> None: ...


class StopSignal:
    """Set when the engine stops; after ``drain_s`` more, unfinished batches are abandoned."""

    def __init__(self, drain_s: float) -> None:
        self.event = threading.Event()
        self._drain_s = drain_s
        self._abandon_at = float("inf")

    def set(self) -> None:
        if not self.event.is_set():
            self._abandon_at = time.monotonic() + self._drain_s
            self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    def abandoned(self) -> bool:
        return self.event.is_set() and time.monotonic() >= self._abandon_at

    def drain_remaining(self) -> float:
        return max(0.0, self._abandon_at - time.monotonic()) if self.event.is_set() else self._drain_s


def chunks(size: int, parts: int) -> list[tuple[int, int]]:
    """Split ``range(size)`` into at most ``parts`` contiguous, near-equal chunks."""
    count = max(1, min(parts, size // MIN_CHUNK))
    step, extra = divmod(size, count)
    bounds, start = [], 0
    for index in range(count):
        stop = start + step + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


@dataclass(frozen=True)
class Pipeline:
    """What every task's processor shares: the transform chain and serializer a record goes
    through, the pool (of ``threads`` threads) that may prepare chunks ahead, the retry policy
    for retriable consumer errors, and the engine's stop signal."""

    transforms: TransformChain
    serializer: Serializer | None
    pool: ThreadPoolExecutor
    threads: int
    retry: RetryPolicy
    stop: StopSignal


class RecordProcessor(abc.ABC):
    """One task's processor: the pipeline's work on that task's batches, handed to its consumer."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._transforms = pipeline.transforms
        self._serializer = pipeline.serializer
        self._pool = pipeline.pool
        self._threads = pipeline.threads
        self._retry = pipeline.retry
        self._stop = pipeline.stop
        self._gauge = BlockingGauge()  # per task: each task's work may block differently
        #: The deliveries retried now (the task runner names its owner and shows it in its status).
        self.retrying = RetryWatch()

    def prepare(self, record: SourceRecord) -> Delivered | None:
        """Transform then serialize one record; None when a transform dropped it (or it is a
        position marker, which is tracked but never delivered)."""
        if type(record) is PositionMarker:
            return None
        out: SourceRecord | None = self._transforms.apply(record) if self._transforms else record
        if out is None or self._serializer is None:
            return out
        return self._serializer.serialize(out)

    def prepare_chunk(self, batch: Sequence[SourceRecord], start: int, stop: int) -> list[Delivered | None]:
        prepare = self.prepare
        return [prepare(batch[i]) for i in range(start, stop)]

    def run_chunks(
        self, batch: Sequence[SourceRecord], finish: Callable[[int, int, list[Delivered | None]], None]
    ) -> None:
        """Prepare the batch chunk by chunk and hand each, in source order, to ``finish``.

        Chunks are prepared ahead on the pool only while :class:`BlockingGauge` says the work
        blocks (see ADR 0003); otherwise the calling thread prepares them itself, which under
        the GIL is faster than any hand-over to another thread.
        """
        bounds = [(s, min(s + CHUNK, len(batch))) for s in range(0, len(batch), CHUNK)]
        ahead: deque[Future[list[Delivered | None]]] = deque()  # futures of the chunks after this one
        upcoming = 0
        try:
            for index, (start, stop) in enumerate(bounds):
                if self._stop.abandoned():
                    return
                if ahead:
                    future = ahead.popleft()
                    items = self.prepare_chunk(batch, start, stop) if future.cancel() else future.result()
                    finish(start, stop, items)
                else:
                    self._gauge.measure(partial(self._prepare_and_finish, batch, start, stop, finish))
                upcoming = max(upcoming, index + 1)
                if self._gauge.prefetch_pays():
                    while upcoming < len(bounds) and len(ahead) < self._threads:
                        ahead.append(self._pool.submit(self.prepare_chunk, batch, *bounds[upcoming]))
                        upcoming += 1
        finally:
            for future in ahead:
                future.cancel()

    def _prepare_and_finish(
        self,
        batch: Sequence[SourceRecord],
        start: int,
        stop: int,
        finish: Callable[[int, int, list[Delivered | None]], None],
    ) -> None:
        finish(start, stop, self.prepare_chunk(batch, start, stop))

    def _deliver(self, deliver: Callable[[], None], what: str) -> None:
        try:
            deliver()
        except RetriableError as exc:
            self._retry_after(exc, deliver, what)

    def _retry_after(self, failure: RetriableError, work: Callable[[], None], what: str) -> None:
        """``work`` failed with ``failure``: retried by the policy, shown in the task's status."""
        self._retry.call(work, what=what, stopping=self._stop.event, watch=self.retrying, first_failure=failure)

    @abc.abstractmethod
    def process(self, batch: Sequence[SourceRecord], handle: BatchHandle) -> None:
        """Process one polled batch; returns when the batch is handed over (or abandoned)."""

    def flush(self, timeout: float) -> None:  # noqa: B027 - only batch handlers buffer
        """Ask the consumer to deliver what it buffers (before the final commit)."""


class OrderedProcessor(RecordProcessor):
    """Consumes prepared chunks in source order on the task thread."""

    def __init__(self, consumer: RecordConsumer, pipeline: Pipeline) -> None:
        super().__init__(pipeline)
        self._consumer = consumer

    def process(self, batch: Sequence[SourceRecord], handle: BatchHandle) -> None:
        def consume(start: int, stop: int, items: list[Delivered | None]) -> None:
            self._consume_chunk(items, start, handle)
            handle.mark_range(start, stop)

        self.run_chunks(batch, consume)

    def _consume_chunk(self, items: list[Delivered | None], start: int, handle: BatchHandle) -> None:
        consumer = self._consumer
        offset = 0
        try:
            for offset, item in enumerate(items):  # noqa: B007 - read in the except clause
                if item is None:
                    continue
                try:
                    consumer(item)
                except RetriableError as exc:
                    self._retry_after(exc, partial(consumer, item), "consumer")
        except BaseException:
            handle.mark_range(start, start + offset)  # what came before it was delivered
            raise


class UnorderedProcessor(RecordProcessor):
    def __init__(self, consumer: RecordConsumer, pipeline: Pipeline) -> None:
        super().__init__(pipeline)
        self._consumer = consumer

    def process(self, batch: Sequence[SourceRecord], handle: BatchHandle) -> None:
        bounds = chunks(len(batch), self._threads)
        if len(bounds) == 1:
            self._run_chunk(batch, 0, len(batch), handle)
            return
        futures = [self._pool.submit(self._run_chunk, batch, s, e, handle) for s, e in bounds]
        error: BaseException | None = None
        for future in futures:
            exc = future.exception()
            if exc is not None and error is None:
                error = exc
        if error is not None:
            raise error

    def _run_chunk(self, batch: Sequence[SourceRecord], start: int, stop: int, handle: BatchHandle) -> None:
        prepare, consumer = self.prepare, self._consumer
        for index in range(start, stop):
            if self._stop.abandoned():
                return
            item = prepare(batch[index])
            if item is not None:
                try:
                    consumer(item)
                except RetriableError as exc:
                    self._retry_after(exc, partial(consumer, item), "consumer")
            handle.mark(index)


class BatchProcessor(RecordProcessor):
    def __init__(self, handler: BatchHandler, pipeline: Pipeline) -> None:
        super().__init__(pipeline)
        self._handler = handler

    def process(self, batch: Sequence[SourceRecord], handle: BatchHandle) -> None:
        delivered: list[Delivered] = []
        indices: list[int] = []

        def collect(start: int, stop: int, items: list[Delivered | None]) -> None:
            for index, item in enumerate(items, start):
                if item is None:
                    handle.mark(index)  # dropped by a transform: nothing to deliver
                else:
                    delivered.append(item)
                    indices.append(index)

        self.run_chunks(batch, collect)
        if self._stop.abandoned():
            return
        if not delivered:
            return
        committer = RecordCommitter(handle, delivered, indices, self._stop.event)
        self._deliver(lambda: self._handler.handle_batch(delivered, committer), "batch handler")

    def flush(self, timeout: float) -> None:
        # A sink that buffers (a changelog's open segment) marks its records only once they are
        # durable; without this the final commit at shutdown would leave them for a redelivery.
        if isinstance(self._handler, Flushable):
            self._handler.flush(timeout)
