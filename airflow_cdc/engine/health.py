"""The one word a person reads first about an engine (or an instance, or a connector on Kafka
Connect), and its cause: RUNNING, RETRYING, PAUSED, STARTING, STOPPED or FAILED.

It sits beside the engine's ``state`` (CREATING ... POLLING_TASKS ... STOPPED), which keeps its
meaning for the clients and sensors that parse it: an engine that retries a lost connection is
still POLLING_TASKS - it recovers on its own - but nothing reaches the sink meanwhile, and
``health`` RETRYING says so, with the error retried as its ``cause``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from airflow_cdc.engine.retry import Retrying

RUNNING, RETRYING, PAUSED, STARTING, STOPPED, FAILED = "RUNNING", "RETRYING", "PAUSED", "STARTING", "STOPPED", "FAILED"
HEALTHS = (RUNNING, RETRYING, PAUSED, STARTING, STOPPED, FAILED)

#: States, the engine's and those ``engine status`` reports for an instance that is not running.
_STOPPED_STATES = frozenset({"STOPPING", "STOPPED", "NEVER_STARTED", "NOT_RUNNING"})
DEAD_CAUSE = "the instance's process ended without stopping (kill -9, out of memory?): see its engine.log"


@dataclass(frozen=True)
class Health:
    health: str
    #: FAILED: the error; RETRYING: who retries what, and the error retried; else None.
    cause: str | None = None


def retry_cause(owner: str, retrying: Retrying) -> str:
    """``task shop-0 poll: replication connection lost: ...``."""
    return f"{owner} {retrying.what}: {retrying.cause}".strip()


def judge(
    state: str,
    *,
    paused: bool = False,
    error: str | None = None,
    retrying: Iterable[tuple[str, Retrying]] = (),
) -> Health:
    """The health of an engine in ``state``; ``retrying`` is ``(owner, retry)`` of what retries
    now (its longest-running retry is the cause)."""
    if error:
        return Health(FAILED, error)
    if state == "DEAD":
        return Health(FAILED, DEAD_CAUSE)
    if state in _STOPPED_STATES:
        return Health(STOPPED)
    oldest = min(retrying, key=lambda item: item[1].since_ms or 0, default=None)
    if oldest is not None:
        return Health(RETRYING, retry_cause(*oldest))
    if paused:
        return Health(PAUSED)
    if state == "POLLING_TASKS":
        return Health(RUNNING)
    return Health(STARTING)
