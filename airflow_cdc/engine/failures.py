"""What a source does with an event it cannot turn into a record: Debezium's
``event.processing.failure.handling.mode``.

``fail`` (the default, as Debezium's): the task stops with an :class:`EventProcessingError`
naming the table, the column, the position and the fix; nothing from the event on is committed,
so a restart reads it again - after the fix, or with another mode. ``warn``: the event is logged
with the same words and left out, the stream goes on. ``skip``: left out, logged at debug level.
Left-out events are counted (``skipped``), so the instance's status can show them.
"""

from __future__ import annotations

import logging

from airflow_cdc.engine.errors import CdcError

log = logging.getLogger(__name__)

FAILURE_MODES = ("fail", "warn", "skip")
#: Debezium's older name of ``skip``.
FAILURE_MODE_ALIASES = {"ignore": "skip"}


class EventProcessingError(CdcError):
    """An event the source cannot turn into a record; the message says which and what to do."""


class FailureHandling:
    """One task's policy for events it cannot process."""

    def __init__(self, mode: str = "fail") -> None:
        mode = FAILURE_MODE_ALIASES.get(mode, mode)
        if mode not in FAILURE_MODES:
            raise ValueError(f"event.processing.failure.handling.mode must be one of {', '.join(FAILURE_MODES)}")
        self.mode = mode
        self.skipped = 0

    def handle(self, problem: str) -> None:
        """Fail with ``problem`` (what, where), or log it and go on without the event."""
        if self.mode == "fail":
            raise EventProcessingError(
                f"{problem}. The event is read again at the next start; to go on without such events set "
                "event.processing.failure.handling.mode to warn (logged and left out) or skip"
            )
        self.skipped += 1
        if self.mode == "warn":
            log.warning("left out an event: %s (event.processing.failure.handling.mode=warn)", problem)
        else:
            log.debug("left out an event: %s (event.processing.failure.handling.mode=skip)", problem)
