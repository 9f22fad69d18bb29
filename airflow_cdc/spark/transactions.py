"""The apply job's transaction-consistent mode (``consistency="transaction"``, ADR 0023).

Debezium's transaction metadata (``provide.transaction.metadata=true``) gives every change event
a ``transaction`` block (``id``, ``total_order``, ``data_collection_order``) and writes a BEGIN and
an END record per source transaction to ``<topic.prefix>.transaction``; the END counts the
transaction's events per table (``data_collections``). Per micro-batch:

1. the batch's raw records and the ones held back by earlier batches (the target keeps them,
   ``targets/sql/pending.py``) form one frame, deduplicated by topic-partition-offset;
2. a transaction is *complete* when its END is known and every event it counted for the tables
   this job reads has been seen (distinct ``total_order``: a re-sent event counts once);
3. transactions apply in commit order, which is the order of their ENDs on the transaction topic:
   the complete ones before the first incomplete one are *ready*; events of ready transactions
   and events without a transaction (snapshot reads) are applied, everything else is held back;
4. the target applies the ready changes of every table, replaces its held records and records the
   batch id, all in one database transaction: a reader sees a source transaction whole or not at
   all, and the target only ever shows a state the source had (a prefix of its commits).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.spark.frames import RAW_SCHEMA

#: Debezium's transaction topic, ``<topic.prefix>.transaction`` (``topic.transaction``'s default).
TRANSACTION_SUFFIX = "transaction"
_END = (
    "status string, id string, event_count long, "
    "data_collections array<struct<data_collection: string, event_count: long>>"
)
_EVENT = "op string, transaction struct<id: string, total_order: long>"
_END_AT = ("end_partition", "end_offset")
#: Changes that Debezium's connectors give a ``transaction`` block once the metadata is on.
_STREAMED_OPS = ("c", "u", "d")


def transaction_topic(topics: Sequence[str], given: str | None) -> str:
    """The transaction topic: ``given``, else ``<prefix>.transaction`` for the first topic's
    prefix (a table topic is ``<prefix>.<schema or db>.<table>``)."""
    if given:
        return given
    if not topics or topics[0].count(".") < 2:
        raise ConfigError(
            [
                ConfigProblem(
                    "transaction_topic",
                    "cannot tell the transaction topic from the topics",
                    "give transaction_topic (Debezium's <topic.prefix>.transaction)",
                )
            ]
        )
    return topics[0].rsplit(".", 2)[0] + "." + TRANSACTION_SUFFIX


def _tail(name: str) -> str:
    """A table's ``schema.table`` / ``db.table``: the last two parts of a topic or of an END's
    ``data_collection`` (``db.schema.table`` or ``schema.table`` for PostgreSQL)."""
    return ".".join(name.split(".")[-2:])


@dataclass(frozen=True)
class Tables:
    """Which END ``data_collections`` this job reads (only those count towards completeness)."""

    tx_topic: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def counts(self, data_collection: str) -> bool:
        if self.topics:
            return _tail(data_collection) in {_tail(t) for t in self.topics if t != self.tx_topic}
        prefix = self.tx_topic.removesuffix("." + TRANSACTION_SUFFIX)
        return bool(self.pattern and re.fullmatch(self.pattern, f"{prefix}.{_tail(data_collection)}"))


def _transaction_key(txid: Any) -> Any:
    """What identifies a source transaction across its events and its END. Debezium's PostgreSQL
    connector writes ``<xid>:<LSN>`` with the LSN of the record at hand (3.7: each event its own,
    the END its commit's), so there the xid alone; other ids (MySQL GTIDs, ...) as they are."""
    return F.when(txid.rlike(r"^[0-9]+:[0-9]+$"), F.split(txid, ":")[0]).otherwise(txid)


def _unwrap(text: Any) -> Any:
    return F.when(text.startswith('{"schema"'), F.get_json_object(text, "$.payload")).otherwise(text)


@dataclass
class Split:
    """One batch split at the last complete transaction: ``ready`` (raw frame to apply) and
    ``held`` (raw records to keep for a later batch)."""

    ready: DataFrame
    held: list[tuple[Any, ...]]


def split(raw: DataFrame, tables: Tables) -> Split:
    """``raw`` (the batch with the held records, deduplicated, cached) → what applies now and
    what waits (module docstring). Raises ``ConfigError`` naming ``provide.transaction.metadata``
    when a streamed change carries no ``transaction`` block."""
    is_tx = F.col("topic") == tables.tx_topic
    ends = (
        raw.where(is_tx)
        .select("partition", "offset", F.from_json(_unwrap(F.col("value")), _END).alias("e"))
        .where(F.col("e.status") == "END")
    )
    names = [r[0] for r in ends.select(F.explode("e.data_collections.data_collection")).distinct().collect()]
    counted = [name for name in names if name is not None and tables.counts(name)]
    expected = ends.select(
        _transaction_key(F.col("e.id")).alias("txid"),
        F.col("partition").alias("end_partition"),
        F.col("offset").alias("end_offset"),
        F.aggregate(
            F.filter(
                "e.data_collections", lambda dc: dc["data_collection"].isin(*counted) if counted else F.lit(False)
            ),
            F.lit(0).cast("long"),
            lambda acc, dc: acc + F.coalesce(dc["event_count"], F.lit(0)).cast("long"),
        ).alias("expected"),
    )
    events = raw.where(~is_tx).select(
        "topic", "partition", "offset", F.from_json(_unwrap(F.col("value")), _EVENT).alias("e")
    )
    untagged = events.where(F.col("e.op").isin(*_STREAMED_OPS) & F.col("e.transaction.id").isNull()).limit(1).collect()
    if untagged:
        raise ConfigError(
            [
                ConfigProblem(
                    "consistency",
                    f"a change on {untagged[0]['topic']} (offset {untagged[0]['offset']}) has no transaction block, so "
                    "its source transaction cannot be told",
                    "set provide.transaction.metadata=true on the capturing connector (and replay from its start), "
                    "or run the job with consistency=key",
                )
            ]
        )
    seen = (
        events.where(F.col("e.transaction.id").isNotNull())
        .groupBy(_transaction_key(F.col("e.transaction.id")).alias("txid"))
        .agg(F.count_distinct(F.coalesce(F.col("e.transaction.total_order"), F.col("offset"))).alias("seen"))
    )
    status = expected.join(seen, "txid", "left").withColumn(
        "complete", F.coalesce(F.col("seen"), F.lit(0)) >= F.col("expected")
    )
    cutoff = status.where(~F.col("complete")).orderBy("end_partition", "end_offset").select(*_END_AT).first()
    ready_ends = status.where(F.col("complete"))
    if cutoff is not None:  # commit order: the transaction topic's order (one partition)
        part, offset = F.col("end_partition"), F.col("end_offset")
        ready_ends = ready_ends.where((part < cutoff[0]) | ((part == cutoff[0]) & (offset < cutoff[1])))
    ready_ids = F.broadcast(ready_ends.select("txid").distinct())
    tagged = events.select("topic", "partition", "offset", _transaction_key(F.col("e.transaction.id")).alias("txid"))
    ready_events = tagged.join(ready_ids, "txid", "left_semi").unionByName(tagged.where(F.col("txid").isNull()))
    keys = ["topic", "partition", "offset"]
    ready_raw = raw.join(ready_events.select(*keys), keys, "left_semi")
    held_events = tagged.where(F.col("txid").isNotNull()).join(ready_ids, "txid", "left_anti").select(*keys)
    # An END waits with its transaction; one counting none of this job's tables waits for nothing.
    held_ends = (
        status.where(F.col("expected") > 0)
        .join(ready_ids, "txid", "left_anti")
        .select(F.lit(tables.tx_topic).alias("topic"), *(F.col(c).alias(c[4:]) for c in _END_AT))
    )
    held = raw.join(held_events.unionByName(held_ends), keys, "left_semi")
    return Split(ready_raw, [tuple(r) for r in held.select(*RAW_SCHEMA_COLUMNS).collect()])


RAW_SCHEMA_COLUMNS = tuple(part.split()[0] for part in RAW_SCHEMA.split(","))


def query_id(spark: Any, checkpoint: str) -> str:
    """Spark's id of the streaming query, from its checkpoint's ``metadata`` (written at the
    query's first start, kept by every restart from the same checkpoint): names the job's rows in
    the target's state tables. Read through Spark so that any checkpoint file system works."""
    import json

    line = spark.read.text(checkpoint.rstrip("/") + "/metadata").first()[0]
    return str(json.loads(line)["id"])


class ConsistentTarget(Protocol):
    """A target that applies a batch and keeps its held records atomically
    (``targets/sql_consistent.py``)."""

    def load(self, query_id: str) -> tuple[int | None, list[tuple[Any, ...]]]: ...

    def apply_batch(self, latest: DataFrame, batch_id: int, held: list[tuple[Any, ...]], query_id: str) -> Any: ...


def transaction_writer(job: Any, totals: Any, tables: Tables, target: ConsistentTarget) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function of the mode."""
    from airflow_cdc.spark.transforms import batch_facts, laned_latest, parse, row_changes

    state: dict[str, Any] = {}

    def write(batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        if "query" not in state:
            state["query"] = query_id(spark, job.checkpoint)
        last_batch, pending = target.load(state["query"])
        if last_batch is not None and batch_id <= last_batch:
            print(f"skipped batch {batch_id}: the target applied it already", file=sys.stderr, flush=True)
            totals.batches += 1
            return
        raw = batch.select(*RAW_SCHEMA_COLUMNS)
        if pending:
            raw = raw.unionByName(spark.createDataFrame(pending, RAW_SCHEMA))
        raw = raw.dropDuplicates(["topic", "partition", "offset"]).persist()
        try:
            cut = split(raw, tables)
            parsed = parse(cut.ready).persist()
            try:
                facts = batch_facts(parsed)  # the count, and which branches the plan needs
                records = facts.records
                latest = laned_latest(row_changes(parsed), 1, job.lane_groups, facts)
                totals.add(target.apply_batch(latest, batch_id, cut.held, state["query"]))
            finally:
                parsed.unpersist()
        finally:
            raw.unpersist()
        totals.batches += 1
        totals.records += records
        print(f"applied batch {batch_id}: {records} records, {len(cut.held)} held back", file=sys.stderr, flush=True)

    return write


def with_transaction_topic(job: Any) -> Any:
    """The job's source with the transaction topic added to its subscription."""
    from dataclasses import replace

    source = job.source
    tx_topic = transaction_topic(source.topics or (), job.transaction_topic)
    if source.topics:
        return source if tx_topic in source.topics else replace(source, topics=(*source.topics, tx_topic))
    return replace(source, topic_pattern=f"(?:{source.topic_pattern})|{re.escape(tx_topic)}")


def consistent_writer(job: Any, totals: Any) -> Callable[[Any, int], None]:
    """The mode's ``foreachBatch`` function for ``job``'s target: a SQL target applies a batch
    atomically, a lake target holds back incomplete transactions but commits table by table."""
    from airflow_cdc.spark.targets import SQL_SCHEMES, scheme_of

    source = job.source
    tables = Tables(transaction_topic(source.topics or (), job.transaction_topic), source.topics, source.topic_pattern)
    target: ConsistentTarget
    if scheme_of(job.target_url) in SQL_SCHEMES:
        from airflow_cdc.spark.targets.sql_consistent import ConsistentSqlTarget

        target = ConsistentSqlTarget(job.target_url, job.table_map, job.settings)
    else:
        from airflow_cdc.spark.targets.lake_consistent import ConsistentLakeTarget

        target = ConsistentLakeTarget(job.target_url, job.table_map, job.settings)
    return transaction_writer(job, totals, tables, target)
