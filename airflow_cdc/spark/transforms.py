"""Pure DataFrame → DataFrame steps from raw Debezium records to the latest change per key.

``flatten`` parses the envelope (ours and Debezium's are the same, the compatibility oracle
checks it), ``latest_changes`` keeps the last change per key of a micro-batch. Nothing here
reads or writes anything; the job (``apply.py``) wires a source, these steps and a target.

Source order. Per key, Kafka's partition order is the order the capturing side emitted, and the
source position orders the same changes across re-sends: Debezium's ``source.sequence``
(``[last commit LSN, change LSN]``, commit order first) for PostgreSQL, binlog file index,
position and row for MySQL. Initial-snapshot rows (``r`` with ``source.snapshot`` other than
``incremental``) get the lowest position: a transaction in flight when the slot's snapshot was
exported can stream changes with LSNs below the snapshot's own, and those must still win. An
incremental snapshot's rows carry the stream position at their window's close
(DBLog: nothing else changed the key inside the window), so they order with the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from airflow_cdc.spark.frames import SCHEMA_KEY, UNAVAILABLE_PLACEHOLDER
from airflow_cdc.spark.schema_batches import SCHEMA_COLUMN, payload_of, schema_id

#: What the job reads of an envelope. Not ``before``: the record key names the row and ``after``
#: is its new state, and skipping it spares the JSON parse a map per delete (per update, too,
#: under REPLICA IDENTITY FULL or MySQL's full row image).
_ENVELOPE = (
    "after map<string,string>, op string, "
    "source struct<db: string, schema: string, table: string, snapshot: string, lsn: long, sequence: string, "
    "file: string, pos: long, row: long>"
)
#: ``source.snapshot`` values of an initial (or blocking) snapshot's rows.
_INITIAL_SNAPSHOT = ("true", "first", "first_in_data_collection", "last_in_data_collection", "last")
_ZERO = "0" * 32
#: Debezium's PostgreSQL ``source.sequence``: a JSON array of two LSNs as strings, or nulls.
_SEQUENCE = r'^\[\s*(?:null|"(\d*)")\s*,\s*(?:null|"(\d*)")\s*\]$'
_APPLIED_OPS = ("c", "u", "d", "r", "t")


def _hex(value: Column, width: int) -> Column:
    return F.lpad(F.lower(F.hex(F.coalesce(value, F.lit(0)).cast("long"))), width, "0")


def source_position(source: Column, op: Column) -> Column:
    """A fixed-width string whose order is source order (module docstring)."""
    # ``sequence`` is ``["<last commit LSN>","<LSN>"]``, either may be null: read by a regular
    # expression, not a second JSON parse per record (half the CPU of that step). try_cast: a
    # null element reads as "", which ANSI mode would refuse to cast.
    commit = F.regexp_extract(source["sequence"], _SEQUENCE, 1).try_cast("long")
    change = F.regexp_extract(source["sequence"], _SEQUENCE, 2).try_cast("long")
    postgres = F.concat(_hex(commit, 16), _hex(F.coalesce(change, source["lsn"]), 16))
    # try_cast: under ANSI mode a file name without a numeric suffix ("" when nothing matched)
    # must order as index 0, not fail the batch.
    binlog_index = F.regexp_extract(source["file"], r"\.(\d+)$", 1).try_cast("long")
    mysql = F.concat(_hex(binlog_index, 8), _hex(source["pos"], 16), _hex(source["row"], 8))
    initial = (op == "r") & source["snapshot"].isin(*_INITIAL_SNAPSHOT)
    return (
        F.when(initial, F.lit(_ZERO))
        .when(source["file"].isNotNull(), mysql)
        .when(source["sequence"].isNotNull() | source["lsn"].isNotNull(), postgres)
        .otherwise(F.lit(_ZERO))
    )


def flatten(raw: DataFrame) -> DataFrame:
    """Raw records → one row per change: table, op, key, after, position, partition, offset.

    Tombstones, heartbeats and ``op=m`` messages carry no row change and are dropped.
    """
    return row_changes(parse(raw))


def parse(raw: DataFrame) -> DataFrame:
    """Raw records → ``flatten``'s columns, one row per record (``op`` null for a tombstone).

    The job caches this frame: the steps after it read the batch's changes several times (the
    truncate cut, the keys with unchanged TOASTed values, the last change per key), and each read
    of the raw frame would parse every record's JSON again. Parsing is most of a batch's CPU.
    """
    if SCHEMA_COLUMN in raw.columns:  # ``schema_batches.stripped``: payloads, the schema id beside
        parsed = raw.select(
            "partition",
            "offset",
            "key",
            F.from_json(F.col("value"), _ENVELOPE).alias("e"),
            F.col(SCHEMA_COLUMN).alias("_schema"),
        )
    else:
        parsed = raw.select(
            "partition",
            "offset",
            payload_of(F.col("key")).alias("key"),
            F.from_json(payload_of(F.col("value")), _ENVELOPE).alias("e"),
            schema_id(F.col("key"), F.col("value")).alias("_schema"),
        )
    source = F.col("e.source")
    after = F.col("e.after")
    versioned = F.map_concat(after, F.create_map(F.lit(SCHEMA_KEY), F.col("_schema").cast("string")))
    return parsed.select(
        F.concat_ws(".", F.coalesce(source["schema"], source["db"]), source["table"]).alias("table"),
        F.col("e.op").alias("op"),
        F.when(F.col("e.op") != "t", F.col("key")).alias("key"),
        F.when(F.col("_schema").isNotNull() & after.isNotNull(), versioned).otherwise(after).alias("after"),
        source_position(source, F.col("e.op")).alias("position"),
        "partition",
        "offset",
    )


def row_changes(parsed: DataFrame) -> DataFrame:
    """``parse``'s rows that change the table (not tombstones, heartbeats, ``op=m``)."""
    return parsed.where(F.col("op").isin(*_APPLIED_OPS))


