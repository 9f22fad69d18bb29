"""What a lake table must become for one batch's schemas, under the schema change policy
(``schema_policy.py``): the decisions, apart from the formats that carry them out
(``lake_delta.py``, ``lake_parquet.py``, ``lake_iceberg.py``), so that the three decide alike.

A column the source dropped stays in a lake table under every policy (a lake keeps history;
dropping a Delta or Iceberg column needs column mapping or rewrites readers' expectations):
``evolve`` writes NULL into it for every row changed after, ``lenient`` and ``ignore`` keep the
rows' values (the decoder lists it as unavailable in a change that lacks it). A rename is a drop
and an add.

A column added with a default on the source gives every existing source row that value without a
change event (Debezium's schema carries the constant default): the lake's existing rows get it too,
once, when the column is added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.schema_policy import creates, say_once
from airflow_cdc.spark.table_schemas import SourceColumn, TableSchema, merged
from airflow_cdc.spark.targets.lake_schemas import can_widen, how_to_widen, spark_type, takes, widened


class LakeTargetError(CdcError):
    """A Delta, Parquet or Iceberg target is missing or does not fit the changes; the message says how to fix it."""


@dataclass
class LakePlan:
    """The changes one lake table needs before a batch's write; empty when it fits."""

    source: str
    #: Columns (name, Spark type) of a table to create; None: the table exists (or stays missing).
    create: list[tuple[str, str]] | None = None
    #: Columns to add: name, Spark type, the source column (for its default).
    add: list[tuple[str, str, SourceColumn]] = field(default_factory=list)
    #: Columns to widen: name, current type, new type.
    widen: list[tuple[str, str, str]] = field(default_factory=list)
    #: Columns the source no longer has whose values the table keeps.
    keep_absent: frozenset[str] = frozenset()

    @property
    def changes(self) -> bool:
        return self.create is not None or bool(self.add or self.widen)


#: How to change a column's type when the format cannot: per format, the fix a message names.
_REWRITE = {
    "delta": (
        "spark.read.format('delta').load('{where}').withColumn('{column}', F.col('{column}').cast('{wanted}'))"
        ".write.format('delta').mode('overwrite').option('overwriteSchema', 'true').save('{where}')"
    ),
    "iceberg": (
        "CREATE OR REPLACE TABLE {where} USING iceberg AS SELECT ..., CAST({column} AS {wanted}) AS {column}, ..."
    ),
    "parquet": "remove {where} so that the job creates it again",
}


def plan_table(
    fmt: str,
    policy: str,
    where: str,
    source: str,
    versions: Sequence[TableSchema],
    current: Mapping[str, str] | None,
) -> LakePlan:
    """The plan for the lake table at ``where`` (a path or a catalog name) of ``source``, whose
    columns are ``current`` (name -> Spark type; None: no table), for ``versions`` (oldest first)."""
    whole = merged(versions)
    newest = set(versions[-1].names)
    plan = LakePlan(source)
    if current is None:
        if creates(policy):
            plan.create = [(c.name, spark_type(c)) for c in whole.columns]
        return plan
    if policy == "exception":
        _refuse_changes(fmt, where, source, versions[-1], current)
        return plan
    types = dict(current)
    for column in whole.columns:
        if column.name not in types:
            if policy == "ignore":
                say_once(
                    source,
                    column.name,
                    message=f"{fmt} table {where} (source {source}) has no column {column.name} ({column.described}): "
                    "its values are not applied (schema change policy 'ignore')",
                )
                continue
            types[column.name] = spark_type(column)
            plan.add.append((column.name, types[column.name], column))
            continue
        for version in versions:  # every version: a batch may hold int, then bigint
            seen = version.column(column.name)
            if seen is not None:
                types[column.name] = _fit(fmt, policy, where, source, seen, types[column.name], plan)
    kept = {n for n in current if n != POSITION_COLUMN and n not in newest} if policy != "evolve" else set()
    # A change from before the ADD COLUMN (earlier in the batch) lacks a column added with a
    # default: the row keeps the backfilled default rather than getting NULL.
    kept |= {name for name, _, column in plan.add if column.has_default and column.name in newest}
    plan.keep_absent = frozenset(kept)
    return plan


def _fit(fmt: str, policy: str, where: str, source: str, column: SourceColumn, current: str, plan: LakePlan) -> str:
    """The column's type after fitting it to ``column``'s; a widening goes into ``plan``."""
    wanted = spark_type(column)
    verdict = takes(current, wanted)
    if verdict == "as is":
        return current
    if policy == "ignore":
        say_once(
            source,
            column.name,
            wanted,
            message=f"Column {column.name} of {fmt} table {where} (source {source}) stays {current}; the source's is "
            f"now {column.described} ({wanted} here) (schema change policy 'ignore')",
        )
        return current
    new = widened(current, wanted) if verdict == "widen" else wanted
    if verdict == "no" or not can_widen(fmt, current, new):
        raise LakeTargetError(incompatible(fmt, where, source, column, current, new))
    plan.widen.append((column.name, current, new))
    return new


def incompatible(fmt: str, where: str, source: str, column: SourceColumn, current: str, wanted: str) -> str:
    limit = how_to_widen(fmt)
    fix = _REWRITE[fmt].format(where=where, column=column.name, wanted=wanted)
    return (
        f"{fmt} table {where} (source {source}): column {column.name} is {current} in the target, but the source's "
        f"changes now carry {column.described} ({wanted} on this target), which a {current} column cannot take "
        f"and {fmt} cannot widen it to{f' ({limit})' if limit else ''}. Nothing of this batch was applied. Change "
        f"the column yourself ({fix}), or remove the table so that the job creates it again (then send "
        f"execute-snapshot for {source}), or set schema_change_policy='ignore' to keep {current}; then run the job "
        "again: it applies from this batch"
    )


def _refuse_changes(fmt: str, where: str, source: str, newest: TableSchema, current: Mapping[str, str]) -> None:
    """``exception``: a column the table lacks or a narrower type stops the job, as before."""
    missing = [c for c in newest.columns if c.name not in current]
    if missing:
        adds = ", ".join(f"{c.name} {spark_type(c)}" for c in missing)
        raise LakeTargetError(
            f"{fmt} table {where} (source {source}) lacks the column(s) {', '.join(c.name for c in missing)} that "
            f"the change events carry: add them (ALTER TABLE ... ADD COLUMNS ({adds})) (schema change policy "
            "'exception'; 'lenient' adds them)"
        )
    for column in newest.columns:
        wanted = spark_type(column)
        verdict = takes(current[column.name], wanted)
        if verdict == "no":
            raise LakeTargetError(incompatible(fmt, where, source, column, current[column.name], wanted))
        if verdict == "widen":
            raise LakeTargetError(
                f"{fmt} table {where} (source {source}): column {column.name} is {current[column.name]}, narrower "
                f"than the source's {column.described}: widen it to {widened(current[column.name], wanted)} (schema "
                "change policy 'exception'; 'lenient' widens it)"
            )


def sql_literal(value: Any, spark: str) -> str:
    """A Python value of Spark type ``spark`` as a SQL literal (a default's backfill)."""
    if value is None:
        return f"CAST(NULL AS {spark})"
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex()}'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return f"CAST(array({', '.join(sql_literal(v, 'string') for v in value)}) AS {spark})"
    text = value.isoformat(sep=" ") if hasattr(value, "isoformat") and hasattr(value, "hour") else str(value)
    return "CAST('{}' AS {})".format(text.replace("\\", "\\\\").replace("'", "\\'"), spark)
