"""Signal channels other than the signal table (which the source reads from its own stream).

* ``api`` - :class:`InProcessChannel`, fed by the control API's ``POST /signals``; it also
  routes every channel's signals to the tasks they concern (:class:`Subscription`);
* ``file`` - :class:`FileChannel`, Debezium's ``signal.file``: JSON lines
  ``{"id", "type", "data"}``, consumed and the file emptied;
* ``kafka`` - :class:`KafkaChannel`, Debezium's ``signal.kafka.topic``: records whose key is the
  connector's ``topic.prefix`` and whose value is ``{"type", "data"}``.

Channels are polled by the tasks that act on the signals; :meth:`read` never blocks for long.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import threading
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from airflow_cdc.engine.config import Field
from airflow_cdc.engine.kafka_settings import kafka_python_config, open_client, security_fields, security_settings
from airflow_cdc.engine.signals.signal import Signal, SignalError, parse_signal

#: Debezium's pass-through prefix for the Kafka signal channel's consumer.
CONSUMER_PREFIX = "signal.consumer."
log = logging.getLogger(__name__)


class SignalChannel(abc.ABC):
    name: str

    @abc.abstractmethod
    def read(self) -> list[Signal | SignalError]:
        """Signals that arrived since the last call (bad ones as errors, to be reported)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class InProcessChannel(SignalChannel):
    """The ``api`` channel (:meth:`send`, from the control API's ``POST /signals``), and the
    engine's signal router.

    A task subscribes (:meth:`subscribe`) with a predicate saying which signals concern it (an
    execute-snapshot naming tables it captures, a stop, pause or resume of a snapshot it runs).
    Every signal of the api, file and kafka channels goes to each task it concerns - with
    ``database.names`` a table in two databases is snapshotted by both tasks - or, when it
    concerns none, to the first task, which says why it cannot act on it. So no valid signal is
    rejected because the wrong task read it. File and kafka channels are opened once per engine,
    however many tasks share them. Used without subscriptions, :meth:`read` takes what was sent.
    """

    name = "api"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reading = threading.Lock()  # shared channels are read by one task at a time
        self._opening = threading.RLock()  # subscribing and unsubscribing, one at a time
        self._queue: deque[Signal | SignalError] = deque()
        self._subscriptions: list[Subscription] = []
        self._shared: dict[str, _Shared] = {}

    def send(self, signal_type: str, data: Any = None, signal_id: str | None = None) -> str:
        """Queue a signal; returns its id. Raises SignalError at once for a malformed one."""
        signal_id = signal_id or str(uuid.uuid4())
        signal = parse_signal(signal_id, signal_type, data, self.name)
        with self._lock:
            self._queue.append(signal)
        return signal_id

    def read(self) -> list[Signal | SignalError]:
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
        return items

    def subscribe(
        self,
        concerns: Callable[[Signal], bool],
        channels: Mapping[str, Callable[[], SignalChannel]] | None = None,
        *,
        api: bool = True,
    ) -> Subscription:
        """A task's share of the signals: those of the api channel (if ``api``) and of
        ``channels`` (opened here unless another task opened the same key already) that
        ``concerns`` it. ``concerns`` is called from other tasks' threads too."""
        subscription = Subscription(self, concerns, api)
        with self._opening:
            try:
                for key, factory in (channels or {}).items():
                    with self._lock:
                        shared = self._shared.get(key)
                    if shared is None:
                        shared = _Shared(factory())
                    with self._lock:
                        self._shared[key] = shared
                        shared.users += 1
                    subscription.keys += (key,)
            except BaseException:
                self._unsubscribe(subscription)
                raise
            with self._lock:
                self._subscriptions.append(subscription)
        return subscription

    def _route(self) -> None:
        """Take what every channel has and hand each signal to the subscriptions it concerns."""
        items: list[Signal | SignalError] = []
        with self._reading:
            with self._lock:
                channels = [shared.channel for shared in self._shared.values()]
                if any(s.api for s in self._subscriptions):
                    items.extend(self._queue)
                    self._queue.clear()
            for channel in channels:
                items.extend(channel.read())
        for item in items:
            self._deliver(item, None)

    def _deliver(self, item: Signal | SignalError, sender: Subscription | None) -> bool:
        """Hand ``item`` to every subscription it concerns but ``sender``; if it concerns none,
        to ``sender`` or else the first. True if ``sender`` should act on it."""
        with self._lock:
            subscriptions = list(self._subscriptions)
        owners = [] if isinstance(item, SignalError) else [s for s in subscriptions if s.concerned(item)]
        if not owners:
            owners = [sender] if sender is not None else subscriptions[:1]
        for owner in owners:
            if owner is not sender:
                owner.put(item)
        return sender in owners

    def _unsubscribe(self, subscription: Subscription) -> None:
        closing: list[SignalChannel] = []
        with self._opening:
            with self._lock:
                if subscription in self._subscriptions:
                    self._subscriptions.remove(subscription)
                for key in subscription.keys:
                    shared = self._shared[key]
                    shared.users -= 1
                    if shared.users == 0:
                        closing.append(self._shared.pop(key).channel)
                subscription.keys = ()
            for channel in closing:
                try:
                    channel.close()
                except Exception as exc:  # closing must not fail a task's stop
                    log.warning("closing signal channel %s failed: %s", channel.name, exc)


