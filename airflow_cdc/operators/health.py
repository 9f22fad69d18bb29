"""A health check a DAG runs on a schedule: the task fails, with the reason, when an instance's
lag, the WAL its slot retains, or the time since its last committed event passes a threshold,
so Airflow's own notifiers and ``on_failure_callback`` alert on it (ADR 0028)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseHook, Context

from airflow_cdc.health import HealthThresholds, problems, read_health
from airflow_cdc.operators.base import CdcBaseOperator, CdcOperatorError


class CdcHealthCheckOperator(CdcBaseOperator):
    """Fails when the instance of ``cdc_conn_id`` is past any threshold given; None skips that check.

    :param cdc_conn_id: the instance's connection (``cdc_engine``, or ``kafka_connect``).
    :param max_lag: the largest lag allowed, in the backend's unit (WAL bytes for PostgreSQL).
    :param max_retained_wal_bytes: the most WAL the instance's replication slot may retain
        (PostgreSQL; read from ``pg_replication_slots`` over the source connection).
    :param max_seconds_since_last_event: the oldest the newest committed event may be.
    :param source_conn_id: the captured database's connection (its password reads the slot);
        default: the connection's extra ``source_conn_id``, else no password (trust, .pgpass).
    :return: (XCom) the figures read: ``lag``, ``lag_unit``, ``retained_bytes``, ``idle_s``, ``health``.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "source_conn_id")

    def __init__(
        self,
        *,
        max_lag: int | None = None,
        max_retained_wal_bytes: int | None = None,
        max_seconds_since_last_event: float | None = None,
        source_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        limits: dict[str, float | None] = {
            "max_lag": max_lag,
            "max_retained_wal_bytes": max_retained_wal_bytes,
            "max_seconds_since_last_event": max_seconds_since_last_event,
        }
        for name, value in limits.items():
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, not {value!r}")
        if all(value is None for value in limits.values()):
            raise ValueError("give at least one of max_lag, max_retained_wal_bytes, max_seconds_since_last_event")
        self.thresholds = HealthThresholds(max_lag, max_retained_wal_bytes, max_seconds_since_last_event)
        self.source_conn_id = source_conn_id

    def _source_password(self) -> str | None:
        conn_id = self.source_conn_id or self.hook.settings.source_conn_id
        return BaseHook.get_connection(conn_id).password if conn_id else None

    def execute(self, context: Context) -> dict[str, Any]:
        with self.failures("health check"), self.engine_backend() as backend:
            wanted = self.thresholds.max_retained_bytes is not None
            reading = read_health(backend, self._source_password() if wanted else None, with_retained=wanted)
        self.log.info("instance of %s: %s", self.cdc_conn_id, reading.to_json())
        found = problems(reading, self.thresholds)
        if found:
            raise CdcOperatorError(f"instance of connection {self.cdc_conn_id!r} is unhealthy: " + "; ".join(found))
        return reading.to_json()
