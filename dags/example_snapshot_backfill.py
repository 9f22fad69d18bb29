"""Re-snapshot, every day, the rows of ``public.orders`` that changed during the day: an
incremental snapshot filtered on the run's data interval, while the instance keeps streaming.
A re-snapshot repairs a target that missed changes (a consumer that was reset, a table restored
from backup), one window at a time, and backfills past days with ``airflow dags backfill``.

The instance is the one ``example_cdc_pipeline`` runs (connection ``cdc_shop``); starting it
is a no-op when it already runs with this configuration. A day without any change ends its
table scan EMPTY, which this DAG accepts. Downstream DAGs can be scheduled on the table's asset.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, CronTriggerTimetable

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor

CDC_CONN = "cdc_shop"
SOURCE_CONN = "pg_shop"
TOPIC_PREFIX = "shop"
TABLE = "public.orders"

with DAG(
    dag_id="example_snapshot_backfill",
    description="Re-snapshot each day's changed rows of a table, filtered on the data interval",
    # Daily at midnight, for the day before: a data interval needs an explicit one (Airflow 3's
    # "@daily" has empty intervals).
    schedule=CronTriggerTimetable("@daily", timezone="UTC", interval=timedelta(days=1)),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "example"],
) as dag:
    ensure_engine = CdcStartEngineOperator(
        task_id="ensure_engine",
        cdc_conn_id=CDC_CONN,
        source_conn_id=SOURCE_CONN,
    )
    backfill = CdcSnapshotOperator(
        task_id="backfill",
        cdc_conn_id=CDC_CONN,
        tables=[TABLE],
        additional_conditions=("updated_at >= '{{ data_interval_start }}' and updated_at < '{{ data_interval_end }}'"),
    )
    backfill_done = CdcSnapshotSensor(
        task_id="backfill_done",
        cdc_conn_id=CDC_CONN,
        signal_id=backfill.output,
        accept_statuses=["SUCCEEDED", "EMPTY"],
        stall_timeout=600,
        deferrable=True,
        poke_interval=2,
        outlets=[table_asset(TOPIC_PREFIX, TABLE)],
    )

    ensure_engine >> backfill >> backfill_done