@dataclass
class _Shared:
    channel: SignalChannel
    users: int = 0


class Subscription(SignalChannel):
    """One task's signals from the engine's channels (see :class:`InProcessChannel`)."""

    name = "api"

    def __init__(self, hub: InProcessChannel, concerns: Callable[[Signal], bool], api: bool) -> None:
        self._hub, self._concerns, self.api = hub, concerns, api
        self.keys: tuple[str, ...] = ()  # the shared channels it uses
        self._lock = threading.Lock()
        self._inbox: deque[Signal | SignalError] = deque()

    def read(self) -> list[Signal | SignalError]:
        self._hub._route()
        with self._lock:
            items = list(self._inbox)
            self._inbox.clear()
        return items

    def share(self, signal: Signal) -> bool:
        """A signal this task read itself (its own signal table): hand it to the other tasks
        it concerns. True if this task acts on it too (it concerns it, or no task)."""
        return self._hub._deliver(signal, self)

    def concerned(self, signal: Signal) -> bool:
        try:
            return self._concerns(signal)
        except Exception as exc:  # a task's judgement must not break another task's read
            log.warning("signal %s: routing it failed: %s", signal.id, exc)
            return False

    def put(self, item: Signal | SignalError) -> None:
        with self._lock:
            self._inbox.append(item)

    def close(self) -> None:
        self._hub._unsubscribe(self)


class FileChannel(SignalChannel):
    name = "file"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[Signal | SignalError]:
        try:
            if self.path.stat().st_size == 0:
                return []
        except FileNotFoundError:
            return []
        # Take the lines and leave an empty file: rename first, so lines appended meanwhile by
        # a writer that opened the file before the rename are still read from the taken file.
        taken = self.path.with_name(f".{self.path.name}.{os.getpid()}.taken")
        os.replace(self.path, taken)
        self.path.touch()
        try:
            lines = taken.read_bytes().splitlines()
        finally:
            with contextlib.suppress(FileNotFoundError):
                taken.unlink()
        out: list[Signal | SignalError] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                item = orjson.loads(line)
                if not isinstance(item, dict):
                    raise SignalError(f"{self.path}:{number}: a signal line must be a JSON object")
                out.append(
                    parse_signal(str(item.get("id") or uuid.uuid4()), item.get("type", ""), item.get("data"), self.name)
                )
            except orjson.JSONDecodeError as exc:
                out.append(SignalError(f"{self.path}:{number}: not valid JSON ({exc})"))
            except SignalError as exc:
                out.append(exc)
        return out


