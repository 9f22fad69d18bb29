"""The asynchronous embedded engine (seed 000, after Debezium's ``AsyncEmbeddedEngine``).

``run()`` reads as its phases: initialize, create tasks, start tasks, poll tasks, stop. Every
path, an error included, ends in STOPPED with every started task stopped, because a task that
is not stopped may keep a replication slot active.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_cdc.engine import collector
from airflow_cdc.engine.commit_policy import OffsetCommitPolicy, make_commit_policy
from airflow_cdc.engine.connector import SYSTEM_CLOCK, Clock, SourceConnector, TaskContext
from airflow_cdc.engine.errors import EngineFailedError, IllegalStateError
from airflow_cdc.engine.health import Health, judge
from airflow_cdc.engine.notifications import NotificationBus
from airflow_cdc.engine.processing import (
    BatchHandler,
    BatchProcessor,
    OrderedProcessor,
    Pipeline,
    RecordConsumer,
    RecordProcessor,
    StopSignal,
    UnorderedProcessor,
)
from airflow_cdc.engine.retry import Retrying, RetryPolicy
from airflow_cdc.engine.serialization import JsonSerializer, Serializer
from airflow_cdc.engine.signals.channels import InProcessChannel
from airflow_cdc.engine.state import EngineState, StateMachine
from airflow_cdc.engine.storage import OffsetReader, OffsetStore, build_offset_store
from airflow_cdc.engine.task_runner import TaskEnvironment, TaskRunner
from airflow_cdc.engine.transforms import FunctionTransform, Transform, TransformChain
from airflow_cdc.engine.validation import ValidatedConfig, validate_config

log = logging.getLogger(__name__)


class Engine:
    """Runs one connector's tasks and delivers their records to a consumer or batch handler.

    Give exactly one of ``consumer`` (called per record) or ``batch_handler``. With a
    ``serializer`` the consumer gets :class:`SerializedRecord`, else :class:`SourceRecord`.
    """

    def __init__(
        self,
        config: Mapping[str, object] | ValidatedConfig,
        *,
        consumer: RecordConsumer | None = None,
        batch_handler: BatchHandler | None = None,
        serializer: Serializer | None = None,
        transforms: Sequence[Transform | Callable[..., Any]] = (),
        connector: SourceConnector | None = None,
        offset_store: OffsetStore | None = None,
        commit_policy: OffsetCommitPolicy | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if (consumer is None) == (batch_handler is None):
            raise TypeError("Engine needs exactly one of consumer= (per record) or batch_handler= (per batch)")
        if isinstance(config, ValidatedConfig):
            if connector is not None:
                raise TypeError("a ValidatedConfig brings its connector: validate_config(..., connector=) instead")
            validated = config
        else:
            validated = validate_config(config, connector=connector, offset_store_given=offset_store is not None)
        for warning in validated.warnings:
            log.warning("engine %r: %s (fix: %s)", validated.name, f"{warning.key} {warning.message}", warning.fix)
        self.validated = validated
        self.config = validated.config
        self.settings: Mapping[str, Any] = validated.engine
        self._connector = validated.connector
        self.name: str = validated.name
        self._transforms = TransformChain(
            [
                *validated.transforms.transforms,
                *(t if isinstance(t, Transform) else FunctionTransform(t) for t in transforms),
            ]
        )
        self._consumer = consumer
        self._batch_handler = batch_handler
        if isinstance(serializer, JsonSerializer):
            serializer.check_config(self.config)
        self._serializer = serializer
        self._store = offset_store or self._configured_store()
        self._policy = commit_policy or make_commit_policy(
            self.settings["offset.commit.policy"], self.settings["offset.flush.interval.ms"]
        )
        self._clock = clock
        self._retry = RetryPolicy(
            self.settings["errors.max.retries"],
            self.settings["errors.retry.delay.initial.ms"] / 1000,
            self.settings["errors.retry.delay.max.ms"] / 1000,
        )
        self._state = StateMachine(self.name)
        channels = self.settings["notification.enabled.channels"]
        #: Notifications of every task (GET /notifications reads them) and the in-process signal
        #: channel (POST /signals writes to it).
        self.notifications = NotificationBus(channels, self.settings["notification.sink.topic.name"])
        self.signals = InProcessChannel()
        self._stop = StopSignal(self.settings["record.processing.shutdown.timeout.ms"] / 1000)
        self._runners: list[TaskRunner] = []
        self._pool: ThreadPoolExecutor | None = None
        self._error: BaseException | None = None
        self._error_lock = threading.Lock()
        # Threads that belong to this engine: close() from one of them must not wait for itself.
        self._own_threads: set[int] = set()

    # -- configuration ---------------------------------------------------------------------
    def _configured_store(self) -> OffsetStore:
        return build_offset_store(self.name, self.settings)

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def state(self) -> EngineState:
        return self._state.state

    @property
    def offset_store(self) -> OffsetStore:
        return self._store

    @property
    def tasks(self) -> list[TaskRunner]:
        return list(self._runners)

    def run(self) -> None:
        """Run until :meth:`close` or a fatal error; raises EngineFailedError after a failure.

        A stopped engine cannot run again: build a new one.
        """
        try:
            self._state.transition(EngineState.CREATING, EngineState.INITIALIZING)
        except IllegalStateError as exc:
            raise IllegalStateError(
                f"engine {self.name!r} is {self.state.value}: an engine runs once; build a new Engine",
                expected="CREATING",
                actual=self.state.value,
                requested="INITIALIZING",
            ) from exc
        self._own_threads.add(threading.get_ident())
        tuned = collector.raise_threshold(self.settings["gc.generation0.threshold"])
        try:
            self._initialize()
            if self._advance(EngineState.INITIALIZING, EngineState.CREATING_TASKS):
                self._create_tasks()
            if self._advance(EngineState.CREATING_TASKS, EngineState.STARTING_TASKS):
                self._start_tasks()
            if self._advance(EngineState.STARTING_TASKS, EngineState.POLLING_TASKS):
                self._poll_tasks()
        except BaseException as exc:
            self._fail(exc)
        finally:
            self._shutdown()
            if tuned:
                collector.release()
        if self._error is not None:
            raise EngineFailedError(f"engine {self.name!r} stopped after an error: {self._error}") from self._error

    def _advance(self, current: EngineState, following: EngineState) -> bool:
        """Go to the next phase unless a stop was asked for meanwhile."""
        if self._stop.is_set():
            return False
        self._state.transition(current, following)
        return True

    def _initialize(self) -> None:
        self._store.start()
        threads = self.settings["record.processing.threads"]
        self._pool = ThreadPoolExecutor(
            max_workers=threads,
            thread_name_prefix=f"cdc-{self.name}-record",
            initializer=lambda: self._own_threads.add(threading.get_ident()),
        )

    def _create_tasks(self) -> None:
        self._connector.start(self.config)
        configs = self._connector.task_configs(self.settings["tasks.max"])
        task_class = self._connector.task_class()
        reader = OffsetReader(self._store)
        assert self._pool is not None
        threads = self.settings["record.processing.threads"]
        pipeline = Pipeline(self._transforms, self._serializer, self._pool, threads, self._retry, self._stop)
        environment = TaskEnvironment(
            self._store,
            self._policy,
            self._retry,
            self._stop,
            self.settings["max.queue.size"],
            self._fail,
            self._clock,
        )
        for index, task_config in enumerate(configs):
            context = TaskContext(
                f"{self.name}-{index}",
                self.name,
                task_config,
                reader,
                self._clock,
                notifications=self.notifications,
                signals=self.signals,
            )
            self._runners.append(TaskRunner(task_class(), context, self._processor(pipeline), environment))
        log.info("engine %r: %d task(s) created", self.name, len(self._runners))

    def _processor(self, pipeline: Pipeline) -> RecordProcessor:
        if self._batch_handler is not None:
            return BatchProcessor(self._batch_handler, pipeline)
        assert self._consumer is not None
        if self.settings["record.processing.order"] == "UNORDERED":
            return UnorderedProcessor(self._consumer, pipeline)
        return OrderedProcessor(self._consumer, pipeline)

    def _start_tasks(self) -> None:
        for runner in self._runners:
            runner.launch()
        # Wait for every task to finish starting, even after a failure or a close(): a task
        # abandoned half-started could hold a replication slot that nobody stops.
        timeout = self.settings["task.management.timeout.ms"] / 1000
        for runner in self._runners:
            if not runner.started.wait(timeout):
                limit = f"task.management.timeout.ms={timeout * 1000:.0f}"
                if runner.start_failure is not None:  # the cause first: it is what to mend
                    raise TimeoutError(
                        f"task {runner.task_id} could not start: {runner.start_failure} (still failing after {limit})"
                    )
                raise TimeoutError(f"task {runner.task_id} did not start within {limit}")
        failed = [r for r in self._runners if r.start_error is not None]
        if failed:
            raise failed[0].start_error  # type: ignore[misc]

    def _poll_tasks(self) -> None:
        for runner in self._runners:
            runner.begin_polling()
        self._stop.event.wait()

    def _fail(self, exc: BaseException) -> None:
        with self._error_lock:
            if self._error is None:
                self._error = exc
        self._stop.set()

    def _shutdown(self) -> None:
        self._stop.set()
        self._state.transition_to_stopping()
        timeout = self.settings["task.management.timeout.ms"] / 1000
        for runner in self._runners:
            runner.release()
        for runner in self._runners:
            if runner.thread.ident is not None:  # launched
                runner.thread.join(timeout)
            if runner.thread.is_alive():
                log.error("task %s did not stop within task.management.timeout.ms", runner.task_id)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        for step, action in (("connector stop", self._connector.stop), ("offset store stop", self._store.stop)):
            try:
                action()
            except Exception as exc:
                log.error("engine %r: %s failed: %s", self.name, step, exc)
        self._state.transition(EngineState.STOPPING, EngineState.STOPPED)

    def close(self, timeout: float | None = None) -> None:
        """Stop the engine and wait until it is STOPPED (``timeout`` seconds at most).

        During STARTING_TASKS this waits until every task finished starting, then stops them.
        Called from one of the engine's own threads it only asks for the stop.
        """
        self._stop.set()
        if self._state.state is EngineState.CREATING:
            left = self._state.transition_to_stopping()
            if left is EngineState.CREATING:  # run() was never called: nothing else will stop it
                self._state.transition(EngineState.STOPPING, EngineState.STOPPED)
                return
        current = threading.current_thread()
        if current.ident in self._own_threads or any(r.thread is current for r in self._runners):
            return
        if not self._state.wait_for([EngineState.STOPPED], timeout):
            raise TimeoutError(f"engine {self.name!r} did not stop within {timeout}s (state {self.state.value})")

    @property
    def error(self) -> BaseException | None:
        return self._error

    def pause(self) -> None:
        """Stop polling the source (Kafka Connect's pause); what is in flight is still delivered
        and committed, connections stay open. The source's log is retained meanwhile."""
        for runner in self._runners:
            runner.paused.set()

    def resume(self) -> None:
        for runner in self._runners:
            runner.paused.clear()

    def commit_now(self, timeout: float = 10.0) -> bool:
        """Commit every task's delivered records now, whatever ``offset.flush.interval.ms`` says;
        True when every task did so within ``timeout`` seconds (each at its next loop, about
        ``poll.interval.ms``)."""
        if self.state is not EngineState.POLLING_TASKS:
            return False
        deadline = self._clock.monotonic() + timeout
        return all(r.request_commit(max(0.0, deadline - self._clock.monotonic())) for r in self._runners)

    @property
    def paused(self) -> bool:
        return bool(self._runners) and all(r.paused.is_set() for r in self._runners)

    def retrying(self) -> list[tuple[str, Retrying]]:
        """``(task, retry)`` of every task that retries a failed start, poll or delivery now."""
        return [(r.retrying.owner, now) for r in self._runners if (now := r.retrying.current()) is not None]

    def health(self) -> Health:
        """RUNNING, RETRYING (nothing moves until the retried call succeeds), PAUSED, STARTING,
        STOPPED or FAILED, and the cause (``health.py``)."""
        error = None if self._error is None else str(self._error)
        return judge(self.state.value, paused=self.paused, error=error, retrying=self.retrying())

    def status(self) -> dict[str, Any]:
        """``state`` is the engine's phase of life (clients parse it); ``health`` and ``cause``
        are what a person reads first."""
        health = self.health()
        return {
            "name": self.name,
            "state": self.state.value,
            "health": health.health,
            "cause": health.cause,
            "paused": self.paused,
            "tasks": [runner.status() for runner in self._runners],
            "error": None if self._error is None else str(self._error),
        }

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
