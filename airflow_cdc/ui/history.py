"""The last hour of each instance, kept by the page's backend (ADR 0028): events/s, lag and the
WAL its slot retains, one sample per ``BUCKET_S`` in a ring buffer per instance.

Sampled on request: each time the page's API observes an instance (every open page asks every
``REFRESH_MS``), the observation becomes the bucket's sample - no background task polls
instances nobody watches, and the cost is what the page costs already. The price is plain: the
hour has gaps where no page was open, and each API server worker keeps its own buffer. A chart
that must not have gaps is a metrics system's job (the instance's ``GET /status`` counters).

The retained WAL is a query on the source database, so it is read at most once per bucket.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_cdc.monitoring import InstanceView

WINDOW_S = 3600
BUCKET_S = 10


@dataclass(frozen=True)
class Sample:
    at: float
    events_per_s: float | None
    lag: int | None
    retained_bytes: int | None

    def to_json(self) -> list[Any]:
        """Compact, as the page draws it: ``[seconds since epoch, events/s, lag, retained]``."""
        rate = None if self.events_per_s is None else round(self.events_per_s, 1)
        return [round(self.at, 1), rate, self.lag, self.retained_bytes]


@dataclass(frozen=True)
class Retained:
    """The WAL the slot retains as last read: ``bytes`` None when the source keeps none per
    consumer or it could not be read (``problem`` says why)."""

    bytes: int | None
    problem: str | None
    read_at: float


class History:
    """Ring buffers of samples, one per connection id. Thread-safe."""

    def __init__(
        self, *, window_s: int = WINDOW_S, bucket_s: int = BUCKET_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.bucket_s = bucket_s
        self._size = window_s // bucket_s
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: dict[str, deque[Sample]] = {}
        self._retained: dict[str, Retained] = {}

    def retained(self, conn_id: str, read: Callable[[], int | None]) -> Retained:
        """The retained WAL, read with ``read`` unless read within the current bucket."""
        now = self._clock()
        with self._lock:
            last = self._retained.get(conn_id)
        if last is not None and now - last.read_at < self.bucket_s:
            return last
        try:
            fresh = Retained(read(), None, now)
        except Exception as exc:  # the page still shows the rest; the figure says why it is missing
            fresh = Retained(None, f"{type(exc).__name__}: {exc}", now)
        with self._lock:
            self._retained[conn_id] = fresh
        return fresh

    def record(self, conn_id: str, view: InstanceView, retained: int | None) -> None:
        """``view`` as the sample of its bucket (the newest observation in a bucket wins)."""
        if not view.reachable:
            return
        sample = Sample(view.observed_at or self._clock(), view.events_per_s, view.lag, retained)
        with self._lock:
            samples = self._samples.setdefault(conn_id, deque(maxlen=self._size))
            if samples and int(samples[-1].at // self.bucket_s) == int(sample.at // self.bucket_s):
                samples.pop()
            samples.append(sample)

    def series(self, conn_id: str) -> list[list[Any]]:
        """The samples of the last window, oldest first."""
        since = self._clock() - self._size * self.bucket_s
        with self._lock:
            return [s.to_json() for s in self._samples.get(conn_id, ()) if s.at >= since]
