"""The Delta Lake format of the lake target: MERGE with the position guard, and schema changes
by Delta's own DDL.

Tables the job creates have Delta's type widening on (``delta.enableTypeWidening``: integers,
float to double, a decimal's precision and scale widen in place, no rewrite); a table created
without it gets it when a column must first widen. The table feature raises the table's protocol
(reader 3, writer 7): its readers need a Delta that knows the ``typeWidening`` feature. Widening and
every read past a log checkpoint need delta-spark 4.3.0 on pyspark 4.1.3 (4.2.0's jars fail on it,
ADR 0012). Columns are never dropped or renamed here, so Delta's column mapping is not needed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.targets import lake_backfill
from airflow_cdc.spark.targets.lake_evolution import LakePlan

if TYPE_CHECKING:
    from airflow_cdc.spark.targets.lake import LakeTarget

log = logging.getLogger(__name__)

WIDENING = "delta.enableTypeWidening"


class DeltaFormat:
    name = "delta"

    def __init__(self, target: LakeTarget, root: str) -> None:
        self.target, self.root = target, target.root

    def where(self, table: str) -> str:
        return str(self.target.path(table))

    def ref(self, table: str) -> str:
        return f"delta.`{self.where(table)}`"

    def schema(self, spark: Any, table: str) -> Any:
        """The table's Spark schema; None when there is no Delta table."""
        from pyspark.errors import AnalysisException

        try:
            return spark.read.format("delta").load(self.where(table)).schema
        except AnalysisException:  # no such path, or not a Delta table
            return None

    def frame(self, spark: Any, table: str) -> Any:
        return spark.read.format("delta").load(self.where(table))

    def columns(self, spark: Any, table: str) -> dict[str, str] | None:
        schema = self.schema(spark, table)
        return None if schema is None else {f.name: f.dataType.simpleString() for f in schema.fields}

    def create(self, spark: Any, table: str, columns: list[tuple[str, str]]) -> None:
        ddl = ", ".join(f"`{name}` {spark_type}" for name, spark_type in columns)
        empty = spark.createDataFrame([], f"{ddl}, {POSITION_COLUMN} string")
        log.warning("Schema change: creating Delta table %s (%s)", self.where(table), ddl)
        # "ignore": a table another job created meanwhile is left as it is
        empty.write.format("delta").option(WIDENING, "true").mode("ignore").save(self.where(table))

    def evolve(self, spark: Any, table: str, plan: LakePlan, defaults: dict[str, str]) -> None:
        ref = self._run_for(spark, table)
        lake_backfill.note(lambda statement: self._sql(spark, statement), self.ref(table), defaults)
        if plan.add:
            ref(f"ADD COLUMNS ({', '.join(f'`{name}` {spark_type}' for name, spark_type, _ in plan.add)})")
        if plan.widen:
            properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {self.ref(table)}").collect()}
            if properties.get(WIDENING) != "true":
                ref(f"SET TBLPROPERTIES ('{WIDENING}' = 'true')")
            for name, _, new in plan.widen:
                ref(f"ALTER COLUMN `{name}` TYPE {new}")
        if defaults:
            self.finish_backfill(spark, table, [name for name, _, _ in plan.add])

    def finish_backfill(self, spark: Any, table: str, columns: list[str]) -> list[str]:
        return lake_backfill.finish(spark, lambda statement: self._sql(spark, statement), self.ref(table), columns)

    def _run_for(self, spark: Any, table: str) -> Any:
        def alter(clause: str) -> None:
            self._sql(spark, f"ALTER TABLE {self.ref(table)} {clause}")

        return alter

    @staticmethod
    def _sql(spark: Any, statement: str) -> None:
        log.warning("Schema change: %s", statement)
        spark.sql(statement)

    def apply(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        from airflow_cdc.spark.targets.lake import merged_into

        return merged_into(spark, self.target, table, rows, self.ref(table))
