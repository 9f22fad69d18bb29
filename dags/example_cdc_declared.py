"""The pipeline of ``dags/pipelines/shop.yaml``, declared once and rendered as tasks: one task
group per table (snapshot, wait for it, wait for the instance, apply with Spark), so the grid
shows which table failed and a table's group can be cleared and rerun alone.

The same connections as ``example_cdc_pipeline``: ``cdc_shop`` (the engine instance), ``pg_shop``
(the captured database), ``pg_shop_replica`` (the target) and ``spark_cdc`` (where Spark runs).
The file is validated when the DAG is parsed - a mistake is an import error naming its line and
key - and from a terminal by ``airflow-cdc pipeline check dags/pipelines/shop.yaml``.

To put a pipeline into a DAG of your own instead, render it as one task group::

    with DAG("nightly", schedule="@daily", start_date=datetime(2026, 1, 1)):
        prepare >> CdcPipeline.from_yaml(PIPELINE).task_group()
"""

from __future__ import annotations

from pathlib import Path

from airflow_cdc.pipeline import CdcPipeline

PIPELINE = Path(__file__).parent / "pipelines" / "shop.yaml"

dag = CdcPipeline.from_yaml(PIPELINE).dag()
