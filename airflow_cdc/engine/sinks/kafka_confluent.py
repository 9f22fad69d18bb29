"""The confluent-kafka (librdkafka) client of the Kafka sink: ``sink.kafka.client=confluent``,
installed with ``pip install 'airflow-cdc[confluent]'``.

``sink.kafka.producer.*`` keeps the Java names; librdkafka reads most of them as they are
(bootstrap.servers, acks, linger.ms, batch.size, compression.type, delivery.timeout.ms,
security.protocol, ssl.*, sasl.mechanism, ...). :func:`producer_config` renames the few it
spells differently and refuses, naming what to set instead, the Java settings it has no
counterpart of. librdkafka checks every name and value itself when the producer is built.

Delivery reports are how librdkafka acknowledges a record, and they run only inside ``poll()``
or ``flush()``, on the thread that calls them. Two threads poll, one at a time (a lock, so the
callbacks never run concurrently):

- the sender, right after each batch (``poll(0)``) and while it waits for room in a full queue.
  Served on another thread while the sender runs Python code, every report would fight for the
  GIL - confluent-kafka takes and drops it once per report - which cost the sink about a sixth
  of its CPU time in ``bench/kafka_sink.py``;
- the sink's reaper thread (:meth:`ConfluentClient.serve`) while no batch came for ``POLL_S``:
  without it the last batch would stay unacknowledged, and its offsets uncommitted, for as long
  as the source is idle.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem, MissingDependencyError, RetriableError
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.sinks.kafka_client import Pending, ProducerClient, Topics

try:
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports, typed

    _MISSING: ImportError | None = None
except ImportError as exc:  # importing this module stays possible; ConfluentClient() says what to install
    _MISSING = exc

log = logging.getLogger(__name__)


def import_error() -> ImportError | None:
    """Why confluent_kafka could not be imported, or ``None``: it is there."""
    return _MISSING


#: librdkafka's own log lines (served by poll(), like the delivery reports).
librdkafka_log = logging.getLogger(f"{__name__}.librdkafka")

PRODUCER_PREFIX = "sink.kafka.producer."

#: Where this sink's settings differ from librdkafka's defaults.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    # librdkafka retries without limit within delivery.timeout.ms; idempotence keeps those
    # retries from duplicating or reordering the records of a partition.
    "enable.idempotence": True,
    "linger.ms": 5,  # as the kafka-python client
    # The Java client's key hash, which kafka-python uses too: a key stays on its partition when
    # the sink changes client (librdkafka's default, consistent_random, hashes with CRC32).
    "partitioner": "murmur2_random",
}

#: Java names librdkafka spells differently: Java name -> (librdkafka name, value conversion).
RENAMED: dict[str, tuple[str, Any]] = {
    "buffer.memory": ("queue.buffering.max.kbytes", lambda raw: max(1, int(raw) // 1024)),
    "max.request.size": ("message.max.bytes", int),
    "send.buffer.bytes": ("socket.send.buffer.bytes", int),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", int),
}

_SERIALIZED = "remove it: the sink sends the bytes the engine serialized"
_TRUSTSTORE = "set sink.kafka.producer.ssl.ca.location to a PEM file of the CA certificates instead"
#: Java producer settings librdkafka has no counterpart of, and what to do instead.
JAVA_ONLY: dict[str, str] = {
    "max.block.ms": (
        "remove it: librdkafka's produce() never blocks; the sink waits for room in "
        "queue.buffering.max.messages / queue.buffering.max.kbytes as long as it takes"
    ),
    "sasl.jaas.config": "set sink.kafka.producer.sasl.username and sink.kafka.producer.sasl.password instead",
    "key.serializer": _SERIALIZED,
    "value.serializer": _SERIALIZED,
    "partitioner.class": "set sink.kafka.producer.partitioner instead (murmur2_random is the Java client's hash)",
    "interceptor.classes": "remove it: librdkafka cannot load Java classes",
    "metric.reporters": "remove it: librdkafka cannot load Java classes",
    "ssl.truststore.location": _TRUSTSTORE,
    "ssl.truststore.password": _TRUSTSTORE,
    "ssl.truststore.type": _TRUSTSTORE,
    "ssl.keystore.type": "remove it: librdkafka reads ssl.keystore.location as PKCS#12",
    "transactional.id": "remove it: the sink does not use transactions (the idempotent producer keeps the order)",
}

#: librdkafka's errors name its own spelling of a property; the Java one a user may have written.
_ALIASES = {
    "queue.buffering.max.ms": "linger.ms",
    "message.timeout.ms": "delivery.timeout.ms",
    "sasl.mechanisms": "sasl.mechanism",
    "request.required.acks": "acks",
}

#: The settings an admin client (topic creation) takes from the producer's.
_CONNECTION_KEYS = ("bootstrap.servers", "client.id", "security.protocol", "broker.address.family")
_CONNECTION_PREFIXES = ("ssl.", "sasl.", "socket.", "reconnect.")


def producer_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``sink.kafka.producer.*`` (Java names) as a librdkafka producer configuration."""
    config: dict[str, Any] = dict(PRODUCER_DEFAULTS)
    problems: list[ConfigProblem] = []
    for key, raw in settings.items():
        if not key.startswith(PRODUCER_PREFIX) or raw is None:
            continue
        name = key[len(PRODUCER_PREFIX) :]
        if name in JAVA_ONLY:
            problems.append(ConfigProblem(key, "is a Java setting librdkafka has no counterpart of", JAVA_ONLY[name]))
        elif name in RENAMED:
            target, convert = RENAMED[name]
            try:
                config[target] = convert(raw)
            except ValueError:
                problems.append(ConfigProblem(key, f"{raw!r} is not an integer", f"set {key} to a number of bytes"))
        else:
            config[name] = raw
    problems += _ordering_problems(config)
    if problems:
        raise ConfigError(problems)
    return config


