"""Lake targets: Delta Lake, Parquet and Apache Iceberg, one table per source table.

``delta:/data/lake`` writes ``/data/lake/<schema.table>`` with Delta's MERGE (the delta-spark
jars, ADR 0012, ``lake_delta.py``); ``parquet:/data/lake`` keeps a current-state Parquet table
there, replaced whole each batch (``lake_parquet.py``); ``iceberg:/data/lake`` MERGEs into Iceberg
tables of a Hadoop catalog in that directory, ``iceberg:catalog=NAME`` into those of any catalog
the Spark configuration defines (``lake_iceberg.py``). All keep ``_cdc_position`` per row with
the same guard as the SQL targets: a change applies only over a row whose position is null or not
greater.

Before a batch's write, ``prepare`` creates a missing table and adds and widens columns from the
schemas the batch's records carry, as the schema change policy allows (``lake_evolution.py``).
Without schemas (``schemas.enable=false``) the table must exist with the source's columns and
``_cdc_position string`` (``create_table``); the error says so.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.schema_policy import policy_of
from airflow_cdc.spark.table_schemas import SourceColumn, TableSchema, fingerprint, merged
from airflow_cdc.spark.targets.lake_decoding import default_value, row_decoder
from airflow_cdc.spark.targets.lake_evolution import LakePlan, LakeTargetError, plan_table, sql_literal
from airflow_cdc.spark.values import Modes

log = logging.getLogger(__name__)

__all__ = ["LakeTarget", "LakeTargetError", "create_table", "row_decoder"]


class LakeFormat(Protocol):
    """One lake format's side of a ``LakeTarget`` (``lake_delta``, ``lake_parquet``, ``lake_iceberg``)."""

    root: Any

    def where(self, table: str) -> str: ...
    def schema(self, spark: Any, table: str) -> Any: ...
    def frame(self, spark: Any, table: str) -> Any: ...
    def columns(self, spark: Any, table: str) -> dict[str, str] | None: ...
    def create(self, spark: Any, table: str, columns: list[tuple[str, str]]) -> None: ...
    def evolve(self, spark: Any, table: str, plan: LakePlan, defaults: dict[str, str]) -> None: ...
    def apply(self, spark: Any, table: str, rows: Any) -> dict[str, int]: ...


