"""Shared by the transaction metadata tests (PostgreSQL, MariaDB): a consumer that keeps every
record with its topic, and can crash after some."""

from __future__ import annotations

import json
import threading
from typing import Any


class Events:
    """Every delivered record as ``{"topic", "key", "value"}``, in delivery order."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.fail_after = fail_after

    def __call__(self, item: Any) -> None:
        with self.lock:
            if self.fail_after is not None and len(self.events) >= self.fail_after:
                raise RuntimeError("the consumer stops here (a crash mid-transaction)")
            self.events.append(
                {
                    "topic": item.topic,
                    "key": json.loads(item.key) if item.key else None,
                    "value": json.loads(item.value) if item.value else None,
                }
            )

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)