def _merge_unchanged(changes: Column) -> Column:
    """Fold a key's ordered changes: each column keeps its latest value that is not the
    unavailable placeholder (an unchanged TOASTed value); a delete forgets everything before it."""
    empty = F.create_map().cast("map<string,string>")

    def step(acc: Column, change: Column) -> Column:
        merged = F.transform_values(
            change["after"],
            lambda k, v: F.when(v == UNAVAILABLE_PLACEHOLDER, F.coalesce(acc[k], v)).otherwise(v),
        )
        return F.when(change["op"] == "d", empty).otherwise(merged)

    return F.aggregate(changes, empty, step)


def _by_order(left: Column, right: Column) -> Column:
    # A struct holding a map cannot be compared as a whole: compare the order fields only.
    return F.when(left["_order"] < right["_order"], -1).when(left["_order"] > right["_order"], 1).otherwise(0)


def latest_changes(changes: DataFrame) -> DataFrame:
    """The last change per (table, key) in source order, with TRUNCATE applied inside the batch.

    Output: the latest frame (``frames.py``). Changes of a table that precede its last TRUNCATE
    in the batch are dropped; the TRUNCATE row stays so the target empties the table first.
    """
    return _latest(changes).drop(_TRUNCATED)


#: ``_latest``'s extra column: the table has a TRUNCATE in this batch (``for_lanes``).
_TRUNCATED = "_truncated"


@dataclass(frozen=True)
class BatchFacts:
    """What one aggregate over a parsed batch tells the plan: its records, and whether any
    change is a TRUNCATE or holds an unchanged-TOAST placeholder (most batches have neither)."""

    records: int
    truncates: bool = True
    toasted: bool = True
    #: ``schema_batches.schema_id`` of the batch's records with Connect schemas (none without).
    schemas: tuple[int, ...] = ()


def batch_facts(parsed: DataFrame) -> BatchFacts:
    """``parse``'s frame → :class:`BatchFacts`, in one Spark job (the count the job needs anyway).

    Why: each branch of the general plan (the truncate cut, the keys whose TOAST values must be
    folded) is a broadcast or a shuffle, and Spark runs each as a job of its own - 16 jobs for a
    batch of 100 records, 2 s of the 4-5 s a small batch took on 2 cores. Knowing the batch has
    no TRUNCATE and no placeholder, :func:`laned_latest` leaves those branches out.
    """
    toasted = F.exists(F.map_values("after"), lambda v: v == UNAVAILABLE_PLACEHOLDER)
    row = parsed.agg(
        F.count(F.lit(1)).alias("records"),
        F.max(F.col("op") == "t").alias("truncates"),
        F.max(F.coalesce(toasted, F.lit(False))).alias("toasted"),
    ).first()
    if row is None or not row["records"]:
        return BatchFacts(0, False, False)
    return BatchFacts(int(row["records"]), bool(row["truncates"]), bool(row["toasted"]))


