"""Drives one source task on its own thread: start, then poll -> process -> commit, then its
part of the shutdown (drain, final commit, stop)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.commit_policy import OffsetCommitPolicy
from airflow_cdc.engine.connector import Clock, SourceTask, TaskContext
from airflow_cdc.engine.errors import RetriableError, TaskError
from airflow_cdc.engine.offsets import OffsetTracker
from airflow_cdc.engine.processing import RecordProcessor, StopSignal
from airflow_cdc.engine.retry import RetryPolicy
from airflow_cdc.engine.storage.base import OffsetStore

log = logging.getLogger(__name__)

#: How long a commit asked for from outside waits for the sink to make its buffer durable.
FLUSH_ON_REQUEST_S = 5.0
#: How often a paused task keeps its source alive and commits.
IDLE_S = 0.1


@dataclass(frozen=True)
class TaskEnvironment:
    """What the engine gives every task runner alike: where offsets go and when, how retriable
    errors are retried, the stop signal, the back-pressure bound (``max.queue.size``), whom to
    tell about a failure, and the clock."""

    store: OffsetStore
    policy: OffsetCommitPolicy
    retry: RetryPolicy
    stop: StopSignal
    max_pending: int
    on_failure: Callable[[BaseException], None]
    clock: Clock


class TaskRunner:
    def __init__(
        self, task: SourceTask, context: TaskContext, processor: RecordProcessor, environment: TaskEnvironment
    ) -> None:
        self.task = task
        self.context = context
        self.task_id = context.task_id
        self.tracker = OffsetTracker()
        self._processor = processor
        #: What this task retries now (its own start and polls, its processor's deliveries).
        self.retrying = processor.retrying
        self.retrying.owner = f"task {self.task_id}"
        self._store = environment.store
        self._policy = environment.policy
        self._retry = environment.retry
        self._stop = environment.stop
        self._max_pending = environment.max_pending
        self._on_failure = environment.on_failure
        self._clock = clock = environment.clock
        self._go = threading.Event()
        #: Set while paused (Kafka Connect's pause): no polling, commits and keep-alives go on.
        self.paused = threading.Event()
        self.idling = False
        self._idle_failures = 0  # keep-alives failed in a row while paused
        self.started = threading.Event()  # set when start() returned or raised
        #: A commit asked for from outside (request_commit): served by the task's own thread at
        #: its next loop, which alone writes this task's offsets.
        self._commit_asked = threading.Event()
        self._commit_served = threading.Condition()
        self._commits_served = 0
        self.start_error: BaseException | None = None
        #: The last retriable failure of start(), while it is retried: why a start takes long.
        self.start_failure: BaseException | None = None
        self.error: BaseException | None = None
        self.polled = 0
        self.committed: dict[str, Any] = {}
        self.commits = 0
        self.ms_behind_source: int | None = None  # Debezium's MilliSecondsBehindSource, per batch
        self._committed_seq = 0
        self._commit_failures = 0  # offset commits failed in a row (the store away)
        self._last_commit = clock.monotonic()
        self.thread = threading.Thread(target=self._main, name=f"cdc-task-{self.task_id}", daemon=True)

    # -- driven by the engine ---------------------------------------------------------------
    def launch(self) -> None:
        self.thread.start()

    def begin_polling(self) -> None:
        self._go.set()

    def release(self) -> None:
        """Let a thread that waits to poll continue to its shutdown (the engine is stopping)."""
        self._go.set()

    # -- the task's thread -----------------------------------------------------------------
    def _start_failed(self, exc: BaseException) -> None:
        self.start_failure = exc

    def _main(self) -> None:
        try:
            self._retry.call(
                lambda: self.task.start(self.context),
                what="start",
                stopping=self._stop.event,
                failed=self._start_failed,
                watch=self.retrying,
            )
        except BaseException as exc:
            self.start_error = exc
            log.error("task %s failed to start: %s", self.task_id, exc)
        finally:
            self.started.set()
        if self.start_error is None:
            self._go.wait()
            if not self._stop.is_set():
                self._poll_until_stopped()
        self._finish()

    def request_commit(self, timeout: float) -> bool:
        """Commit what is delivered now, without waiting for the commit policy (a sensor waiting
        for "caught up" must not wait for the next periodic flush); True once the task's thread
        served the request within ``timeout`` seconds."""
        with self._commit_served:
            served = self._commits_served
            self._commit_asked.set()
            return self._commit_served.wait_for(lambda: self._commits_served > served, timeout)

    def _serve_commit_request(self) -> None:
        if not self._commit_asked.is_set():
            return
        self._commit_asked.clear()
        try:
            # What the sink still buffers (a changelog's open segment) is made durable first, so
            # that "committed" covers everything delivered so far.
            self._processor.flush(FLUSH_ON_REQUEST_S)
            self.maybe_commit(force=True)
        finally:
            with self._commit_served:
                self._commits_served += 1
                self._commit_served.notify_all()

    def _poll_until_stopped(self) -> None:
        try:
            while not self._stop.is_set():
                self._serve_commit_request()
                if self.paused.is_set():
                    self.idling = True  # the pause has taken effect: no poll is under way
                    self._idle()
                    self.maybe_commit()
                    self._stop.event.wait(IDLE_S)
                    continue
                self.idling = False
                self._keep_alive_over()  # resumed: the polls retry what the keep-alives could not
                if self.tracker.failure is not None:
                    raise self.tracker.failure
                if self.tracker.pending() > self._max_pending:
                    # Back-pressure: a sink holds too many unacknowledged records.
                    self.tracker.wait_for_pending_at_most(self._max_pending, 0.1)
                    self.maybe_commit()
                    continue
                try:
                    records = self._retry.call(
                        self.task.poll, what="poll", stopping=self._stop.event, watch=self.retrying
                    )
                except RetriableError:
                    if self._stop.is_set():
                        return
                    raise
                if records:
                    self.polled += len(records)
                    event_ms = records[-1].timestamp_ms
                    if event_ms is not None:
                        self.ms_behind_source = max(0, self._clock.time_ns() // 1_000_000 - event_ms)
                    self._processor.process(records, self.tracker.track(records))
                self.maybe_commit()
        except BaseException as exc:
            self.error = exc if isinstance(exc, TaskError) else _task_error(self.task_id, exc)
            log.error("task %s failed: %s", self.task_id, exc, exc_info=exc)
            self._on_failure(self.error)

    def _idle(self) -> None:
        """The source's keep-alive while paused. One that fails (the connection lost) does not
        fail the task: a paused task reads nothing that could be lost, its next keep-alive (or
        its first poll once resumed) tries again, and meanwhile its status says RETRYING."""
        try:
            self.task.idle()
        except RetriableError as exc:
            self._idle_failures += 1
            self.retrying.failed("keep-alive", exc, self._idle_failures, IDLE_S)
            if self._idle_failures == 1:
                log.warning("task %s: keep-alive while paused failed (%s); trying again", self.task_id, exc)
            return
        self._keep_alive_over()

    def _keep_alive_over(self) -> None:
        if self._idle_failures:
            self._idle_failures = 0
            self.retrying.ended("keep-alive")

    def maybe_commit(self, *, force: bool = False) -> None:
        """Commit the done prefix if the policy says so (or ``force``): store, then tell the task."""
        seq, positions = self.tracker.committable()
        since = seq - self._committed_seq
        if since <= 0:
            return
        if not force and not self._policy.perform_commit(since, self._clock.monotonic() - self._last_commit):
            return
        entries = [(p.partition, p.offset) for p in positions.values()]
        try:
            self._store.write(entries)
        except RetriableError as exc:
            # As Kafka Connect's offset flush: a store away for a while (a full disk, the broker
            # or database down) fails this commit only; capture goes on and the next commit
            # stores everything delivered by then (a restart meanwhile re-reads from the last).
            self._commit_failures += 1
            if self._commit_failures == 1:
                log.error("task %s: committing offsets failed, retrying at the next commit: %s", self.task_id, exc)
            self.retrying.failed("offset commit", exc, self._commit_failures, 0.0)  # at the next commit
            self._last_commit = self._clock.monotonic()  # and not before the policy's interval
            return
        if self._commit_failures:
            log.info("task %s: offsets committed again", self.task_id)
            self._commit_failures = 0
            self.retrying.ended("offset commit")
        offsets = {key: p.offset for key, p in positions.items()}
        self._committed_seq = seq
        self._last_commit = self._clock.monotonic()
        self.committed = offsets
        self.commits += 1
        try:
            self.task.commit(offsets)
        except RetriableError as exc:
            log.warning(
                "task %s: telling the source about committed offsets failed (%s); "
                "it will be told again at the next commit",
                self.task_id,
                exc,
            )

    def _finish(self) -> None:
        if self.start_error is None:
            self._deliver_held_back()
            # Records handed to an asynchronous sink may still be acknowledged: wait a little.
            try:
                self._processor.flush(self._stop.drain_remaining())
            except Exception as exc:
                log.error("task %s: flushing the consumer failed: %s", self.task_id, exc)
            self.tracker.wait_for_pending_at_most(0, self._stop.drain_remaining())
            try:
                self.maybe_commit(force=True)
            except Exception as exc:
                log.error("task %s: final offset commit failed: %s", self.task_id, exc)
                if self.error is None:
                    self.error = exc
                    self._on_failure(exc)
        try:
            self.task.stop()
        except Exception as exc:
            log.error("task %s: stop failed: %s", self.task_id, exc)

    def _deliver_held_back(self) -> None:
        """A clean stop delivers what the task read but held for later polls; after a failure
        nothing more is read from the task (it is re-read after the restart)."""
        if self.error is not None or self.tracker.failure is not None:
            return
        try:
            records = self.task.drain()
        except Exception as exc:
            log.error("task %s: taking the records it held back failed: %s", self.task_id, exc)
            return
        if records:
            self.polled += len(records)
            self._processor.process(records, self.tracker.track(records))

    def _source_metrics(self) -> dict[str, float]:
        try:
            return self.task.metrics()
        except Exception as exc:  # a status call must never fail because of a source
            log.debug("task %s: metrics failed: %s", self.task_id, exc)
            return {}

    def status(self) -> dict[str, Any]:
        retrying = self.retrying.current()
        return {
            "id": self.task_id,
            "paused": self.idling,
            "polled": self.polled,
            "pending": self.tracker.pending(),
            "committed_records": self._committed_seq,
            "commits": self.commits,
            "offsets": self.committed,
            "ms_behind_source": self.ms_behind_source,
            "source": self._source_metrics(),
            "error": None if self.error is None and self.start_error is None else str(self.error or self.start_error),
            "retrying": None if retrying is None else retrying.to_json(),
        }


def _task_error(task_id: str, exc: BaseException) -> TaskError:
    error = TaskError(f"{type(exc).__name__}: {exc}", task_id=task_id)
    error.__cause__ = exc
    return error
