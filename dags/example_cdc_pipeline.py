"""Capture a PostgreSQL database with an engine instance: start it (streaming
from now on), snapshot the existing rows incrementally while it streams, wait until the snapshot
has delivered every row, then until everything that happened before is committed, and apply
all of it to a replica with the Spark job (exactly once: rerun the DAG and it applies only
what is new).

Connections (no password in the DAG):

* ``cdc_shop`` - type ``cdc_engine``: an engine service's API URL as host and its token as
  password (``docker/compose.yaml``'s ``engine``: ``https://engine:8765``, extra ``ssl_ca``), or,
  for an instance beside a single worker, extra ``{"config_path": "/path/shop.yaml"}`` (the
  instance's config file: ``name``, ``topic.prefix: shop``, ``table.include.list``,
  ``snapshot.mode: no_data``, ``signal.data.collection``, the sink). The README's "Deploying"
  says which suits which executor;
* ``pg_shop`` - type ``postgres``: the captured database (host, port, user, password, database);
* ``pg_shop_replica`` - type ``postgres``: where the Spark job applies the changes; its tables
  exist with the same primary keys (the job adds a ``_cdc_position`` column to each);
* ``spark_cdc`` - type ``spark``: where the Spark job runs (host ``local[2]``, or a cluster's
  ``spark://host`` and port, ``yarn``, ``k8s://...``).

On a Kafka Connect cluster the same file runs unchanged: ``cdc_shop`` becomes a
``kafka_connect`` connection (host: Connect's REST URL; extra ``config_path``, the same config
file, ``bootstrap_servers`` and ``source_conn_id: pg_shop``) and ``spark_cdc`` a cluster's
master. Give the file ``database.password: ${file:/etc/kafka-connect/secrets/shop.properties:password}``
there (the workers' ``config.providers=file``): else pg_shop's password is sent and Connect keeps
it in its config topic (the start task warns). The README's "When you outgrow one machine" says
what changes and what stays.

The Spark job reads where the instance writes (its changelog or Kafka topics) and decodes
values with the instance's own settings: it learns both from the instance through ``cdc_shop``.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.operators.spark import CdcSparkApplyOperator
from airflow_cdc.sensors.offset import CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor

CDC_CONN = "cdc_shop"
SOURCE_CONN = "pg_shop"
TARGET_CONN = "pg_shop_replica"
SPARK_CONN = "spark_cdc"
TOPIC_PREFIX = "shop"
TABLES = ["public.orders", "public.customers"]

with DAG(
    dag_id="example_cdc_pipeline",
    description="Start a CDC engine, snapshot while streaming, wait until all is delivered, apply it with Spark",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["cdc", "example"],
) as dag:
    start_engine = CdcStartEngineOperator(
        task_id="start_engine",
        cdc_conn_id=CDC_CONN,
        source_conn_id=SOURCE_CONN,
    )
    snapshot = CdcSnapshotOperator(
        task_id="snapshot",
        cdc_conn_id=CDC_CONN,
        tables=TABLES,
    )
    snapshot_done = CdcSnapshotSensor(
        task_id="snapshot_done",
        cdc_conn_id=CDC_CONN,
        signal_id=snapshot.output,
        stall_timeout=600,
        deferrable=True,
        poke_interval=2,
        outlets=[table_asset(TOPIC_PREFIX, table) for table in TABLES],
    )
    caught_up = CdcOffsetSensor(
        task_id="caught_up",
        cdc_conn_id=CDC_CONN,
        target="current",
        deferrable=True,
        poke_interval=2,
        timeout=3600,
    )

    # Overlapping runs: one apply_changes runs at a time (max_active_tis_per_dag=1), the next queued;
    # anything else on its checkpoint fails at once, retriably, naming the run that holds it.
    apply_changes = CdcSparkApplyOperator(
        task_id="apply_changes",
        cdc_conn_id=CDC_CONN,
        tables=TABLES,
        target_conn_id=TARGET_CONN,
        spark_conn_id=SPARK_CONN,
    )

    start_engine >> snapshot >> snapshot_done >> caught_up >> apply_changes
