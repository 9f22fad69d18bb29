"""Micro-batch CDC without a long-running process: every run captures the changes since the
previous one for a while, inside the task, commits and stops. The first run takes the initial
snapshot (``snapshot.mode: initial`` in the instance's config file); each later one goes on
from the committed offsets. Tables that moved data get an asset event each, through the alias.

Connections: ``cdc_shop_batch`` (type ``cdc_engine`` with the extra ``config_path`` of an
instance that is never started detached: the capture runs its engine in the task), and
``pg_shop`` (type ``postgres``). The replication slot keeps the WAL between runs: keep the
schedule short enough for the disk.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, AssetAlias

from airflow_cdc.operators.capture import CdcCaptureOperator

CDC_CONN = "cdc_shop_batch"
SOURCE_CONN = "pg_shop"
# How long a batch captures at most (its engine's start and any snapshot included). Set from
# the environment only so that the system test can keep its batches short.
BATCH = timedelta(seconds=float(os.environ.get("CDC_EXAMPLE_BATCH_SECONDS", "240")))

with DAG(
    dag_id="example_cdc_microbatch",
    description="Bounded CDC capture on a schedule: capture, commit, stop",
    schedule=timedelta(minutes=15),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "example"],
) as dag:
    CdcCaptureOperator(
        task_id="capture",
        cdc_conn_id=CDC_CONN,
        source_conn_id=SOURCE_CONN,
        max_duration=BATCH,
        max_records=500_000,
        outlets=[AssetAlias("cdc_shop_batch_tables")],
    )