def raw_facts(raw: DataFrame) -> BatchFacts:
    """:func:`batch_facts` read from the raw frame itself, without parsing its JSON: the job
    caches the raw batch (the source is read once) and parses it once, for the latest frame
    (caching the parsed frame cost twice the CPU of parsing it: maps and structs are slow to
    put into Spark's columnar cache).

    Both flags may over-report, never under-report - an over-report only costs the general
    plan: ``truncates`` parses the ``op`` of the records whose text holds ``"t"`` (a TRUNCATE's
    must); ``toasted`` is any record whose text holds the placeholder."""
    value = F.col("value")
    op = F.coalesce(F.get_json_object(value, "$.op"), F.get_json_object(value, "$.payload.op"))
    # ``contains``, not ``instr``: instr counts characters to give a position, 5x the CPU.
    truncate = F.when(value.contains('"t"'), op == "t")
    row = raw.agg(
        F.count(F.lit(1)).alias("records"),
        F.max(F.coalesce(truncate, F.lit(False))).alias("truncates"),
        F.max(F.coalesce(value.contains(UNAVAILABLE_PLACEHOLDER), F.lit(False))).alias("toasted"),
        F.collect_set(F.col(SCHEMA_COLUMN) if SCHEMA_COLUMN in raw.columns else schema_id(F.col("key"), value)).alias(
            "schemas"
        ),
    ).first()
    if row is None or not row["records"]:
        return BatchFacts(0, False, False)
    schemas = tuple(sorted(int(i) for i in row["schemas"] or ()))
    return BatchFacts(int(row["records"]), bool(row["truncates"]), bool(row["toasted"]), schemas)


def _latest(changes: DataFrame, facts: BatchFacts | None = None) -> DataFrame:
    """``latest_changes`` with ``_truncated`` per row, known where the cut is made (no second
    pass over the batch to find the truncated tables). With ``facts`` saying the batch has no
    TRUNCATE and no TOAST placeholder, only the last change per key: one shuffle."""
    ordered = changes.withColumn("_order", F.struct("position", "partition", "offset"))
    if facts is not None and not facts.truncates and not facts.toasted:
        return _last_per_key(ordered.withColumn(_TRUNCATED, F.lit(False)))
    # A small per-table frame joined back (broadcast): a window over the table would put all of
    # a big table's changes into one task.
    cuts = ordered.where(F.col("op") == "t").groupBy("table").agg(F.max("_order").alias("_cut"))
    kept = (
        ordered.join(F.broadcast(cuts), "table", "left")
        .where(F.col("_cut").isNull() | (F.col("_order") >= F.col("_cut")))
        .withColumn(_TRUNCATED, F.col("_cut").isNotNull())
        .drop("_cut")
    )
    truncates = (
        kept.where(F.col("op") == "t")
        .groupBy("table")
        .agg(F.max("position").alias("position"))
        .select(
            "table",
            F.lit("t").alias("op"),
            F.lit(None).cast("string").alias("key"),
            F.lit(None).cast("map<string,string>").alias("after"),
            F.array().cast("array<string>").alias("unavailable"),
            "position",
            F.lit(True).alias(_TRUNCATED),
        )
    )
    changed = kept.where(F.col("op") != "t")
    # Most keys hold no unchanged-TOAST placeholder: their last change is all there is to keep,
    # a plain aggregate. Only the keys that do (few, usually none) fold their changes in order.
    toasted = changed.where(F.exists(F.map_values("after"), lambda v: v == UNAVAILABLE_PLACEHOLDER))
    toasted_keys = F.broadcast(toasted.select("table", "key").distinct())
    plain = _last_per_key(changed.join(toasted_keys, ["table", "key"], "left_anti"))
    return truncates.unionByName(plain).unionByName(_folded(changed.join(toasted_keys, ["table", "key"], "left_semi")))


def _last_per_key(changed: DataFrame) -> DataFrame:
    """The last change of each key (``_order``), for keys with no TOAST placeholder to fold."""
    return (
        # _truncated depends on the table alone: grouping by it too only carries it through.
        changed.groupBy("table", "key", _TRUNCATED)
        .agg(F.max_by(F.struct("op", "after", "position"), "_order").alias("last"))
        .select(
            "table",
            F.col("last.op").alias("op"),
            "key",
            F.when(F.col("last.op") != "d", F.col("last.after")).alias("after"),
            F.array().cast("array<string>").alias("unavailable"),
            F.col("last.position").alias("position"),
            _TRUNCATED,
        )
    )


