"""Notifications in Debezium's shape: ``{id, aggregate_type, type, additional_data, timestamp}``
(``additional_data`` a map of strings, ``timestamp`` epoch milliseconds as a string).

A :class:`NotificationBus` belongs to an engine; tasks publish to it and its channels deliver:
``log`` (a log line), ``api`` (kept in memory for ``GET /notifications?since=<cursor>``) and
``sink`` (a record on ``notification.sink.topic.name``, taken by the task into its next poll so it
travels through transforms, serializer and sink like any record).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

INCREMENTAL = "Incremental Snapshot"
INITIAL = "Initial Snapshot"
BLOCKING = "Blocking Snapshot"
SIGNAL = "Signal"

#: What the api channel keeps for readers that come late.
KEEP = 10_000


@dataclass(frozen=True)
class Notification:
    aggregate_type: str
    type: str
    additional_data: Mapping[str, str] = field(default_factory=dict)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: str = field(default_factory=lambda: str(time.time_ns() // 1_000_000))

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "aggregate_type": self.aggregate_type,
            "type": self.type,
            "additional_data": dict(self.additional_data),
            "timestamp": self.timestamp,
        }


class NotificationBus:
    """Thread-safe; ``channels`` from ``notification.enabled.channels``."""

    def __init__(self, channels: list[str] | tuple[str, ...] = ("log", "api"), sink_topic: str = "") -> None:
        self.channels = frozenset(channels)
        self.sink_topic = sink_topic
        self._lock = threading.Lock()
        self._kept: deque[tuple[int, Notification]] = deque(maxlen=KEEP)
        self._for_sink: list[Notification] = []
        self._next = 1

    def publish(self, notification: Notification) -> None:
        if "log" in self.channels:
            log.info(
                "notification %s %s %s: %s",
                notification.aggregate_type,
                notification.type,
                notification.id,
                dict(notification.additional_data),
            )
        with self._lock:
            if "api" in self.channels:
                self._kept.append((self._next, notification))
                self._next += 1
            if "sink" in self.channels and self.sink_topic:
                self._for_sink.append(notification)

    def since(self, cursor: int = 0, limit: int = 1000) -> tuple[list[dict[str, Any]], int]:
        """Notifications after ``cursor`` and the cursor to ask with next time."""
        with self._lock:
            items = [(n, x) for n, x in self._kept if n > cursor][:limit]
            last = items[-1][0] if items else max(cursor, self._next - 1 if not self._kept else cursor)
        return [x.as_dict() for _, x in items], last

    def take_for_sink(self) -> list[Notification]:
        with self._lock:
            taken, self._for_sink = self._for_sink, []
        return taken
