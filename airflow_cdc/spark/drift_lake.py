"""A lake target (Delta, Iceberg, Parquet) as the target side of the drift check
(``airflow_cdc.drift``, ADR 0027): the same summaries the SQL sides compute in their server, computed
by Spark over the table as the apply job keeps it (``LakeTarget.read``).

The canonical text of a row is the one ``drift/dialects.py`` defines, rendered from the lake's
Spark types (``targets/lake_schemas.py``): decimals without trailing fractional zeros, timestamps
in UTC with microseconds (a ``timestamp`` is an instant, rendered in UTC whatever the session's
time zone), dates ``yyyy-MM-dd``, booleans ``1``/``0``, binary as lowercase hex, NULL as
``chr(30)``, columns joined by ``chr(31)``; the row's hash is the same 60-bit md5 prefix.

Each call is one Spark job over the table (filtered by the key range: Delta and Iceberg skip the
files outside it by their min/max statistics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from airflow_cdc.drift.dialects import POSITION_COLUMN, Column, Dialect
from airflow_cdc.drift.errors import DriftError
from airflow_cdc.drift.sides import Summary

_NULL, _SEPARATOR = chr(30), chr(31)
_TIMESTAMP = "yyyy-MM-dd HH:mm:ss.SSSSSS"


def canonical(column: Column, time_zone: str) -> SparkColumn:
    """A column's canonical text (module docstring), from its Spark type."""
    c, kind = F.col(f"`{column.name}`"), column.data_type
    if kind.startswith("decimal"):
        text = c.cast("string")
        trimmed = F.regexp_replace(F.regexp_replace(text, "0+$", ""), "\\.$", "")
        return F.when(text.contains("."), trimmed).otherwise(text)
    if kind == "boolean":
        return c.cast("int").cast("string")
    if kind == "date":
        return F.date_format(c, "yyyy-MM-dd")
    if kind == "timestamp":  # an instant, rendered in the session's zone: shifted to show UTC
        return F.date_format(F.to_utc_timestamp(c, time_zone), _TIMESTAMP)
    if kind == "timestamp_ntz":
        return F.date_format(c, _TIMESTAMP)
    if kind == "binary":
        return F.lower(F.hex(c))
    return c.cast("string")


def row_hash(columns: Sequence[Column], time_zone: str) -> SparkColumn:
    text = F.concat_ws(_SEPARATOR, *(F.coalesce(canonical(c, time_zone), F.lit(_NULL)) for c in columns))
    return F.conv(F.substring(F.md5(text), 1, 15), 16, 10).cast("decimal(20,0)")


class LakeSide:
    """The target side of the drift check over a lake table's DataFrame."""

    def __init__(self, read: Callable[[], DataFrame], table: str) -> None:
        # Read again at each look: a Delta DataFrame keeps the table version it was created at,
        # and the second look and the repair wait for the apply job's later versions.
        self._read = read
        self.table = table
        self.key = ""
        self.columns: list[Column] = []
        self.queries = 0
        self._time_zone = read().sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"

    @property
    def frame(self) -> DataFrame:
        return self._read()

    def catalog_columns(self) -> list[Column]:
        return [Column(f.name, f.dataType.simpleString()) for f in self.frame.schema.fields]

    def _in(self, low: int, high: int) -> DataFrame:
        self.queries += 1
        key = F.col(f"`{self.key}`")
        return self.frame.where((key >= F.lit(low)) & (key <= F.lit(high)))

    def bounds(self) -> tuple[int, int] | None:
        self.queries += 1
        key = F.col(f"`{self.key}`")
        low, high = self.frame.agg(F.min(key), F.max(key)).first()  # type: ignore[misc]
        return None if low is None else (int(low), int(high))

    def summaries(self, low: int, high: int, width: int) -> dict[int, Summary]:
        bucket = F.floor((F.col(f"`{self.key}`").cast("decimal(38,0)") - F.lit(low)) / F.lit(width)).alias("b")
        found = (
            self._in(low, high)
            .groupBy(bucket)
            .agg(F.count(F.lit(1)).alias("n"), F.sum(row_hash(self.columns, self._time_zone)).alias("s"))
            .collect()
        )
        return {int(r["b"]): Summary(int(r["n"]), int(r["s"] or 0)) for r in found}

    def hashes(self, low: int, high: int) -> dict[int, int]:
        rows = self._in(low, high).select(F.col(f"`{self.key}`"), row_hash(self.columns, self._time_zone)).collect()
        return {int(r[0]): int(r[1]) for r in rows}

    def hashes_of(self, keys: Iterable[int]) -> dict[int, int]:
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        self.queries += 1
        rows = (
            self.frame.where(F.col(f"`{self.key}`").isin(wanted))
            .select(F.col(f"`{self.key}`"), row_hash(self.columns, self._time_zone))
            .collect()
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def passed(self, position: str, source: Dialect) -> bool:
        # The same part of the position the SQL targets compare (drift/dialects.py).
        part = F.col(POSITION_COLUMN)
        if source.position_part is not None:
            part = F.substring(part, *source.position_part)
        self.queries += 1
        return bool(self.frame.where(part >= F.lit(position)).limit(1).count())

    def delete_absent(self, keys: Sequence[int], position: str, source: Dialect) -> int:
        raise DriftError(
            f"{self.table}: rows the source does not have ({len(keys)}) are not deleted from a lake table by the "
            "repair; delete them with the format's own DELETE"
        )


def lake_side(url: str, table: str, target_table: str | None = None) -> LakeSide:
    """The target side for source ``table`` on a lake target ``url`` (``delta:PATH``,
    ``iceberg:PATH``, ``parquet:PATH``; the apply job's ``target_url``), read in the active Spark
    session, or a local one with the connector jars ``scripts/setup`` resolved."""
    from pyspark.sql import SparkSession

    from airflow_cdc.spark.apply import connector_jars
    from airflow_cdc.spark.targets.lake import LakeTarget

    spark = SparkSession.getActiveSession()
    if spark is None:
        builder = SparkSession.builder.master("local[2]").appName("airflow-cdc-validate")
        builder = builder.config("spark.ui.enabled", "false").config("spark.jars", ",".join(connector_jars()))
        builder = builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        builder = builder.config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        spark = builder.getOrCreate()
    lake = LakeTarget(url, {table: target_table} if target_table else {}, {})
    return LakeSide(lambda: lake.read(spark, table), lake.target_name(table))
