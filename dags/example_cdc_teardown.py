"""Take a pipeline down cleanly: wait until everything captured so far is committed, stop the
engine instance (it drains, commits and drops its replication slot, so the database keeps no
WAL for it), and forget its offsets, so that a next start is a first start.

The instance must run with ``slot.drop.on.stop: true`` (in its config file, or started with it
by ``CdcStartEngineOperator(config=...)``); the stop refuses otherwise, naming the fix. The stop
runs even when the wait failed; the reset only after a successful stop.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, TriggerRule

from airflow_cdc.operators.engine import CdcStopEngineOperator
from airflow_cdc.operators.offsets import CdcOffsetsOperator
from airflow_cdc.sensors.offset import CdcOffsetSensor

CDC_CONN = "cdc_shop"

with DAG(
    dag_id="example_cdc_teardown",
    description="Drain, stop an engine instance dropping its slot, reset its offsets",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["cdc", "example"],
) as dag:
    drained = CdcOffsetSensor(
        task_id="drained",
        cdc_conn_id=CDC_CONN,
        target="current",
        deferrable=True,
        poke_interval=2,
        timeout=600,
    )
    stop_engine = CdcStopEngineOperator(
        task_id="stop_engine",
        cdc_conn_id=CDC_CONN,
        drop_slot=True,
        trigger_rule=TriggerRule.ALL_DONE,
    )
    reset_offsets = CdcOffsetsOperator(
        task_id="reset_offsets",
        cdc_conn_id=CDC_CONN,
        action="reset",
    )

    drained >> stop_engine >> reset_offsets
