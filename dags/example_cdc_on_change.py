"""Apply a table's changes when they arrive: no polling schedule. Each table's DAG is scheduled on
the table's asset, ``table_asset("shop", table)``, with an asset watcher - a
``CdcTableChangesTrigger`` that Airflow's triggerer runs - which fires when captured changes of
the table passed the point of its last event; the run applies them to the replica with the Spark
job, from the job's own checkpoint (so a repeated event applies nothing twice).

The watcher counts what the instance delivered for the table (its changelog topic, or the Kafka
topic on a Kafka sink or Debezium on Kafka Connect) and remembers where it fired in Airflow's
asset state store, across triggerer restarts (ADR 0026). ``debounce`` waits for a burst of writes
to end (at most ``max_delay``), ``min_changes`` for enough changes, ``min_interval`` between runs.

Connections as in ``example_cdc_pipeline.py``: ``cdc_shop`` (the instance - started by that DAG,
by ``airflow-cdc engine start``, or an engine service; the watcher waits while it is not
running), ``pg_shop_replica`` and ``spark_cdc``. On Kafka Connect the same file runs unchanged
with ``cdc_shop`` a ``kafka_connect`` connection: the watcher then reads the topic's end offsets
from the brokers the connection names.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, AssetWatcher

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.spark import CdcSparkApplyOperator
from airflow_cdc.triggers.table_changes import CdcTableChangesTrigger

CDC_CONN = "cdc_shop"
TARGET_CONN = "pg_shop_replica"
SPARK_CONN = "spark_cdc"
TOPIC_PREFIX = "shop"
TABLES = ["public.orders", "public.customers"]

for table in TABLES:
    name = table.replace(".", "_")
    changed = table_asset(
        TOPIC_PREFIX,
        table,
        watchers=[
            AssetWatcher(
                name=f"{name}_changes",
                trigger=CdcTableChangesTrigger(
                    cdc_conn_id=CDC_CONN,
                    table=table,
                    min_changes=1,
                    debounce=2.0,
                    max_delay=60.0,
                    poll_interval=2.0,
                ),
            )
        ],
    )
    with DAG(
        dag_id=f"example_cdc_on_change_{name}",
        description=f"Apply the changes of {table} to the replica when they arrive",
        schedule=[changed],
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,  # events meanwhile queue one more run, which applies all of them
        tags=["cdc", "example", "event-driven"],
    ) as dag:
        CdcSparkApplyOperator(
            task_id="apply_changes",
            cdc_conn_id=CDC_CONN,
            tables=[table],
            target_conn_id=TARGET_CONN,
            spark_conn_id=SPARK_CONN,
        )
    globals()[dag.dag_id] = dag