def _ordering_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """Without idempotence, librdkafka's retries reorder a partition's records unless only one
    request is in flight (its default allows a million)."""
    if str(config["enable.idempotence"]).strip().lower() not in ("false", "0"):
        return []
    in_flight = config.get("max.in.flight.requests.per.connection", config.get("max.in.flight"))
    if in_flight is not None and str(in_flight).strip() == "1":
        return []
    return [
        ConfigProblem(
            PRODUCER_PREFIX + "enable.idempotence",
            "false lets librdkafka's retries reorder the records of a partition",
            "leave it true (the default), or also set sink.kafka.producer.max.in.flight.requests.per.connection=1",
        )
    ]


def admin_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The producer's connection settings, for an admin client (it warns about the others)."""
    return {k: v for k, v in config.items() if k in _CONNECTION_KEYS or k.startswith(_CONNECTION_PREFIXES)}


def _config_error(error: Any, config: Mapping[str, Any]) -> ConfigError:
    """librdkafka's refusal of a name or value, as a problem with the key the user wrote."""
    message = error.str()
    quoted = re.findall(r'"([^"]+)"', message)
    written = [n for q in quoted for n in (q, _ALIASES.get(q, q)) if n in config]
    name = written[0] if written else quoted[0] if quoted else "*"
    return ConfigError(
        [
            ConfigProblem(
                PRODUCER_PREFIX + name,
                f"librdkafka refuses the producer configuration: {message}",
                "fix or remove it; librdkafka's settings are listed in its CONFIGURATION.md",
            )
        ]
    )


class _ReportPending(Pending):
    """Counted from delivery reports, with one callback (bound once per send) for the whole
    batch. Which records got through is not kept: the sink marks a batch as a whole, and after a
    failure sends it again as a whole."""

    __slots__ = ("acked", "failure")

    def __init__(self, committer: RecordCommitter, records: list[SerializedRecord]) -> None:
        super().__init__(committer, records)
        self.acked = 0
        self.failure: Any = None

    def report(self, error: Any, message: Any) -> None:
        # Callbacks run on one thread at a time (ConfluentClient._polling): no lock here.
        if error is None:
            self.acked += 1
        elif self.failure is None:
            self.failure = error

    def reap(self) -> bool | None:
        if self.failure is not None:
            return False
        return True if self.acked == len(self.records) else None

    def waiting(self) -> int:
        return len(self.records) - self.acked

    def error(self) -> object:
        return self.failure


