"""Capture a MariaDB database with an engine instance beside the worker: start it (streaming from
the binlog's end on), snapshot the existing rows incrementally through the signal table while it
streams, wait until the snapshot has delivered every row, then until everything written before
is committed (the GTID position the server stood at when the sensor started). Downstream DAGs
are scheduled on the tables' assets (``cdc://shop_mariadb/<database>.<table>``).

The same DAG captures MySQL: only the instance's ``connector.class`` differs
(``io.debezium.connector.mysql.MySqlConnector``). Positions are the source's own - a MariaDB GTID
position ``0-1-42``, a MySQL GTID set ``uuid:1-5`` or a binlog ``file:pos`` - wherever a
position is given (``CdcOffsetSensor(target=...)``, ``CdcOffsetsOperator(position=...)``,
``CdcCaptureOperator(target_position=...)``).

Then the changes are applied with Spark into a replica database, as ``example_cdc_pipeline``
does: the job reads the instance's changelog (or topics), keeps the last change per key in
binlog order (snapshot rows carry the binlog position of their chunk's window) and upserts into
the replica's tables. A MySQL database is the table's qualifier, so ``table_map`` names the
replica's tables (``shop.orders`` would be the captured table itself): the job's settings go in
``job=ApplyConfig(...)``, how spark-submit runs it in ``submit=SubmitConfig(...)`` (here the
``spark_cdc`` connection decides).

Connections (no password in the DAG):

* ``cdc_mariadb`` - type ``cdc_engine``: extra ``{"config_path": "/opt/airflow/cdc/mariadb.yaml"}``
  (the instance's config file: ``name``, ``connector.class:
  io.debezium.connector.mariadb.MariaDbConnector``, ``topic.prefix: shop_mariadb``,
  ``table.include.list: shop.orders,shop.customers``, ``snapshot.mode: no_data``,
  ``signal.data.collection: shop.debezium_signal``, the sink), password = its ``api.token``;
* ``mariadb_shop`` - type ``mysql``: the captured server (host, port, user, password) and in
  ``schema`` the database (it becomes ``database.include.list``). The user needs ``SELECT``,
  ``RELOAD``, ``REPLICATION SLAVE``, ``BINLOG MONITOR`` (MySQL: ``REPLICATION CLIENT``) and
  ``INSERT`` on the signal table (the snapshot's signal and its watermarks);
* ``mariadb_shop_replica`` - type ``mysql``: the replica database the Spark job writes to (its
  tables exist; the job adds a ``_cdc_position`` column to each, its replay guard);
* ``spark_cdc`` - type ``spark``: where the Spark job runs (host ``local[2]`` or a cluster's).

``CDC_EXAMPLE_MARIADB_DATABASE`` names the captured database (default ``shop``).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.operators.spark import CdcSparkApplyOperator
from airflow_cdc.sensors.offset import CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor
from airflow_cdc.spark.job_config import ApplyConfig

CDC_CONN = "cdc_mariadb"
SOURCE_CONN = "mariadb_shop"
TARGET_CONN = "mariadb_shop_replica"
SPARK_CONN = "spark_cdc"
TOPIC_PREFIX = "shop_mariadb"
DATABASE = os.environ.get("CDC_EXAMPLE_MARIADB_DATABASE", "shop")
#: MySQL's data collections are ``database.table``.
TABLES = [f"{DATABASE}.orders", f"{DATABASE}.customers"]

with DAG(
    dag_id="example_mariadb_capture",
    description="Capture MariaDB: start an engine, snapshot through the signal table, wait until all is "
    "delivered, apply it with Spark",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["cdc", "example", "mariadb"],
) as dag:
    start_engine = CdcStartEngineOperator(
        task_id="start_engine",
        cdc_conn_id=CDC_CONN,
        source_conn_id=SOURCE_CONN,
    )
    # The ``source`` channel: a row in the signal table, written over ``mariadb_shop`` (the
    # channel Debezium on Kafka Connect listens on too).
    snapshot = CdcSnapshotOperator(
        task_id="snapshot",
        cdc_conn_id=CDC_CONN,
        tables=TABLES,
        channel="source",
        source_conn_id=SOURCE_CONN,
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
    # "current": the GTID position the server stood at when the sensor started.
    caught_up = CdcOffsetSensor(
        task_id="caught_up",
        cdc_conn_id=CDC_CONN,
        target="current",
        deferrable=True,
        poke_interval=2,
        timeout=3600,
    )
    apply_changes = CdcSparkApplyOperator(
        task_id="apply_changes",
        cdc_conn_id=CDC_CONN,
        tables=TABLES,
        target_conn_id=TARGET_CONN,
        spark_conn_id=SPARK_CONN,
        job=ApplyConfig(table_map={table: table.split(".", 1)[1] for table in TABLES}),  # db.table -> the replica's
    )
    start_engine >> snapshot >> snapshot_done >> caught_up >> apply_changes
