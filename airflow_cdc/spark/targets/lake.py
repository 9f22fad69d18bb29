"""Delta Lake and Parquet targets: one table directory per source table under a root path.

``delta:/data/lake`` writes ``/data/lake/<schema.table>`` with Delta's MERGE (the delta-spark
jars, ADR 0012); ``parquet:/data/lake`` keeps a current-state Parquet table there, replaced whole
each batch (a new version directory, then an atomic rename of the ``_current`` pointer file, so a
reader never sees half a batch). Both keep ``_cdc_position`` per row with the same guard as the
SQL targets: a change applies only over a row whose position is null or not greater.

Values are decoded by the target table's own Spark schema (``values.py`` by the matching
PostgreSQL type: decimal(p,s) takes its scale, timestamp columns are microseconds as PostgreSQL's
default precision gives them). The table must exist with the source's columns and
``_cdc_position string``; the error says how to create it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.values import ColumnType, Modes, decoder_for, json_text

_META = ("_op", "_unavailable")
_POINTER = "_current"


class LakeTargetError(CdcError):
    """A Delta or Parquet target is missing or does not fit the changes; the message says how to fix it."""


def _pg_type(spark_type: Any) -> tuple[str, int | None]:
    name = spark_type.typeName()
    if name == "decimal":
        return "numeric", spark_type.scale
    return {
        "integer": "int4",
        "long": "int8",
        "short": "int2",
        "byte": "int2",
        "double": "float8",
        "float": "float4",
        "boolean": "bool",
        "date": "date",
        "timestamp_ntz": "timestamp",
        "timestamp": "timestamptz",
        "binary": "bytea",
    }.get(name, "text"), None


def _pythonic(spark_type: Any) -> Callable[[Any], Any]:
    """The decoder's output (PostgreSQL's text form, or bytes) as the Spark type's Python value."""
    name = spark_type.typeName()
    if name in ("integer", "long", "short", "byte"):
        return int
    if name in ("double", "float"):
        return float
    if name == "decimal":
        return Decimal
    if name == "boolean":
        return lambda v: v if isinstance(v, bool) else str(v).lower() in ("t", "true", "1")
    if name == "date":
        return dt.date.fromisoformat
    if name == "timestamp_ntz":
        return lambda v: dt.datetime.fromisoformat(str(v).replace(" ", "T"))
    if name == "timestamp":
        return lambda v: dt.datetime.fromisoformat(str(v).replace(" ", "T").replace("Z", "+00:00"))
    return lambda v: v


def row_decoder(table: str, schema: Any, modes: Modes) -> Callable[[Any], tuple[Any, ...]]:
    """A latest-frame row → a tuple in the target schema's order, then ``_op``, ``_unavailable``."""
    columns = [f for f in schema.fields if f.name != POSITION_COLUMN]
    steps = []
    for f in columns:
        type_name, scale = _pg_type(f.dataType)
        decode = decoder_for(ColumnType(table, f.name, type_name, scale=scale), modes)
        steps.append((f.name, decode, _pythonic(f.dataType)))

    def convert(row: Any) -> tuple[Any, ...]:
        after = row.after or {}
        if row.op == "d":
            after = {k: json_text(v) for k, v in json.loads(row.key).items()}
        values = []
        for name, decode, python in steps:
            value = decode(after.get(name))
            values.append(None if value is None else python(value))
        return (*values, row.position, row.op, list(row.unavailable or ()))

    return convert


