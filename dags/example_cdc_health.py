"""Check an engine instance's health every ten minutes: the task fails, with the reason and the
fix, when its lag, the WAL its replication slot retains, or the age of its last committed event
passes a threshold - and Airflow alerts as for any failed task (``on_failure_callback`` here; a
notifier such as ``SmtpNotifier`` or ``SlackNotifier`` works the same way).

The retained WAL is what an idle or filtered slot makes PostgreSQL keep until its disk fills:
the threshold is well below the disk's free space, and the failure names the fix
(``heartbeat.interval.ms``, ``heartbeat.action.query``).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_cdc.operators.health import CdcHealthCheckOperator

log = logging.getLogger(__name__)

CDC_CONN = "cdc_shop"
PG_CONN = "pg_shop"


def alert(context: Any) -> None:
    """Where a deployment pages someone; the exception carries every reason."""
    log.error("CDC health check failed: %s", context.get("exception"))


with DAG(
    dag_id="example_cdc_health",
    description="Fail (and alert) when a CDC instance lags, retains WAL or stops capturing",
    schedule=timedelta(minutes=10),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "example"],
) as dag:
    CdcHealthCheckOperator(
        task_id="health",
        cdc_conn_id=CDC_CONN,
        source_conn_id=PG_CONN,  # reads pg_replication_slots
        max_lag=256 * 1024 * 1024,  # WAL bytes behind the source
        max_retained_wal_bytes=2 * 1024**3,
        max_seconds_since_last_event=6 * 3600,  # a source that is never idle this long
        on_failure_callback=alert,
    )
