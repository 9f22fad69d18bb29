"""A Delta table stays readable once its log has a checkpoint (issue 28): delta-spark 4.2.0 read
a checkpoint's Parquet schema with Spark 4.1.0's seven-argument ``ParquetToSparkSchemaConverter``,
which pyspark 4.1.3 lacks, so from the 10th commit (Delta's default checkpoint interval) on every
read and MERGE failed with ``NoSuchMethodError``; 4.3.0 does not. Real Spark and Delta."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.spark.frames import LATEST_SCHEMA
from airflow_cdc.spark.targets.lake import LakeTarget

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_delta_table_is_read_and_merged_past_its_log_checkpoint(spark: Any, tmp_path: Path) -> None:
    url = f"delta:{tmp_path / 'lake'}"
    path = tmp_path / "lake" / "public.t"
    empty = spark.createDataFrame([], "id int, v string, _cdc_position string")
    # A checkpoint every 2 commits, set at creation (4.2.0's ALTER TABLE fails on 4.1.3 by itself).
    empty.write.format("delta").option("delta.checkpointInterval", "2").save(str(path))
    target = LakeTarget(url, {}, {})
    for n in range(1, 4):
        change = ("public.t", "c", json.dumps({"id": n}), {"id": str(n), "v": f"v{n}"}, [], f"{n:032x}")
        target.apply(spark.createDataFrame([change], LATEST_SCHEMA))
    assert any(p.name.endswith(".checkpoint.parquet") for p in (path / "_delta_log").iterdir())
    got = sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).select("id", "v").collect())
    assert got == [(1, "v1"), (2, "v2"), (3, "v3")]
