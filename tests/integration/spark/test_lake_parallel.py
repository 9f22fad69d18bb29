"""Lake targets apply the tables of a batch at once (Spark jobs from several driver threads), and
each table ends up as its changes say, counted the same as one after another. Real Spark, Delta
and Parquet tables."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.spark.frames import LATEST_SCHEMA
from airflow_cdc.spark.targets.lake import LakeTarget, create_table

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TABLES = ("public.a", "public.b", "public.c")


def latest_frame(spark: Any) -> Any:
    """Per table: keys 1-5 written, key 5 then deleted (its last change is the delete)."""
    rows = []
    for n, table in enumerate(TABLES):
        for key in range(1, 6):
            after = {"id": str(key), "v": f"{table}-{key}"}
            op, values = ("d", None) if key == 5 else ("c", after)
            rows.append((table, op, json.dumps({"id": key}), values, [], f"{n * 100 + key:032x}"))
    return spark.createDataFrame(rows, LATEST_SCHEMA)


def read(spark: Any, kind: str, path: Path) -> list[tuple[Any, ...]]:
    if kind == "delta":
        frame = spark.read.format("delta").load(str(path))
    else:
        frame = spark.read.parquet(str(path / (path / "_current").read_text().strip()))
    return sorted(tuple(r) for r in frame.select("id", "v").collect())


@pytest.mark.parametrize("kind", ["delta", "parquet"])
def test_the_tables_of_a_batch_apply_at_once(spark: Any, tmp_path: Path, kind: str) -> None:
    url = f"{kind}:{tmp_path / 'lake'}"
    paths = {table: create_table(spark, url, table, "id int, v string") for table in TABLES}
    # Each table's apply waits until every table's has started: one after another, the first
    # would wait alone and the barrier break.
    barrier = threading.Barrier(len(TABLES), timeout=60)

    class Meeting(LakeTarget):
        parallel_tables = len(TABLES)  # the default follows the cores: local[2] gives 1

        def _delta(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
            barrier.wait()
            return super()._delta(spark, table, rows)

        def _parquet(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
            barrier.wait()
            return super()._parquet(spark, table, rows)

    counts = Meeting(url, {}, {}).apply(latest_frame(spark))
    assert counts["upserted"] == 12 and counts["deleted"] == 3
    for table, path in paths.items():
        assert read(spark, kind, path) == [(key, f"{table}-{key}") for key in range(1, 5)]


def test_a_failing_table_fails_the_batch_with_the_first_tables_error_and_the_others_apply(
    spark: Any, tmp_path: Path
) -> None:
    url = f"delta:{tmp_path / 'lake'}"
    paths = {table: create_table(spark, url, table, "id int, v string") for table in TABLES[1:]}
    with pytest.raises(Exception, match=r"no delta table for public\.a"):
        LakeTarget(url, {}, {}).apply(latest_frame(spark))
    for table, path in paths.items():  # applied anyway: a replay of the batch finds them done
        assert read(spark, "delta", path) == [(key, f"{table}-{key}") for key in range(1, 5)]
