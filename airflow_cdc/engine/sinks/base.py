"""The sink contract: a batch handler that delivers serialized records somewhere and marks each
one processed only once it is durable there (acknowledged by Kafka, renamed into a changelog
segment, ...). The engine commits an offset only when that record and every record before it
were marked, so a sink decides what "delivered" means and the engine never loses a change.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from airflow_cdc.engine.config import ConfigDef
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.retry import RetryWatch


class Sink(abc.ABC):
    """Handed to the engine as its ``batch_handler`` (records arrive serialized, in source
    order per task). Several tasks may call :meth:`handle_batch` at once: sinks are
    thread-safe. Use as a context manager, or call :meth:`start` and :meth:`close`."""

    #: The ``sink.type`` value that selects this sink.
    type: ClassVar[str]
    #: Its settings, under the ``sink.<type>.`` prefix unless a field says otherwise.
    config: ClassVar[ConfigDef] = ConfigDef()

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        self.settings: dict[str, Any] = self.config.validate(settings or {})
        self._counters_lock = threading.Lock()
        self.delivered = 0
        #: What the sink retries on its own now (a Kafka sink replacing its producer), shown in
        #: the instance's status: RETRYING, with the cause.
        self.retrying = RetryWatch(f"{getattr(self, 'type', '')} sink".strip())

    def start(self) -> None:  # noqa: B027 - optional hook
        """Connect, create directories, recover what a crash left behind."""

    @abc.abstractmethod
    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        """Deliver ``records`` in order; mark each processed once it is durable (maybe later)."""

    def flush(self, timeout: float) -> None:  # noqa: B027 - optional hook
        """Make buffered records durable now (and mark them); at most ``timeout`` seconds."""

    def close(self, timeout: float = 10.0) -> None:  # noqa: B027 - optional hook
        """Flush and release everything; records not yet durable stay unmarked."""

    def metrics(self) -> dict[str, float]:
        """Counters for the status API and Prometheus."""
        return {"delivered": self.delivered}

    def topic_ends(self) -> dict[str, int]:
        """Per topic, how many records the sink holds durably since the topic's first one (a
        number that only grows, across restarts): what the table-change watchers compare. Empty
        where the sink cannot say (Kafka: the topics' end offsets are asked of the brokers)."""
        return {}

    def _count(self, n: int) -> None:
        with self._counters_lock:
            self.delivered += n

    def __enter__(self) -> Sink:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
