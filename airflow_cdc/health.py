"""How healthy an instance's capture is, as plain figures and judged against thresholds: what
``CdcHealthCheckOperator`` fails on and what the CDC page shows in red. No Airflow import: the
caller gives the backend (any of ADR 0022's) and the source's password.

Three figures, each read the same way on every backend:

* ``lag`` - the backend's own (``position().lag``, in its ``lag_unit``: WAL bytes for
  PostgreSQL), when it knows its source's position;
* ``retained_bytes`` - the log the source keeps for the capture (a PostgreSQL slot's
  ``pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)``), asked of the source database itself:
  an idle or filtered slot retaining WAL is the failure log-based CDC is known for, and the
  engine cannot report what it does not see;
* ``idle_s`` - seconds since the newest committed event, from the committed offsets' source
  timestamps (Debezium's ``ts_usec`` for PostgreSQL, ``ts_sec`` for MySQL), which Kafka Connect's
  offsets carry too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from airflow_cdc.engine.connector import source_database
from airflow_cdc.engine.server.models import OffsetEntry

#: What stops an idle or filtered slot from retaining WAL (README "Capturing PostgreSQL").
RETAINED_WAL_FIX = (
    "an instance that is stopped, paused or behind keeps its slot where it stopped reading: start or resume it "
    "(or drop the slot, pg_drop_replication_slot, if the capture is gone for good). A running airflow-cdc "
    "engine lets an idle slot advance by itself; Debezium's connector needs a heartbeat: heartbeat.interval.ms "
    "(e.g. 10000) lets the slot advance when other databases write, and heartbeat.action.query (e.g. an insert "
    "into a heartbeat table in the captured database) when the captured tables themselves are idle or filtered out"
)


@dataclass(frozen=True)
class HealthReading:
    """One look at an instance. None: not known (the backend or source cannot say)."""

    lag: int | None = None
    lag_unit: str = ""
    retained_bytes: int | None = None
    idle_s: float | None = None
    health: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HealthThresholds:
    """Past any of these the instance is unhealthy; None: not checked."""

    max_lag: int | None = None
    max_retained_bytes: int | None = None
    max_idle_s: float | None = None


def last_event_age(offsets: Iterable[OffsetEntry], now: float | None = None) -> float | None:
    """Seconds since the source committed the newest event any partition's offset covers."""
    newest = max((t for entry in offsets if (t := _event_time(entry.offset))), default=None)
    if newest is None:
        return None
    return max(0.0, (time.time() if now is None else now) - newest)


def _event_time(offset: Mapping[str, Any]) -> float | None:
    if offset.get("ts_usec"):
        return float(offset["ts_usec"]) / 1_000_000
    if offset.get("ts_sec"):
        return float(offset["ts_sec"])
    return None


def retained_log(running_config: Mapping[str, Any], password: str | None) -> int | None:
    """The log the source keeps for this capture (None where it keeps none per consumer)."""
    database = source_database(running_config.get("connector.class"))
    return database.retained_log_bytes(running_config, password) if database is not None else None


def read_health(backend: Any, password: str | None = None, *, with_retained: bool = True) -> HealthReading:
    """The figures of ``backend`` (an ``EngineBackend``) now; the source database is asked with
    ``password`` for the retained log."""
    status = backend.status()
    position = status.position
    if position is None and backend.capabilities.current_position:
        position = backend.position()
    retained = retained_log(backend.running_config(), password) if with_retained else None
    return HealthReading(
        lag=position.lag if position else None,
        lag_unit=position.lag_unit if position else "",
        retained_bytes=retained,
        idle_s=last_event_age(backend.offsets()),
        health=status.health,
    )


def problems(reading: HealthReading, limits: HealthThresholds) -> list[str]:
    """What is past its threshold, each with what to do about it."""
    found: list[str] = []
    if limits.max_lag is not None and reading.lag is not None and reading.lag > limits.max_lag:
        found.append(
            f"lag is {reading.lag:,} {reading.lag_unit or 'units'}, past the threshold of {limits.max_lag:,}: "
            "the instance reads slower than the source writes, or has stopped reading"
        )
    if (
        limits.max_retained_bytes is not None
        and reading.retained_bytes is not None
        and reading.retained_bytes > limits.max_retained_bytes
    ):
        found.append(
            f"the replication slot retains {reading.retained_bytes:,} bytes of WAL, past the threshold of "
            f"{limits.max_retained_bytes:,}: {RETAINED_WAL_FIX}"
        )
    if limits.max_idle_s is not None and reading.idle_s is not None and reading.idle_s > limits.max_idle_s:
        found.append(
            f"the last committed event is {reading.idle_s:,.0f} s old, past the threshold of "
            f"{limits.max_idle_s:,.0f} s: nothing was captured since (an idle source, or capture that stopped)"
        )
    return found
