"""The README's "From a DAG": capture public.orders, read its rows once, apply them to a replica."""

from datetime import datetime

from airflow.sdk import DAG

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.operators.spark import CdcSparkApplyOperator
from airflow_cdc.sensors.offset import CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor

with DAG(dag_id="cdc_quickstart", schedule=None, start_date=datetime(2026, 1, 1), max_active_runs=1):
    start = CdcStartEngineOperator(
        task_id="start_engine",
        cdc_conn_id="cdc_shop",
        source_conn_id="pg_shop",
        # Streams from now on; the snapshot below reads the existing rows, once. (Debezium's
        # default, snapshot.mode "initial", would read them at start too: every row twice.)
        config={"table.include.list": "public.orders", "snapshot.mode": "no_data"},
    )
    snapshot = CdcSnapshotOperator(task_id="snapshot", cdc_conn_id="cdc_shop", tables=["public.orders"])
    done = CdcSnapshotSensor(  # deferrable: waits in the triggerer, not in a worker slot
        task_id="snapshot_done",
        cdc_conn_id="cdc_shop",
        signal_id=snapshot.output,
        outlets=[table_asset("shop", "public.orders")],
    )
    caught_up = CdcOffsetSensor(task_id="caught_up", cdc_conn_id="cdc_shop", target="current")
    apply = CdcSparkApplyOperator(
        task_id="apply_changes",
        cdc_conn_id="cdc_shop",
        tables=["public.orders"],
        target_conn_id="pg_shop_replica",
        spark_conn_id="spark_cdc",
    )
    start >> snapshot >> done >> caught_up >> apply
