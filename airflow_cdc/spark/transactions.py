"""The apply job's transaction-consistent mode (``consistency="transaction"``, ADR 0023).

Debezium's transaction metadata (``provide.transaction.metadata=true``) gives every change event
a ``transaction`` block (``id``, ``total_order``, ``data_collection_order``) and writes a BEGIN and
an END record per source transaction to ``<topic.prefix>.transaction``; the END counts the
transaction's events per table (``data_collections``). Per micro-batch:

1. the batch's raw records and the ones held back by earlier batches (the target keeps them,
   ``targets/sql/pending.py``) form one frame (a record there twice counts once: distinct
   events, held once per topic-partition-offset);
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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.spark.frames import RAW_SCHEMA
from airflow_cdc.spark.transaction_order import STALL_BATCHES, Plan, Waiting, plan, stalled, tail, track

#: Debezium's transaction topic, ``<topic.prefix>.transaction`` (``topic.transaction``'s default).
TRANSACTION_SUFFIX = "transaction"
#: Both kinds of record parsed at once: an END (``status``, ``id``, ``data_collections``) and a
#: change event (``op``, ``transaction``); a record fills the fields of its kind.
_RECORD = (
    "status string, id string, data_collections array<struct<data_collection: string, event_count: long>>, "
    "op string, transaction struct<id: string, total_order: long>"
)
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


@dataclass(frozen=True)
class Tables:
    """Which END ``data_collections`` this job reads (only those count towards completeness)."""

    tx_topic: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def counts(self, data_collection: str) -> bool:
        if self.topics:
            return tail(data_collection) in {tail(t) for t in self.topics if t != self.tx_topic}
        prefix = self.tx_topic.removesuffix("." + TRANSACTION_SUFFIX)
        return bool(self.pattern and re.fullmatch(self.pattern, f"{prefix}.{tail(data_collection)}"))


def _transaction_key(txid: Any) -> Any:
    """What identifies a source transaction across its events and its END. Debezium's PostgreSQL
    connector writes ``<xid>:<LSN>`` with the LSN of the record at hand (3.7: each event its own,
    the END its commit's), so there the xid alone; other ids (MySQL GTIDs, ...) as they are."""
    return F.when(txid.rlike(r"^[0-9]+:[0-9]+$"), F.split(txid, ":")[0]).otherwise(txid)


def _unwrap(text: Any) -> Any:
    return F.when(text.startswith('{"schema"'), F.get_json_object(text, "$.payload")).otherwise(text)


RAW_SCHEMA_COLUMNS = tuple(part.split()[0] for part in RAW_SCHEMA.split(","))


def tag(raw: DataFrame, tables: Tables) -> DataFrame:
    """``raw`` with what the split needs of each record, its JSON parsed once: ``_txid`` (the
    source transaction of an END or a change event), ``_end``, ``_order`` (an event's distinct
    number), ``_collections`` (an END's counts), ``_untagged`` (a streamed change without a
    transaction block). The caller caches it: the aggregate, the ready filter and the held
    records all read it."""
    is_tx = F.col("topic") == tables.tx_topic
    e = F.col("_e")
    is_end = F.coalesce(is_tx & (e["status"] == "END"), F.lit(False))
    txid = F.when(is_tx, F.when(is_end, e["id"])).otherwise(e["transaction"]["id"])
    return raw.withColumn("_e", F.from_json(_unwrap(F.col("value")), _RECORD)).select(
        *RAW_SCHEMA_COLUMNS,
        _transaction_key(txid).alias("_txid"),
        is_end.alias("_end"),
        F.when(~is_tx, F.coalesce(e["transaction"]["total_order"], F.col("offset"))).alias("_order"),
        F.when(is_end, e["data_collections"]).alias("_collections"),
        F.coalesce(~is_tx & e["op"].isin(*_STREAMED_OPS) & e["transaction"]["id"].isNull(), F.lit(False)).alias(
            "_untagged"
        ),
    )


def _records_frame(spark: Any, records: list[tuple[Any, ...]]) -> DataFrame:
    """Held records back into Spark as an Arrow table (pyspark[sql] brings pyarrow): the JVM reads
    it whole, where a list of tuples becomes a Python RDD that a Python worker unpickles in the
    job that reads it - about twice as slow for the ten thousand records a batch may hold."""
    import pyarrow as pa  # type: ignore[import-untyped]

    columns = list(zip(*records, strict=True))
    types = (pa.string(), pa.int32(), pa.int64(), pa.string(), pa.string())
    names = RAW_SCHEMA_COLUMNS
    table = pa.table({n: pa.array(c, t) for n, c, t in zip(names, columns, types, strict=True)})
    frame: DataFrame = spark.createDataFrame(table)
    return frame


def _among(txids: set[str]) -> Any:
    """``_txid IN (...)`` as one SQL expression: Spark makes it a hash-set lookup (InSet), and it
    crosses to the JVM in one call - ``Column.isin(*ids)`` makes a call per id, seconds for the
    thousands of transactions of a batch."""
    quoted = ",".join("'" + t.replace("\\", "\\\\").replace("'", "\\'") + "'" for t in sorted(txids))
    return F.expr(f"_txid IN ({quoted})")


@dataclass
class Split:
    """One batch split at the first incomplete transaction: ``ready`` (raw frame to apply),
    ``held`` (raw records to keep for a later batch) and the driver's :class:`Plan`."""

    ready: DataFrame
    held: list[tuple[Any, ...]]
    plan: Plan


def split(tagged: DataFrame, tables: Tables) -> Split:
    """``tagged`` (:func:`tag` of the batch with the held records, cached) → what
    applies now and what waits (module docstring). Spark jobs: one aggregate, whose rows (one per
    transaction and table) the driver decides on (``transaction_order.plan``), and the collect of
    the held records when there are any; the ready frame is a filter the apply's jobs run."""
    rows = (
        tagged.groupBy(F.col("_txid").alias("txid"), "topic")
        .agg(
            # A set, not count_distinct: no Expand of the other aggregates (one pass).
            F.size(F.collect_set("_order")).alias("seen"),
            F.max(F.when(F.col("_end"), F.struct("partition", "offset"))).alias("end_at"),
            F.first("_collections", ignorenulls=True).alias("collections"),
            F.min(F.when(F.col("_untagged"), F.col("offset"))).alias("untagged"),
        )
        .collect()
    )
    decided = plan(rows, tables.tx_topic, tables.counts)
    is_tx = F.col("topic") == tables.tx_topic
    held: list[tuple[Any, ...]] = []
    if not decided.held:
        return Split(tagged.where(~is_tx).select(*RAW_SCHEMA_COLUMNS), held, decided)
    waiting = _among(decided.held)
    ready = ~is_tx & (F.col("_txid").isNull() | ~waiting)
    # An END waits with its transaction; one counting none of this job's tables waits for nothing.
    ends = _among(decided.held_ends) if decided.held_ends else F.lit(False)
    records = tagged.where((~is_tx & waiting) | (F.col("_end") & ends)).select(*RAW_SCHEMA_COLUMNS).collect()
    held = list({tuple(r[:3]): tuple(r) for r in records}.values())  # once per topic-partition-offset
    return Split(tagged.where(ready).select(*RAW_SCHEMA_COLUMNS), held, decided)


def query_id(spark: Any, checkpoint: str) -> str:
    """Spark's id of the streaming query, from its checkpoint's ``metadata`` (written at the
    query's first start, kept by every restart from the same checkpoint): names the job's rows in
    the target's state tables. Read through Spark so that any checkpoint file system works."""
    import json

    line = spark.read.text(checkpoint.rstrip("/") + "/metadata").first()[0]
    return str(json.loads(line)["id"])


@dataclass
class Stored:
    """What the target keeps for a streaming query: the last batch applied (None: none yet), the
    held records, and the stall count (``transaction_order.Waiting``)."""

    last_batch: int | None
    held: list[tuple[Any, ...]]
    waiting: Waiting | None = None


class ConsistentTarget(Protocol):
    """A target that applies a batch and keeps its held records atomically
    (``targets/sql_consistent.py``); ``latest`` None: nothing applies, the state changes."""

    def load(self, query_id: str) -> Stored: ...

    def apply_batch(
        self,
        latest: DataFrame | None,
        batch_id: int,
        held: list[tuple[Any, ...]],
        query_id: str,
        waiting: Waiting | None,
    ) -> Any: ...

    def report_orphans(self, query_id: str) -> None: ...


def transaction_writer(job: Any, totals: Any, tables: Tables, target: ConsistentTarget) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function of the mode. Phases (``totals.phases``): ``split`` (the
    source, the transactions' aggregate, the held records), ``read`` (the ready changes' JSON
    parse and count), ``write`` (the last change per key and the target)."""
    from airflow_cdc.spark.schema_batches import SchemaBook, schema_ids
    from airflow_cdc.spark.transforms import batch_facts, laned_latest, parse, row_changes

    state: dict[str, Any] = {}
    book = SchemaBook()
    bound = int(getattr(job, "transaction_stall_batches", None) or STALL_BATCHES)

    def stop_if_stalled(waiting: Waiting | None) -> None:
        if waiting is not None and waiting.batches >= bound:
            raise stalled(waiting, tables.tx_topic, int(time.time() * 1000))

    def write(batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        spark = batch.sparkSession
        if "query" not in state:
            state["query"] = query_id(spark, job.checkpoint)
            target.report_orphans(state["query"])
        stored = target.load(state["query"])
        if stored.last_batch is not None and batch_id <= stored.last_batch:
            print(f"skipped batch {batch_id}: the target applied it already", file=sys.stderr, flush=True)
            totals.batches += 1
            stop_if_stalled(stored.waiting)  # a rerun that only replays the batch the stop left
            return
        raw = batch.select(*RAW_SCHEMA_COLUMNS)
        if stored.held:
            # No dropDuplicates (a shuffle of the whole batch): the held records are from earlier
            # batches, so a batch holds none of them; and were one there twice, its events count
            # distinct, its change applies twice the same, the held list is keyed (``split``).
            raw = raw.unionByName(_records_frame(spark, stored.held))
        tagged = tag(raw, tables).persist()
        try:
            cut = split(tagged, tables)
            waiting = track(stored.waiting, cut.plan, batch_id, int(time.time() * 1000))
            took = [totals.timed("split", started)]
            started = time.perf_counter()
            records = 0
            if cut.plan.ready_events:
                prepare = getattr(target, "prepare", None)
                if prepare is not None:  # the tables and columns the ready changes need
                    prepare(book.of_batch(cut.ready, schema_ids(cut.ready)))
                parsed = parse(cut.ready).persist()
                try:
                    facts = batch_facts(parsed)  # the count, and which branches the plan needs
                    records = facts.records
                    took.append(totals.timed("read", started))
                    started = time.perf_counter()
                    latest = laned_latest(row_changes(parsed), 1, job.lane_groups, facts)
                    totals.add(target.apply_batch(latest, batch_id, cut.held, state["query"], waiting))
                finally:
                    parsed.unpersist()
            else:  # everything waits: only the held records and the batch id change
                took.append(totals.timed("read", started))
                started = time.perf_counter()
                totals.add(target.apply_batch(None, batch_id, cut.held, state["query"], waiting))
            took.append(totals.timed("write", started))
        finally:
            tagged.unpersist()
        totals.batches += 1
        totals.records += records
        phases = ", ".join(f"{name} {s:.2f} s" for name, s in zip(("split", "read", "write"), took, strict=True))
        print(
            f"applied batch {batch_id}: {records} records, {len(cut.held)} held back ({phases})",
            file=sys.stderr,
            flush=True,
        )
        # After the apply: what could apply did, and the waiting count is kept for the next run.
        stop_if_stalled(waiting)

    return write


def with_transaction_topic(job: Any) -> Any:
    """The job's source with the transaction topic added to its subscription."""
    from dataclasses import replace

    source = job.source
    tx_topic = transaction_topic(source.topics or (), job.transaction_topic)
    if source.topics and source.kind != "kafka":  # the changelog: a topic not written yet is an empty stream
        return source if tx_topic in source.topics else replace(source, topics=(*source.topics, tx_topic))
    if source.topics:
        # By pattern, not by name: the transaction topic exists only from the first streamed
        # transaction on (a snapshot's rows have none), and a subscription by name to a topic
        # the broker lacks fails the query (UnknownTopicOrPartitionException).
        names = [t for t in source.topics if t != tx_topic]
        return replace(source, topics=(), topic_pattern="|".join(re.escape(t) for t in (*names, tx_topic)))
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

        target = ConsistentSqlTarget(job.target_url, job.table_map, job.target_settings, tables.tx_topic)
    else:
        from airflow_cdc.spark.targets.lake_consistent import ConsistentLakeTarget

        target = ConsistentLakeTarget(job.target_url, job.table_map, job.target_settings, tables.tx_topic)
    return transaction_writer(job, totals, tables, target)
