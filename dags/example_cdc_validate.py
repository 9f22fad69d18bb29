"""Find where the replica of ``example_cdc_pipeline`` drifted from the source, and repair it.

Each table is compared by key ranges (row counts and checksums computed by each server, so that a
table without differences is read once per side), the differing ranges are narrowed to keys, and
with ``repair=True`` those keys - only those - are snapshotted again (an incremental snapshot with
``additional-conditions``), applied, and validated again. Rows the source no longer has are
deleted from the replica (a snapshot cannot delete). The XCom names what differed and what the
repair left (nothing, or the task fails).

The repair waits for the apply job to bring the snapshot's rows: run the apply job meanwhile (a
``CdcSparkApplyOperator`` with ``ApplyConfig(trigger="continuous")``, or a DAG scheduled on the
tables' assets). Without ``repair``, ``fail_on_drift=True`` makes the task fail, so that
Airflow's notifiers report the drift.

Connections: ``cdc_shop``, ``pg_shop`` and ``pg_shop_replica``, as ``example_cdc_pipeline``'s.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_cdc.operators.validate import CdcValidateOperator

TABLES = ["public.orders", "public.customers"]

with DAG(
    dag_id="example_cdc_validate",
    description="Compare the replica with the source by key ranges; re-snapshot only the keys that differ",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["cdc", "example"],
) as dag:
    for table in TABLES:
        CdcValidateOperator(
            task_id=f"validate_{table.split('.')[-1]}",
            cdc_conn_id="cdc_shop",
            table=table,
            source_conn_id="pg_shop",
            target_conn_id="pg_shop_replica",
            repair=True,
            # A quiet source gives the target no change to pass its position with: how long to
            # look again at the differing keys before taking them for drift.
            settle_timeout=120,
            repair_timeout=600,
        )
