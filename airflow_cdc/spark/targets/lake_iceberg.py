"""The Apache Iceberg format of the lake target: MERGE INTO with the position guard, and schema
changes by Iceberg's own DDL (``ADD COLUMNS``, ``ALTER COLUMN ... TYPE``: int to bigint, float to
double, a decimal's precision at the same scale - Iceberg's rules). A decimal's scale Iceberg
cannot change in place: the job replaces a table of its own catalog (``iceberg:PATH``) with
``CREATE OR REPLACE TABLE ... AS SELECT`` and stops, naming the fix, on any other catalog's.

Where the tables live:

- ``iceberg:/data/lake``: a Hadoop catalog (metadata files only, no service) whose warehouse is
  that directory; the job names it ``cdc_iceberg_<hash of the path>`` and configures it itself
  (``catalog_conf``), so nothing else is needed. A source table ``public.orders`` is
  ``/data/lake/public/orders``.
- ``iceberg:catalog=NAME``: the tables of the Spark catalog ``NAME``, configured as Iceberg
  documents it, e.g. with ``spark-submit --conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog
  --conf spark.sql.catalog.lake.type=rest --conf spark.sql.catalog.lake.uri=https://...`` (or the
  operator's ``conf``); the job uses it as it is.

A source table ``schema.table`` (or its ``table_map`` name) is the catalog's namespace ``schema``
and table ``table``; the namespace is created when missing. MERGE and UPDATE run as Spark's own
row-level operations (Spark 4): Iceberg's SQL extensions are not needed.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.targets import lake_backfill
from airflow_cdc.spark.targets.lake_evolution import LakePlan, LakeTargetError
from airflow_cdc.spark.targets.lake_schemas import in_place

if TYPE_CHECKING:
    from airflow_cdc.spark.targets.lake import LakeTarget

log = logging.getLogger(__name__)

_CATALOG_PREFIX = "catalog="


def catalog_conf(url: str) -> tuple[str, dict[str, str]]:
    """The catalog name of an ``iceberg:`` target URL and the Spark configuration it needs (none
    for ``iceberg:catalog=NAME``: the user's configuration defines it)."""
    place = url.partition(":")[2].removeprefix("//")
    if place.startswith(_CATALOG_PREFIX):
        name = place[len(_CATALOG_PREFIX) :]
        if not name.replace("_", "").isalnum():
            raise ConfigError(
                [ConfigProblem("--target-url", f"bad Iceberg catalog name {name!r}", "iceberg:catalog=NAME")]
            )
        return name, {}
    if not place:
        raise ConfigError([ConfigProblem("--target-url", "iceberg: without a path", "iceberg:/data/lake")])
    name = "cdc_iceberg_" + hashlib.sha1(place.encode()).hexdigest()[:10]
    prefix = f"spark.sql.catalog.{name}"
    return name, {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": place,
        # No table cache: a streaming query's batches run in a clone of the job's session, with
        # a catalog instance of their own, and a table cached in the other would stay at the
        # snapshot it was first read at (a reader saw the table empty after the batch's MERGE).
        f"{prefix}.cache-enabled": "false",
    }


class IcebergFormat:
    name = "iceberg"

    def __init__(self, target: LakeTarget, root: str) -> None:
        self.target = target
        self.url = f"iceberg:{root}"
        self.catalog, self.conf = catalog_conf(self.url)
        self.root = root

    def _ready(self, spark: Any) -> None:
        """The Hadoop catalog's configuration, set at runtime in a session that lacks it (Spark
        loads a catalog on its first use, by the configuration then). Every session is checked:
        a streaming query's batches run in a clone of the job's session."""
        for key, value in self.conf.items():
            if spark.conf.get(key, None) != value:
                spark.conf.set(key, value)

    def _parts(self, table: str) -> list[str]:
        return self.target.target_name(table).split(".")

    def where(self, table: str) -> str:
        return ".".join(f"`{p}`" for p in [self.catalog, *self._parts(table)])

    def ref(self, table: str) -> str:
        return self.where(table)

    def schema(self, spark: Any, table: str) -> Any:
        """The table's Spark schema; None when the catalog has no such table."""
        self._ready(spark)
        if not spark.catalog.tableExists(self.where(table)):
            return None
        return spark.table(self.where(table)).schema

    def frame(self, spark: Any, table: str) -> Any:
        self._ready(spark)
        return spark.table(self.where(table))

    def columns(self, spark: Any, table: str) -> dict[str, str] | None:
        schema = self.schema(spark, table)
        return None if schema is None else {f.name: f.dataType.simpleString() for f in schema.fields}

    def create(self, spark: Any, table: str, columns: list[tuple[str, str]]) -> None:
        self._ready(spark)
        parts = self._parts(table)
        if len(parts) > 1:
            namespace = ".".join(f"`{p}`" for p in [self.catalog, *parts[:-1]])
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        ddl = ", ".join(f"`{name}` {spark_type}" for name, spark_type in columns)
        self._sql(
            spark, f"CREATE TABLE IF NOT EXISTS {self.where(table)} ({ddl}, {POSITION_COLUMN} string) USING iceberg"
        )

    def evolve(self, spark: Any, table: str, plan: LakePlan, defaults: dict[str, str]) -> None:
        self._ready(spark)
        ref = self.where(table)
        rewrites = {name: new for name, current, new in plan.widen if not in_place("iceberg", current, new)}
        if rewrites and not self.conf:
            name, new = next(iter(rewrites.items()))
            raise LakeTargetError(
                f"iceberg table {ref} (source {plan.source}): column {name} must widen to {new}, a decimal scale "
                "Iceberg changes only by rewriting the table, which the job does only in its own catalog "
                f"(iceberg:PATH), not in catalog {self.catalog}. Nothing of this batch was applied. Rewrite it "
                f"yourself (CREATE OR REPLACE TABLE {ref} ... AS SELECT ..., CAST({name} AS {new}) AS {name}, ...), "
                "or set schema_change_policy='ignore'; then run the job again: it applies from this batch"
            )
        lake_backfill.note(lambda statement: self._sql(spark, statement), ref, defaults)
        if plan.add:
            self._sql(spark, f"ALTER TABLE {ref} ADD COLUMNS ({', '.join(f'`{n}` {t}' for n, t, _ in plan.add)})")
        for name, _, new in plan.widen:
            if name not in rewrites:
                self._sql(spark, f"ALTER TABLE {ref} ALTER COLUMN `{name}` TYPE {new}")
        if rewrites:
            # One atomic replace (Iceberg's staged REPLACE TABLE ... AS SELECT): readers see the
            # table before or after, never without it. The tables the job creates have no
            # partitioning or properties of their own to carry over.
            columns = [
                f"CAST(`{n}` AS {rewrites[n]}) AS `{n}`" if n in rewrites else f"`{n}`"
                for n in self._names(spark, table)
            ]
            self._sql(spark, f"CREATE OR REPLACE TABLE {ref} USING iceberg AS SELECT {', '.join(columns)} FROM {ref}")
        if defaults:
            self.finish_backfill(spark, table, [name for name, _, _ in plan.add])

    def finish_backfill(self, spark: Any, table: str, columns: list[str]) -> list[str]:
        self._ready(spark)
        return lake_backfill.finish(spark, lambda statement: self._sql(spark, statement), self.where(table), columns)

    def _names(self, spark: Any, table: str) -> list[str]:
        return list(spark.table(self.where(table)).columns)

    @staticmethod
    def _sql(spark: Any, statement: str) -> None:
        log.warning("Schema change: %s", statement)
        spark.sql(statement)

    def apply(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        from airflow_cdc.spark.targets.lake import merged_into

        self._ready(spark)
        return merged_into(spark, self.target, table, rows, self.ref(table))
