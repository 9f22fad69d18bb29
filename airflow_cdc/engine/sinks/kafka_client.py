"""The seam between the Kafka sink and a Kafka client library (kafka-python or confluent-kafka).

The sink (``sinks/kafka.py``) owns the delivery rules - which batches wait, when one is marked
processed, when a producer is replaced and what is sent again. A :class:`ProducerClient` owns
what differs between the libraries: building a producer, sending one batch, learning of its
acknowledgements, creating a topic.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord


class Pending(abc.ABC):
    """One batch handed to one producer, waiting for its acknowledgements. A batch sent again
    (by a new producer) is a new ``Pending`` with the same committer and records."""

    __slots__ = ("committer", "records")

    def __init__(self, committer: RecordCommitter, records: list[SerializedRecord]) -> None:
        self.committer = committer
        self.records = records

    @abc.abstractmethod
    def reap(self) -> bool | None:
        """True once every record is acknowledged, False if one failed, None while waiting."""

    @abc.abstractmethod
    def waiting(self) -> int:
        """How many records are not acknowledged yet (for the metrics)."""

    @abc.abstractmethod
    def error(self) -> object:
        """What made :meth:`reap` return False."""


class Topics:
    """The topics known to exist; the others are created (if allowed) before their first send."""

    def __init__(self, create: Callable[[str], None] | None) -> None:
        self._create = create  # None: topic.creation.enable=false, the broker decides
        self.known: set[str] = set()

    def ensure(self, topic: str) -> None:
        if self._create is not None:
            self._create(topic)
        self.known.add(topic)

    def forget(self) -> None:
        """After a producer failure: a topic deleted meanwhile is created again."""
        self.known.clear()


P = TypeVar("P", bound=Pending)


class ProducerClient(abc.ABC, Generic[P]):
    """One client library behind the Kafka sink; built from the sink's settings (it validates
    ``sink.kafka.producer.*`` in its constructor and raises ``ConfigError``)."""

    #: The ``sink.kafka.client`` value that selects it.
    name: ClassVar[str]
    #: The brokers, host:port[,host:port...] (for messages).
    bootstrap_servers: str

    @abc.abstractmethod
    def __init__(self, settings: Mapping[str, Any]) -> None:
        """Map and check ``sink.kafka.producer.*``; raise ``ConfigError``, or
        ``MissingDependencyError`` when the library is not installed."""

    @abc.abstractmethod
    def new_producer(self) -> Any:
        """A connected producer; ``RetriableError`` when Kafka cannot be reached."""

    @abc.abstractmethod
    def pending(self, committer: RecordCommitter, records: list[SerializedRecord]) -> P:
        """A fresh, unsent :class:`Pending` for these records."""

    @abc.abstractmethod
    def send(self, producer: Any, pending: P, topics: Topics, stop: Callable[[], bool]) -> None:
        """Hand every record of ``pending`` to ``producer``, in order; raise on the first failure.
        While waiting for room in the producer's buffer, give up (the rest unsent) once
        ``stop()`` is true: the sink failed or is closing."""

    @abc.abstractmethod
    def serve(self, producer: Any, stopping: threading.Event) -> None:
        """Called in a loop by the sink's reaper thread, and only there, between two looks at
        the pending batches: let acknowledgements arrive (a few milliseconds at most)."""

    def flush(self, producer: Any, timeout: float) -> None:
        """Send what the producer buffers now (the sink then waits for the acknowledgements)."""

    def refusal(self, error: object) -> str | None:
        """For an error that refuses a record for good (too large, no key and no value, a topic
        name Kafka does not take): what to change; None for the others, which a new producer
        sending again may get past."""
        return None

    @abc.abstractmethod
    def close_producer(self, producer: Any) -> None:
        """Drop a producer at once; what it did not deliver fails (the sink sends it again)."""

    @abc.abstractmethod
    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        """Create ``topic``; no error if it exists."""