class LakeTarget:
    #: Tables of one batch applied at once (1: one after another). None: half the executors'
    #: cores, at most 4 - each table's stages fill the cores they get, so on a small machine
    #: (local[2]: 1) tables in parallel only contend (``bench/lake_tables.py``).
    parallel_tables: int | None = None

    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> None:
        self.kind, _, root = url.partition(":")
        self.root = Path(root.removeprefix("//"))
        self.table_map = dict(table_map)
        self.modes = Modes.from_config(dict(settings))

    def path(self, table: str) -> Path:
        return self.root / self.table_map.get(table, table)

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
            apply = self._delta if self.kind == "delta" else self._parquet

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

    # -- decoding ---------------------------------------------------------------------------
    def _schema(self, spark: Any, table: str) -> Any:
        path = self.path(table)
        try:
            if self.kind == "delta":
                schema = spark.read.format("delta").load(str(path)).schema
            else:
                schema = spark.read.parquet(str(self._current(path))).schema
        except Exception as exc:  # AnalysisException: no such table
            raise LakeTargetError(
                f"no {self.kind} table for {table} at {path}: create it with the source's columns, e.g. "
                f"airflow_cdc.spark.targets.lake.create_table(spark, '{self.kind}:{self.root}', '{table}', "
                "'id int, name string, ...')"
            ) from exc
        if POSITION_COLUMN not in schema.fieldNames():
            raise LakeTargetError(f"the {self.kind} table at {path} lacks `{POSITION_COLUMN} string`: add it")
        return schema

    def _decoded(self, spark: Any, table: str, rows: Any) -> tuple[Any, Any]:
        from pyspark.sql.types import ArrayType, StringType, StructField, StructType

        schema = self._schema(spark, table)
        convert = row_decoder(table, schema, self.modes)
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

    def _key_columns(self, rows: Any) -> list[str]:
        first = rows.where(rows["op"] != "t").select("key").first()
        return list(json.loads(first.key)) if first else []

    @staticmethod
    def _truncate_position(rows: Any) -> str | None:
        found = rows.where(rows["op"] == "t").agg({"position": "max"}).first()
        return found[0] if found else None

    # -- Delta ------------------------------------------------------------------------------
    def _delta(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        path, counts = str(self.path(table)), {"truncated": 0}
        cut = self._truncate_position(rows)
        if cut is not None:
            spark.sql(f"DELETE FROM delta.`{path}` WHERE {POSITION_COLUMN} IS NULL OR {POSITION_COLUMN} < '{cut}'")
            counts["truncated"] = 1
        keys = self._key_columns(rows)
        if not keys:
            return counts
        schema, changes = self._decoded(spark, table, rows)
        view = f"cdc_changes_{uuid.uuid4().hex}"
        changes.createOrReplaceTempView(view)
        try:
            spark.sql(_merge_sql(path, view, schema.fieldNames(), keys))
        finally:
            spark.catalog.dropTempView(view)
        ops = {r["_op"]: r["count"] for r in changes.groupBy("_op").count().collect()}
        counts["deleted"] = ops.get("d", 0)
        counts["upserted"] = sum(v for k, v in ops.items() if k != "d")
        return counts

    # -- Parquet ----------------------------------------------------------------------------
    def _current(self, path: Path) -> Path:
        return path / (path / _POINTER).read_text().strip()

    def _parquet(self, spark: Any, table: str, rows: Any) -> dict[str, int]:
        from pyspark.sql import functions as F

        path = self.path(table)
        schema, changes = self._decoded(spark, table, rows)
        keys = self._key_columns(rows)
        current = spark.read.schema(schema).parquet(str(self._current(path)))
        cut = self._truncate_position(rows)
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
                    F.col(f"s.{n}"),
                )
                .otherwise(F.col(f"t.{n}"))
                .alias(n)
                for n in names
            ]
        )
        version = f"v{uuid.uuid4().hex}"
        merged.write.parquet(str(path / version))
        pointer = path / f".{_POINTER}.{version}"
        pointer.write_text(version)
        previous = (path / _POINTER).read_text().strip()
        os.replace(pointer, path / _POINTER)  # readers switch at once, never to half a batch
        _remove_tree(path / previous)
        ops = {r["_op"]: r["count"] for r in changes.groupBy("_op").count().collect()}
        return {"upserted": sum(v for k, v in ops.items() if k != "d"), "deleted": ops.get("d", 0)}


def create_table(spark: Any, url: str, table: str, columns: str) -> Path:
    """An empty target table for ``table`` at ``url`` (``delta:`` or ``parquet:``) with
    ``columns`` (a Spark DDL list, e.g. ``"id int, name string"``) and ``_cdc_position``."""
    target = LakeTarget(url, {}, {})
    path = target.path(table)
    empty = spark.createDataFrame([], f"{columns}, {POSITION_COLUMN} string")
    if target.kind == "delta":
        empty.write.format("delta").mode("overwrite").save(str(path))
    else:
        empty.write.mode("overwrite").parquet(str(path / "v0"))
        (path / _POINTER).write_text("v0")
    return path


def _merge_sql(path: str, view: str, names: list[str], keys: list[str]) -> str:
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
        f"MERGE INTO delta.`{path}` t USING {view} s ON {on} "
        f"WHEN MATCHED AND s._op = 'd' AND {newer} THEN DELETE "
        f"WHEN MATCHED AND s._op <> 'd' AND {newer} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s._op <> 'd' THEN INSERT ({columns}) VALUES ({values})"
    )


def _remove_tree(path: Path) -> None:
    import shutil

    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
