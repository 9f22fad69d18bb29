"""The Parquet format of the lake target: a current-state table replaced whole each batch.

Each batch writes a new version directory, then atomically renames the ``_current`` pointer file
to it, so a reader never sees half a batch. A schema change is one more such rewrite, before the
batch's: new columns are NULL in the existing rows, or the source's default when the column was
added with one; widened columns are cast (Parquet has no DDL: the files are the schema).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.targets.lake_evolution import LakePlan

if TYPE_CHECKING:
    from airflow_cdc.spark.targets.lake import LakeTarget

log = logging.getLogger(__name__)

POINTER = "_current"


class ParquetFormat:
    name = "parquet"

    def __init__(self, target: LakeTarget, root: str) -> None:
        self.target, self.root = target, target.root

    def where(self, table: str) -> str:
        return str(self.target.path(table))

    def current(self, path: Path) -> Path:
        return path / (path / POINTER).read_text().strip()

    def schema(self, spark: Any, table: str) -> Any:
        """The table's Spark schema; None when there is no table (no pointer file)."""
        path = self.target.path(table)
        if not (path / POINTER).is_file():
            return None
        return spark.read.parquet(str(self.current(path))).schema

    def frame(self, spark: Any, table: str) -> Any:
        return spark.read.parquet(str(self.current(self.target.path(table))))

    def columns(self, spark: Any, table: str) -> dict[str, str] | None:
        schema = self.schema(spark, table)
        return None if schema is None else {f.name: f.dataType.simpleString() for f in schema.fields}

    def create(self, spark: Any, table: str, columns: list[tuple[str, str]]) -> None:
        path = self.target.path(table)
        if (path / POINTER).is_file():
            return  # another job created it meanwhile
        ddl = ", ".join(f"`{name}` {spark_type}" for name, spark_type in columns)
        log.warning("Schema change: creating Parquet table %s (%s)", path, ddl)
        spark.createDataFrame([], f"{ddl}, {POSITION_COLUMN} string").write.mode("overwrite").parquet(str(path / "v0"))
        (path / POINTER).write_text("v0")

    def evolve(self, spark: Any, table: str, plan: LakePlan, defaults: dict[str, str]) -> None:
        """The current state rewritten with the added and widened columns."""
        from pyspark.sql import functions as F

        path = self.target.path(table)
        current = spark.read.parquet(str(self.current(path)))
        widened = {name: new for name, _, new in plan.widen}
        columns = [
            F.col(f"`{n}`").cast(widened[n]).alias(n) if n in widened else F.col(f"`{n}`") for n in current.columns
        ]
        for name, spark_type, _ in plan.add:
            columns.append(F.expr(defaults.get(name, "NULL")).cast(spark_type).alias(name))
        log.warning(
            "Schema change: rewriting Parquet table %s (adding %s, widening %s)",
            path,
            [n for n, _, _ in plan.add],
            widened,
        )
        self.replace(path, current.select(*columns))

    def replace(self, path: Path, frame: Any) -> None:
        """``frame`` as the table's new current version; the previous version removed."""
        version = f"v{uuid.uuid4().hex}"
        frame.write.parquet(str(path / version))
        pointer = path / f".{POINTER}.{version}"
        pointer.write_text(version)
        previous = (path / POINTER).read_text().strip()
        os.replace(pointer, path / POINTER)  # readers switch at once, never to half a batch
        if (path / previous).is_dir():
            shutil.rmtree(path / previous, ignore_errors=True)

    def apply(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        from pyspark.sql import functions as F

        path = self.target.path(table)
        schema, changes = self.target.decoded(spark, table, rows)
        keys = self.target.key_columns(rows)
        current = spark.read.schema(schema).parquet(str(self.current(path)))
        cut = self.target.truncate_position(rows)
        if cut is not None:
            current = current.where(F.col(POSITION_COLUMN) >= cut)
        names = schema.fieldNames()
        incoming = changes.alias("s")
        joined = current.alias("t").join(incoming, keys, "full_outer")
        newer = F.col(f"t.{POSITION_COLUMN}").isNull() | (
            F.col(f"t.{POSITION_COLUMN}") <= F.col(f"s.{POSITION_COLUMN}")
        )
        takes = F.col("s._op").isNotNull() & newer
        merged = joined.where(~(takes & (F.col("s._op") == "d"))).select(
            *[
                F.col(n)
                if n in keys
                else F.when(
                    takes & ~F.coalesce(F.array_contains(F.col("s._unavailable"), n), F.lit(False)),
                    F.col(f"s.`{n}`"),
                )
                .otherwise(F.col(f"t.`{n}`"))
                .alias(n)
                for n in names
            ]
        )
        self.replace(path, merged)
        return self.target.counts(changes)