class LakeTarget:
    #: Tables of one batch applied at once (1: one after another). None: half the executors'
    #: cores, at most 4 - each table's stages fill the cores they get, so on a small machine
    #: (local[2]: 1) tables in parallel only contend (``bench/lake_tables.py``).
    parallel_tables: int | None = None

    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> None:
        from airflow_cdc.spark.targets.lake_delta import DeltaFormat
        from airflow_cdc.spark.targets.lake_iceberg import IcebergFormat
        from airflow_cdc.spark.targets.lake_parquet import ParquetFormat

        self.kind, _, root = url.partition(":")
        self.kind = self.kind.lower()
        self.root = Path(root.removeprefix("//"))
        self.table_map = dict(table_map)
        self.modes = Modes.from_config(dict(settings))
        self.policy = policy_of(settings)
        formats: dict[str, Any] = {"delta": DeltaFormat, "parquet": ParquetFormat, "iceberg": IcebergFormat}
        self.format: LakeFormat = formats[self.kind](self, root)
        #: Per source table, from the last batch with schemas: its columns, the columns whose
        #: absence from a change keeps the row's value, and the schema versions prepared for.
        self._sources: dict[str, dict[str, SourceColumn]] = {}
        self._keep: dict[str, frozenset[str]] = {}
        self._prepared: dict[str, tuple[str, ...]] = {}

    def path(self, table: str) -> Path:
        return self.root / self.table_map.get(table, table)

    def target_name(self, table: str) -> str:
        return self.table_map.get(table, table)

    def read(self, spark: Any, table: str) -> Any:
        """The target table of source ``table`` as a DataFrame (``_cdc_position`` included), read
        in ``spark`` as the job writes it (an Iceberg catalog configured in that session first)."""
        return self.format.frame(spark, table)

    # -- schema changes ----------------------------------------------------------------------
    def prepare(self, versions: Mapping[str, list[TableSchema]]) -> list[LakePlan]:
        """Creates, adds and widens the batch's tables on the driver, before ``apply``; returns
        the plans that changed a table. A table whose schemas are those of the batch before is
        not looked at again."""
        from pyspark.sql import SparkSession

        spark = SparkSession.active()
        done = []
        for table in sorted(versions):
            schemas = list(versions[table])
            if not schemas:
                continue
            stamp = tuple(fingerprint(s) for s in schemas)
            if self._prepared.get(table) == stamp:
                continue
            current = self.format.columns(spark, table)
            if table not in self._prepared and current is not None:
                self._finish_backfill(spark, table, list(current))
            plan = plan_table(self.kind, self.policy, self.format.where(table), table, schemas, current)
            if plan.create is not None:
                self.format.create(spark, table, plan.create)
            if plan.add or plan.widen:
                self.format.evolve(spark, table, plan, self._defaults(table, plan))
            if plan.changes:
                done.append(plan)
            self._sources[table] = {c.name: c for c in merged(schemas).columns}
            self._keep[table] = plan.keep_absent
            self._prepared[table] = stamp
        return done

    def _finish_backfill(self, spark: Any, table: str, columns: list[str]) -> None:
        """A default a killed run added a column for but did not fill (``lake_backfill``), filled
        at the job's first look at the table, before anything of this run is written to it."""
        finish = getattr(self.format, "finish_backfill", None)
        if finish is not None:
            filled = finish(spark, table, columns)
            if filled:
                log.warning("Schema change: %s: filled the defaults of %s a stopped run had left", table, filled)

    def _defaults(self, table: str, plan: LakePlan) -> dict[str, str]:
        """SQL literals of the source defaults of the columns ``plan`` adds (only those with one)."""
        from pyspark.sql.types import DataType

        out = {}
        for name, spark, column in plan.add:
            if column.has_default and column.default is not None:
                out[name] = sql_literal(default_value(table, column, DataType.fromDDL(spark), self.modes), spark)
        return out

    # -- applying ----------------------------------------------------------------------------
    def apply(self, latest: Any) -> dict[str, int]:
        """Each table of the batch by its own Spark jobs, up to ``parallel_tables`` tables at once
        from driver threads: a table's MERGE or rewrite is mostly driver-side latency (planning,
        the Delta log, small stages) that leaves the executors' cores idle, and tables are
        independent (own directory, own log). Counts are summed, and a failure raised, in the
        tables' sorted order, whichever thread finished first."""
        counts = {"upserted": 0, "deleted": 0, "truncated": 0}
        latest = latest.persist()
        try:
            tables = sorted(table for (table,) in latest.select("table").distinct().collect())
            apply = {"delta": self._delta, "parquet": self._parquet, "iceberg": self._iceberg}[self.kind]

            def one(table: str) -> dict[str, int]:
                return apply(latest.sparkSession, table, latest.where(latest["table"] == table))

            wanted = self.parallel_tables or min(4, latest.sparkSession.sparkContext.defaultParallelism // 2)
            workers = max(1, min(len(tables), wanted))
            with ThreadPoolExecutor(workers, thread_name_prefix="cdc-lake-table") as pool:
                futures = [pool.submit(one, table) for table in tables]
            for future in futures:  # all have ended: the first failing table's error, in table order
                for name, value in future.result().items():
                    counts[name] = counts.get(name, 0) + value
        finally:
            latest.unpersist()
        return counts

    def _delta(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        return self.format.apply(spark, table, rows)

    def _parquet(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        return self.format.apply(spark, table, rows)

    def _iceberg(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        return self.format.apply(spark, table, rows)

    # -- decoding ---------------------------------------------------------------------------
    def _schema(self, spark: Any, table: str) -> Any:
        schema = self.format.schema(spark, table)
        if schema is None:
            raise LakeTargetError(
                f"no {self.kind} table for {table} at {self.format.where(table)}: create it with the source's "
                f"columns, e.g. airflow_cdc.spark.targets.lake.create_table(spark, '{self.kind}:{self.format.root}', "
                f"'{table}', 'id int, name string, ...'), or enable schemas in the change events "
                "(value.converter.schemas.enable=true) so that the job creates it"
            )
        if POSITION_COLUMN not in schema.fieldNames():
            raise LakeTargetError(
                f"the {self.kind} table at {self.format.where(table)} lacks `{POSITION_COLUMN} string`: add it"
            )
        return schema

    def decoded(self, spark: Any, table: str, rows: Any) -> tuple[Any, Any]:
        """The table's Spark schema, and the batch's changes to it as rows of that schema plus
        ``_cdc_position``, ``_op``, ``_unavailable`` (truncates left out)."""
        from pyspark.sql.types import ArrayType, StringType, StructField, StructType

        schema = self._schema(spark, table)
        convert = row_decoder(table, schema, self.modes, self._sources.get(table), self._keep.get(table, ()))
        fields = [f for f in schema.fields if f.name != POSITION_COLUMN]
        source_schema = StructType(
            [
                *fields,
                StructField(POSITION_COLUMN, StringType()),
                StructField("_op", StringType()),
                StructField("_unavailable", ArrayType(StringType())),
            ]
        )

        def partition(items: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
            return (convert(row) for row in items if row.op != "t")

        changes = spark.createDataFrame(rows.rdd.mapPartitions(partition), source_schema)
        return schema, changes

    @staticmethod
    def key_columns(rows: Any) -> list[str]:
        first = rows.where(rows["op"] != "t").select("key").first()
        return list(json.loads(first.key)) if first else []

    @staticmethod
    def truncate_position(rows: Any) -> str | None:
        found = rows.where(rows["op"] == "t").agg({"position": "max"}).first()
        return found[0] if found else None

    @staticmethod
    def counts(changes: Any) -> dict[str, int]:
        ops = {r["_op"]: r["count"] for r in changes.groupBy("_op").count().collect()}
        return {"upserted": sum(v for k, v in ops.items() if k != "d"), "deleted": ops.get("d", 0)}


def create_table(spark: Any, url: str, table: str, columns: str) -> Any:
    """An empty target table for ``table`` at ``url`` (``delta:``, ``parquet:`` or ``iceberg:``)
    with ``columns`` (a Spark DDL list, e.g. ``"id int, name string"``) and ``_cdc_position``;
    returns its path (its catalog name for Iceberg)."""
    from pyspark.sql.types import StructType

    target = LakeTarget(url, {}, {})
    fields = StructType.fromDDL(columns).fields  # type: ignore[attr-defined]
    target.format.create(spark, table, [(f.name, f.dataType.simpleString()) for f in fields])
    return target.path(table) if target.kind != "iceberg" else target.format.where(table)


def merge_sql(table_ref: str, view: str, names: list[str], keys: list[str]) -> str:
    """Delta's and Iceberg's MERGE of a batch's changes (``view``) into ``table_ref``, guarded by
    ``_cdc_position``; a column a change lists as unavailable keeps the row's value."""
    q = "`{}`".format
    on = " AND ".join(f"t.{q(k)} <=> s.{q(k)}" for k in keys)
    newer = f"(t.{POSITION_COLUMN} IS NULL OR t.{POSITION_COLUMN} <= s.{POSITION_COLUMN})"
    sets = ", ".join(
        f"t.{q(n)} = CASE WHEN array_contains(s._unavailable, '{n}') THEN t.{q(n)} ELSE s.{q(n)} END"
        for n in names
        if n not in keys
    )
    columns = ", ".join(q(n) for n in names)
    values = ", ".join(f"s.{q(n)}" for n in names)
    return (
        f"MERGE INTO {table_ref} t USING {view} s ON {on} "
        f"WHEN MATCHED AND s._op = 'd' AND {newer} THEN DELETE "
        f"WHEN MATCHED AND s._op <> 'd' AND {newer} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s._op <> 'd' THEN INSERT ({columns}) VALUES ({values})"
    )


def merged_into(spark: Any, target: LakeTarget, table: str, rows: Any, table_ref: str) -> dict[str, int]:
    """A batch's changes to ``table`` MERGEd into ``table_ref`` (Delta's and Iceberg's apply)."""
    counts = {"truncated": 0}
    cut = target.truncate_position(rows)
    if cut is not None:
        spark.sql(f"DELETE FROM {table_ref} WHERE {POSITION_COLUMN} IS NULL OR {POSITION_COLUMN} < '{cut}'")
        counts["truncated"] = 1
    keys = target.key_columns(rows)
    if not keys:
        return counts
    schema, changes = target.decoded(spark, table, rows)
    view = f"cdc_changes_{uuid.uuid4().hex}"
    changes.createOrReplaceTempView(view)
    try:
        spark.sql(merge_sql(table_ref, view, schema.fieldNames(), keys))
    finally:
        spark.catalog.dropTempView(view)
    return {**counts, **target.counts(changes)}