class KafkaChannel(SignalChannel):
    name = "kafka"

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        key: str,
        group_id: str = "kafka-signal",
        security: Mapping[str, Any] | None = None,
    ) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.admin import KafkaAdminClient, NewTopic

        self.topic, self.key = topic, key
        # Debezium's signal.consumer.* (security.protocol, sasl.*, ssl.*), for both clients.
        client = {"bootstrap_servers": bootstrap_servers}
        client |= kafka_python_config(security or {}, KafkaAdminClient.DEFAULT_CONFIG, prefix=CONSUMER_PREFIX)
        # Partitions are assigned, not negotiated in a group: a group join takes seconds and
        # signals sent meanwhile would be skipped. Reading starts at the end when the channel
        # opens (committed to group_id, as Debezium's channel does, so a restart goes on there).
        self._consumer = open_client(
            KafkaConsumer,
            {
                **client,
                "group_id": group_id,
                "enable_auto_commit": True,
                "auto_offset_reset": "latest",
                # The Java client's default; kafka-python's 30 s outlasts a broker restart.
                "reconnect_backoff_max_ms": 1000,
            },
            setting_prefix=CONSUMER_PREFIX,
        )
        partitions = self._consumer.partitions_for_topic(topic) or set()
        if not partitions:
            admin = KafkaAdminClient(**client)
            try:
                admin.create_topics([NewTopic(topic, 1, -1)])
            except Exception as exc:  # created meanwhile by someone else
                log.debug("signal topic %s: %s", topic, exc)
            finally:
                admin.close()
            partitions = {0}
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        self._consumer.assign(assigned)
        for partition in assigned:
            self._consumer.position(partition)  # resolve the start now, not at the first poll

    def read(self) -> list[Signal | SignalError]:
        out: list[Signal | SignalError] = []
        for batch in self._consumer.poll(timeout_ms=0).values():
            for message in batch:
                if message.key is None or message.key.decode(errors="replace") != self.key:
                    continue  # Debezium: signals for other connectors share the topic
                signal_id = f"{message.topic}-{message.partition}-{message.offset}"
                try:
                    value = orjson.loads(message.value or b"{}")
                    if not isinstance(value, dict):
                        raise SignalError(f"signal {signal_id}: the value must be a JSON object", signal_id)
                    out.append(parse_signal(signal_id, value.get("type", ""), value.get("data"), self.name))
                except orjson.JSONDecodeError as exc:
                    out.append(SignalError(f"signal {signal_id}: not valid JSON ({exc})", signal_id))
                except SignalError as exc:
                    out.append(exc)
        return out

    def close(self) -> None:
        self._consumer.close()


#: The signal channels' settings (Debezium's names), shared by the database sources.
SIGNAL_FIELDS = (
    Field("signal.enabled.channels", type="list", default=["source", "api"], doc="source, api, file, kafka."),
    Field("signal.file", default="file-signals.txt", doc="The file channel's file (JSON lines)."),
    Field("signal.kafka.topic", default="", doc="The Kafka channel's topic (record key = topic.prefix)."),
    Field("signal.kafka.bootstrap.servers", default=""),
    Field("signal.kafka.groupId", default="kafka-signal"),
    # Debezium passes signal.consumer.* to the channel's consumer; the security ones are read here.
    *security_fields(CONSUMER_PREFIX, "The Kafka signal channel"),
)


def configured_channels(settings: Mapping[str, Any]) -> tuple[bool, dict[str, Callable[[], SignalChannel]]]:
    """From Debezium's ``signal.*`` settings: whether the api channel is enabled, and the file
    and kafka channels to open, each under a key naming what it reads (tasks share them)."""
    enabled = set(settings["signal.enabled.channels"])
    channels: dict[str, Callable[[], SignalChannel]] = {}
    if "file" in enabled:
        path = Path(settings["signal.file"])
        channels[f"file:{path.resolve()}"] = lambda: FileChannel(path)
    topic = settings["signal.kafka.topic"]
    if "kafka" in enabled and topic:
        servers, key, group = (
            settings["signal.kafka.bootstrap.servers"],
            settings["topic.prefix"],
            settings["signal.kafka.groupId"],
        )
        security = {CONSUMER_PREFIX + k: v for k, v in security_settings(settings, CONSUMER_PREFIX).items()}
        channels[f"kafka:{servers}/{topic}/{key}/{group}"] = lambda: KafkaChannel(servers, topic, key, group, security)
    return "api" in enabled, channels