class ConfluentClient(ProducerClient[_ReportPending]):
    name = "confluent"

    #: How long the reaper lets reports wait while no batch is sent (and a sender waits for room).
    POLL_S = 0.01
    #: How long a new producer may take to fetch the cluster's metadata (as max.block.ms does
    #: for kafka-python); the sink retries with backoff after that.
    CONNECT_TIMEOUT_S = 10.0

    def __init__(self, settings: Mapping[str, Any]) -> None:
        if _MISSING is not None:
            raise MissingDependencyError("confluent_kafka", "confluent") from _MISSING
        self.config = producer_config(settings)
        self.bootstrap_servers = str(self.config.get("bootstrap.servers"))
        self._polling = threading.Lock()  # one thread at a time serves reports
        self._sent_at = 0.0  # when a sender last finished a batch (time.monotonic)

    def new_producer(self) -> Producer:
        refused: list[Any] = []  # librdkafka's login and TLS failures, from its error callback

        def on_error(error: Any) -> None:
            if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
                refused.append(error)
            _on_client_error(error)

        try:
            producer = Producer({**self.config, "error_cb": on_error, "logger": librdkafka_log})
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._INVALID_ARG:
                raise _config_error(exc.args[0], self.config) from exc
            raise RetriableError(f"cannot create a Kafka producer: {exc}") from exc
        deadline = time.monotonic() + self.CONNECT_TIMEOUT_S
        while True:
            # In short slices: the error callback runs only in poll(), and a refused login
            # must fail at once (no retry mends a wrong password), not after the timeout.
            try:
                producer.list_topics(timeout=1.0)
                return producer
            except KafkaException as exc:
                producer.poll(0)
                if refused or time.monotonic() > deadline:
                    self.close_producer(producer)
                    if refused:
                        raise _refusal_error(refused[0], self.bootstrap_servers) from exc
                    raise RetriableError(f"cannot connect to Kafka at {self.bootstrap_servers}: {exc}") from exc

    def pending(self, committer: RecordCommitter, records: list[SerializedRecord]) -> _ReportPending:
        return _ReportPending(committer, records)

    def send(self, producer: Producer, pending: _ReportPending, topics: Topics, stop: Callable[[], bool]) -> None:
        produce, report, known = producer.produce, pending.report, topics.known
        for record in pending.records:
            topic = record.topic
            if topic not in known:
                topics.ensure(topic)
            while True:
                try:
                    if record.headers:
                        produce(topic, record.value, record.key, on_delivery=report, headers=list(record.headers))
                    else:
                        produce(topic, record.value, record.key, -1, report)  # positional: no kwargs dict
                    break
                except BufferError:  # librdkafka's queue is full (back-pressure): reports free it
                    with self._polling:
                        producer.poll(self.POLL_S)
                    if stop():
                        return  # the rest stays unsent and unmarked (sent again, or never committed)
        self._sent_at = time.monotonic()  # the reaper leaves the reports to this thread now
        if self._polling.acquire(blocking=False):  # else the reaper is serving them right now
            try:
                producer.poll(0)
            finally:
                self._polling.release()

    def serve(self, producer: Producer | None, stopping: threading.Event) -> None:
        # poll(0), never a blocking poll: holding the lock through one, the reaper would keep
        # the sender from ever serving the reports itself.
        if producer is not None and time.monotonic() - self._sent_at >= self.POLL_S:
            with self._polling:
                if producer.poll(0):
                    return  # more may have come meanwhile: look again at once
        stopping.wait(self.POLL_S)  # or a sender serves them between its batches

    def refusal(self, error: object) -> str | None:
        from airflow_cdc.engine.sinks.kafka_python import BAD_TOPIC, TOO_LARGE

        cause = error.args[0] if isinstance(error, KafkaException) and error.args else error
        code = cause.code() if isinstance(cause, KafkaError) else None
        if code == KafkaError.MSG_SIZE_TOO_LARGE:  # librdkafka's own check and the broker's
            return TOO_LARGE
        if code == KafkaError.TOPIC_EXCEPTION:
            return BAD_TOPIC
        return None

    def close_producer(self, producer: Producer) -> None:
        # close() would wait for every queued record; purge them first (they fail, and the
        # reports go to the batches this producer had, which the sink no longer looks at).
        producer.purge()
        with self._polling:
            producer.poll(0)
        producer.close()

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        admin = AdminClient(admin_config(self.config))
        futures = admin.create_topics([NewTopic(topic, partitions, replication_factor)])
        try:
            futures[topic].result(timeout=self.CONNECT_TIMEOUT_S * 3)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def _refusal_error(error: Any, servers: str) -> ConfigError:
    """A refused SASL login or TLS handshake, naming the setting to check."""
    if "SASL" in error.str():
        names = ("sasl.username", "sasl.password", "sasl.mechanism")
        key, fix = "sasl.password", "check " + ", ".join(PRODUCER_PREFIX + name for name in names)
        problem = f"the brokers at {servers} refused the SASL login ({error.str()})"
    else:
        key, fix = "ssl.ca.location", f"set {PRODUCER_PREFIX}ssl.ca.location to the PEM file of the brokers' CA"
        problem = f"the TLS handshake with the brokers at {servers} failed ({error.str()})"
    return ConfigError([ConfigProblem(PRODUCER_PREFIX + key, problem, fix)])


def _on_client_error(error: Any) -> None:
    """librdkafka's error callback: mostly a broker it cannot reach, which it retries itself.
    A fatal error also fails every queued record, which is how the sink learns of it."""
    if error.fatal():
        log.error("kafka sink (librdkafka): fatal: %s", error)
    else:
        log.warning("kafka sink (librdkafka): %s", error)
