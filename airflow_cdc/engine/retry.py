"""Retrying transient failures with exponential backoff, kept apart from the work retried."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from airflow_cdc.engine.errors import RetriableError

log = logging.getLogger(__name__)

T = TypeVar("T")


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
    ) -> T:
        """Run ``work``; on RetriableError wait and retry. Gives up (re-raising the last error)
        when the retries are used up or the engine is stopping. ``failed`` hears each failure
        (a caller that gives up waiting first can still name the cause)."""
        attempt = 0
        while True:
            try:
                return work()
            except RetriableError as exc:
                if failed is not None:
                    failed(exc)
                attempt += 1
                if 0 <= self.max_retries < attempt:
                    log.error("%s failed after %d retries: %s", what, self.max_retries, exc)
                    raise
                delay = self.delay(attempt)
                log.warning("%s failed (%s); retry %d in %.3fs", what, exc, attempt, delay)
                if stopping.wait(delay):
                    raise
