"""Signal channels other than the signal table (which the source reads from its own stream).

* ``api`` - :class:`InProcessChannel`, fed by the control API's ``POST /signals``;
* ``file`` - :class:`FileChannel`, Debezium's ``signal.file``: JSON lines
  ``{"id", "type", "data"}``, consumed and the file emptied;
* ``kafka`` - :class:`KafkaChannel`, Debezium's ``signal.kafka.topic``: records whose key is the
  connector's ``topic.prefix`` and whose value is ``{"type", "data"}``.

Channels are polled by the task that acts on the signals; :meth:`read` never blocks for long.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import threading
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import orjson

from airflow_cdc.engine.signals.signal import Signal, SignalError, parse_signal

log = logging.getLogger(__name__)


class SignalChannel(abc.ABC):
    name: str

    @abc.abstractmethod
    def read(self) -> list[Signal | SignalError]:
        """Signals that arrived since the last call (bad ones as errors, to be reported)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class InProcessChannel(SignalChannel):
    name = "api"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Signal | SignalError] = deque()

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

    def __init__(self, bootstrap_servers: str, topic: str, key: str, group_id: str = "kafka-signal") -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.topic, self.key = topic, key
        # Partitions are assigned, not negotiated in a group: a group join takes seconds and
        # signals sent meanwhile would be skipped. Reading starts at the end when the channel
        # opens (committed to group_id, as Debezium's channel does, so a restart goes on there).
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            enable_auto_commit=True,
            auto_offset_reset="latest",
            # The Java client's default; kafka-python's 30 s outlasts a broker restart.
            reconnect_backoff_max_ms=1000,
        )
        partitions = self._consumer.partitions_for_topic(topic) or set()
        if not partitions:
            from kafka.admin import KafkaAdminClient, NewTopic

            admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
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
