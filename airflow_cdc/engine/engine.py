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
from airflow_cdc.engine.config import Config
from airflow_cdc.engine.connector import SYSTEM_CLOCK, Clock, SourceConnector, TaskContext, load_connector_class
from airflow_cdc.engine.engine_config import ENGINE_CONFIG
from airflow_cdc.engine.errors import ConfigError, ConfigProblem, EngineFailedError, IllegalStateError
from airflow_cdc.engine.notifications import NotificationBus
from airflow_cdc.engine.processing import (
    BatchHandler,
    BatchProcessor,
    OrderedProcessor,
    RecordConsumer,
    RecordProcessor,
    StopSignal,
    UnorderedProcessor,
)
from airflow_cdc.engine.retry import RetryPolicy
from airflow_cdc.engine.serialization import Serializer
from airflow_cdc.engine.signals.channels import InProcessChannel
from airflow_cdc.engine.state import EngineState, StateMachine
from airflow_cdc.engine.storage import (
    OffsetReader,
    OffsetStore,
    build_offset_store,
    offset_store_problems,
    resolve_key_aliases,
)
from airflow_cdc.engine.task_runner import TaskRunner
from airflow_cdc.engine.transforms import FunctionTransform, Transform, TransformChain, build_transform_chain

log = logging.getLogger(__name__)


class Engine:
    """Runs one connector's tasks and delivers their records to a consumer or batch handler.

    Give exactly one of ``consumer`` (called per record) or ``batch_handler``. With a
    ``serializer`` the consumer gets :class:`SerializedRecord`, else :class:`SourceRecord`.
    """

    def __init__(
        self,
        config: Mapping[str, object],
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
        self.config = config if isinstance(config, Config) else Config(config)
        if connector is not None and "connector.class" not in self.config:
            self.config = self.config.with_(
                **{"connector.class": f"{type(connector).__module__}:{type(connector).__qualname__}"}
            )
        self.settings, self._connector, configured = self._validate(connector, offset_store)
        self.name: str = self.settings["name"]
        self._transforms = TransformChain(
            [*configured.transforms, *(t if isinstance(t, Transform) else FunctionTransform(t) for t in transforms)]
        )
        self._consumer = consumer
        self._batch_handler = batch_handler
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
    def _validate(
        self, connector: SourceConnector | None, offset_store: OffsetStore | None
    ) -> tuple[dict[str, Any], SourceConnector, TransformChain]:
        resolved, problems = resolve_key_aliases(self.config)
        values, more = ENGINE_CONFIG.check(resolved)
        problems.extend(more)
        if connector is None and "connector.class" in values:
            try:
                connector = load_connector_class(values["connector.class"])()
            except ValueError as exc:
                problems.append(ConfigProblem("connector.class", str(exc), "name an installed connector"))
        if connector is not None:
            problems.extend(connector.validate(self.config))
        if offset_store is None:
            problems.extend(offset_store_problems(values))
        chain = TransformChain()
        try:
            chain = build_transform_chain(self.config)
        except ConfigError as exc:
            problems.extend(exc.problems)
        if problems:
            raise ConfigError(problems)
        assert connector is not None
        return values, connector, chain

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
            self._runners.append(
                TaskRunner(
                    task=task_class(),
                    context=context,
                    processor=self._processor(),
                    store=self._store,
                    policy=self._policy,
                    retry=self._retry,
                    stop=self._stop,
                    max_pending=self.settings["max.queue.size"],
                    on_failure=self._fail,
                    clock=self._clock,
                )
            )
        log.info("engine %r: %d task(s) created", self.name, len(self._runners))

    def _processor(self) -> RecordProcessor:
        assert self._pool is not None
        common: dict[str, Any] = dict(
            transforms=self._transforms,
            serializer=self._serializer,
            pool=self._pool,
            threads=self.settings["record.processing.threads"],
            retry=self._retry,
            stop=self._stop,
        )
        if self._batch_handler is not None:
            return BatchProcessor(self._batch_handler, **common)
        assert self._consumer is not None
        if self.settings["record.processing.order"] == "UNORDERED":
            return UnorderedProcessor(self._consumer, **common)
        return OrderedProcessor(self._consumer, **common)

    def _start_tasks(self) -> None:
        for runner in self._runners:
            runner.launch()
        # Wait for every task to finish starting, even after a failure or a close(): a task
        # abandoned half-started could hold a replication slot that nobody stops.
        timeout = self.settings["task.management.timeout.ms"] / 1000
        for runner in self._runners:
            if not runner.started.wait(timeout):
                raise TimeoutError(
                    f"task {runner.task_id} did not start within task.management.timeout.ms={timeout * 1000:.0f}"
                )
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

    @property
    def paused(self) -> bool:
        return bool(self._runners) and all(r.paused.is_set() for r in self._runners)

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state.value,
            "paused": self.paused,
            "tasks": [runner.status() for runner in self._runners],
            "error": None if self._error is None else str(self._error),
        }

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
