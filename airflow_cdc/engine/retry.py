"""Retrying transient failures with exponential backoff, kept apart from the work retried, and
what is being retried now (:class:`RetryWatch`): while the engine retries a fault on its own, a
person looking at the status must see it (RETRYING and the cause), not a healthy-looking engine
that delivers nothing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from airflow_cdc.engine.errors import RetriableError

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Retrying:
    """A call that failed with a RetriableError and is tried again: ``cause`` is the error,
    ``what`` the call (``start``, ``poll``, ``batch handler``, ``recovery``, ...), ``attempt`` how
    many attempts failed in a row, ``since_ms`` when the first of them failed and
    ``next_attempt_ms`` when the next one starts (epoch milliseconds). Where a backend cannot tell
    (Kafka Connect), the counts and times are None."""

    cause: str
    what: str
    attempt: int | None = None
    since_ms: int | None = None
    next_attempt_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Retrying | None:
        if not data:
            return None
        return cls(
            cause=str(data.get("cause") or ""),
            what=str(data.get("what") or ""),
            attempt=_int(data.get("attempt")),
            since_ms=_int(data.get("since_ms")),
            next_attempt_ms=_int(data.get("next_attempt_ms")),
        )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


class RetryWatch:
    """What one owner (a task, a sink) retries now, for its status. Thread-safe: a processor may
    retry deliveries on several pool threads at once, each its own entry."""

    def __init__(self, owner: str = "", clock: Callable[[], float] = time.time) -> None:
        #: Who retries, as logs and causes name it: ``task shop-0``, ``kafka sink``.
        self.owner = owner
        self._clock = clock
        self._lock = threading.Lock()
        self._now: dict[tuple[str, int], Retrying] = {}

    def failed(self, what: str, error: BaseException, attempt: int, delay_s: float, *, shared: bool = False) -> None:
        """Attempt ``attempt`` of ``what`` failed; the next one is ``delay_s`` from now. A
        ``shared`` retry is one entry whichever thread tries next (a changelog segment written
        again by a timer or by the next batch)."""
        key = (what, 0 if shared else threading.get_ident())
        now_ms = int(self._clock() * 1000)
        with self._lock:
            earlier = self._now.get(key)
            since = earlier.since_ms if earlier is not None and earlier.since_ms is not None else now_ms
            self._now[key] = Retrying(str(error), what, attempt, since, now_ms + round(delay_s * 1000))

    def ended(self, what: str, *, shared: bool = False) -> None:
        """``what`` succeeded, or is not retried any more (given up: the error says the rest)."""
        with self._lock:
            self._now.pop((what, 0 if shared else threading.get_ident()), None)

    def current(self) -> Retrying | None:
        """The longest-running retry, or None."""
        with self._lock:
            retries = list(self._now.values())
        return min(retries, key=lambda r: r.since_ms or 0) if retries else None


class RetryPolicy:
    """``errors.max.retries`` (-1: no limit, 0: none), delay doubling from
    ``errors.retry.delay.initial.ms`` up to ``errors.retry.delay.max.ms``."""

    def __init__(self, max_retries: int, initial_delay_s: float, max_delay_s: float) -> None:
        self.max_retries = max_retries
        self.initial_delay_s = initial_delay_s
        self.max_delay_s = max_delay_s

    def delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1-based)."""
        return float(min(self.max_delay_s, self.initial_delay_s * (2 ** min(attempt - 1, 30))))

    def call(
        self,
        work: Callable[[], T],
        *,
        what: str,
        stopping: threading.Event,
        failed: Callable[[RetriableError], None] | None = None,
        watch: RetryWatch | None = None,
        first_failure: RetriableError | None = None,
    ) -> T:
        """Run ``work``; on RetriableError wait and retry. Gives up (re-raising the last error)
        when the retries are used up or the engine is stopping. ``failed`` hears each failure
        (a caller that gives up waiting first can still name the cause); ``watch`` shows the
        retry in its owner's status until the call ends. ``first_failure``: ``work`` already
        failed once so (a caller that keeps its happy path free of this call): wait, then retry."""
        label = f"{watch.owner} {what}" if watch is not None and watch.owner else what
        attempt = 0
        pending = first_failure
        try:
            while True:
                if pending is None:
                    try:
                        return work()
                    except RetriableError as first:
                        pending = first
                exc, pending = pending, None
                if failed is not None:
                    failed(exc)
                attempt += 1
                if 0 <= self.max_retries < attempt:
                    log.error("%s failed after %d retries: %s", label, self.max_retries, exc)
                    raise exc
                delay = self.delay(attempt)
                if watch is not None:
                    watch.failed(what, exc, attempt, delay)
                log.warning("%s failed (%s); retry %d in %.3fs", label, exc, attempt, delay)
                if stopping.wait(delay):
                    raise exc
        finally:
            if watch is not None:
                watch.ended(what)