def _folded(changed: DataFrame) -> DataFrame:
    """The last change per key with each unchanged-TOAST column taken from the key's latest
    earlier change in the batch; columns still unresolved are listed in ``unavailable``."""
    grouped = changed.groupBy("table", "key", _TRUNCATED).agg(
        F.array_sort(F.collect_list(F.struct("_order", "op", "after", "position")), _by_order).alias("changes")
    )
    last = F.element_at("changes", -1)
    merged = grouped.select(
        "table",
        last["op"].alias("op"),
        "key",
        F.when(last["op"] != "d", _merge_unchanged(F.col("changes"))).alias("after"),
        last["position"].alias("position"),
        _TRUNCATED,
    )
    return merged.select(
        "table",
        "op",
        "key",
        F.map_filter("after", lambda _, v: v.isNull() | (v != UNAVAILABLE_PLACEHOLDER)).alias("after"),
        F.coalesce(
            F.map_keys(F.map_filter("after", lambda _, v: v == UNAVAILABLE_PLACEHOLDER)),
            F.array().cast("array<string>"),
        ).alias("unavailable"),
        "position",
        _TRUNCATED,
    )


def lane_of(tables: Column, groups: dict[str, str]) -> Column:
    """The lane a table applies in: its configured group's name, else the table itself.

    Tables in one lane apply one after another, in source order; lanes run in parallel (seed
    002: related tables — a parent and its children — share a lane so their order holds).
    """
    lane = tables
    for table, group in groups.items():
        lane = F.when(tables == table, F.lit(group)).otherwise(lane)
    return lane


def laned_latest(
    changes: DataFrame, lanes: int, groups: dict[str, str] | None = None, facts: BatchFacts | None = None
) -> DataFrame:
    """``flatten``'s changes → the latest frame spread for the target (``for_lanes``): what the
    job writes. ``facts`` (:func:`batch_facts` of the batch) lets the plan leave out what the
    batch does not need.

    The common batch (no TRUNCATE, no TOAST placeholder, no lane groups) is spread by
    (table, key) *before* the last change per key is taken: the aggregate's grouping then needs
    no shuffle of its own, so the batch crosses the network once, not twice (``for_lanes``
    spreads by the same hash after the aggregate)."""
    if facts is not None and not facts.truncates and not facts.toasted and not groups:
        spread = changes.repartition(lanes, "table", "key")
        return _latest(spread, facts).drop(_TRUNCATED).sortWithinPartitions("table", "position")
    return for_lanes(_latest(changes, facts), lanes, groups)


def for_lanes(latest: DataFrame, lanes: int, groups: dict[str, str] | None = None) -> DataFrame:
    """Spread the latest frame over ``lanes`` Spark partitions (one write task, one target
    transaction each), sorted within each by lane, then source order, a TRUNCATE first.

    Keys are independent: the latest frame holds one change per key, and the target's position
    guard makes each change commute with every other key's. So a table's keys spread over all
    partitions by a hash of (table, key), and a one-table batch is written by ``lanes`` tasks.
    Two things stay whole, in one partition:

    - a lane group (seed 002: a parent and its children), whose tables apply in source order;
    - a table with a TRUNCATE in this batch. The guarded truncate (delete what is older than its
      position) would commute too, but in its own transaction it locks every older row of the
      table while the other partitions' upserts lock their keys' rows: two transactions waiting on
      each other (PostgreSQL aborts one, the batch fails). In one partition, it runs first, then
      the table's changes, in one transaction, as before; such batches are rare.
    """
    groups = groups or {}
    if _TRUNCATED not in latest.columns:  # a plain latest frame: find its truncated tables
        truncated = latest.where(F.col("op") == "t").select("table").distinct().withColumn(_TRUNCATED, F.lit(True))
        latest = latest.join(F.broadcast(truncated), "table", "left")
    lane = lane_of(F.col("table"), groups)
    whole = F.coalesce(F.col(_TRUNCATED), F.lit(False))
    if groups:
        whole = whole | F.col("table").isin(*groups)
    spread = F.when(whole, lane).otherwise(F.concat_ws("\u0000", F.col("table"), F.col("key")))
    return (
        latest.withColumn("_lane", lane)
        .repartition(lanes, spread)
        .sortWithinPartitions("_lane", "position", (F.col("op") != "t"))
        .drop("_lane", _TRUNCATED)
    )
