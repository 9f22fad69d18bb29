"""The table schemas of the apply job's batches, read from the records without parsing each one.

Every record of a table version carries the same schema text (``{"schema":<S>,"payload":<P>}``,
ADR 0024): ten times the payload for a narrow table. So the job cuts each record once, as it
reads the source into its cache (:func:`stripped`): the cache holds the payloads and a 64-bit
hash of the key's and value's schema texts (:func:`schema_id`), and the schema texts only of
records whose hash the job has not learned yet. Caching the whole records cost the read, the
parse and a second pass to find the new schemas: the job ran at a tenth of its schemaless rate.

The driver keeps what it learned (:class:`SchemaBook`): by hash, the table schema, parsed once
from one record; and stores it beside Spark's checkpoint (``<checkpoint>/cdc_schemas``), so a
run knows the schemas of the runs before it and caches no schema text at all until a table
changes.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from airflow_cdc.spark.table_schemas import Encoding, TableSchema, encodings, schema_texts, table_schema

log = logging.getLogger(__name__)

_HEAD = '{"schema":'
_PAYLOAD = ',"payload":'
#: The cached batch's column of each record's schema id (``stripped``).
SCHEMA_COLUMN = "_schema"
_KEY_SCHEMA, _VALUE_SCHEMA = "_key_schema", "_value_schema"
_STORED = "id long, offset long, table string, key_schema string, value_schema string"


def _halves(text: Column) -> Column:
    """``[{"schema":<S>, <P>}]``: a record cut at its first ``,"payload":``.

    Connect's ``JsonConverter`` (and the engine, ADR 0024) writes ``{"schema":<S>,"payload":<P>}``
    compactly, schema first, and no object key inside a schema is ``payload`` (a JSON string
    cannot hold the unescaped quotes), so the first ``,"payload":`` ends the schema. Cut by
    ``split`` (a Java regex search): Spark's ``locate``, ``substring_index`` and ``length``
    count characters from the start, and on 7 KB schemas they cost 15 times the cut."""
    return F.split(text, _PAYLOAD, 2)


def payload_of(text: Column, halves: Column | None = None) -> Column:
    """The payload of a schemas-enabled JSON converter record, or the record itself (``halves``:
    the record's :func:`_halves`, when a projection before computed them). A record written with
    spaces (another producer's) is parsed."""
    halves = _halves(text) if halves is None else halves
    enveloped = text.startswith('{"schema"')
    rest = halves[1]
    return (
        F.when(enveloped & (F.size(halves) == 2), rest.substr(F.lit(1), F.length(rest) - 1))  # the brace off
        .when(enveloped, F.get_json_object(text, "$.payload"))
        .otherwise(text)
    )


def _schema_half(text: Column, halves: Column | None = None) -> Column:
    """``{"schema":<S>`` of a record with a schema (null for a plain record, a null schema)."""
    return F.when(text.startswith(_HEAD + "{"), (_halves(text) if halves is None else halves)[0])


def schema_text(text: Column, halves: Column | None = None) -> Column:
    """The ``schema`` of a schemas-enabled record as JSON text; null for a plain record or a null schema."""
    return _schema_half(text, halves).substr(len(_HEAD) + 1, 1 << 30)


def schema_id(key: Column, value: Column, key_halves: Column | None = None, halves: Column | None = None) -> Column:
    """A hash of a record's key and value schema texts; null when the value has no schema."""
    value_schema = _schema_half(value, halves)
    key_schema = F.coalesce(_schema_half(key, key_halves), F.lit(""))
    return F.when(value_schema.isNotNull(), F.xxhash64(key_schema, value_schema))


def stripped(raw: DataFrame, known: list[int]) -> DataFrame:
    """The raw frame as the job caches it: ``partition``, ``offset``, the key's and value's
    payloads, :data:`SCHEMA_COLUMN`, and the schema texts of the records whose id is not in
    ``known`` (null for the others and for records without schemas).

    Two projections: each record is cut once (``_halves``); in one, Spark would cut it for
    every expression that uses a half inside a ``CASE`` branch (no common subexpression there)."""
    cut = raw.select(
        "partition", "offset", "key", "value", _halves(F.col("key")).alias("_kh"), _halves(F.col("value")).alias("_vh")
    )
    key, value, kh, vh = F.col("key"), F.col("value"), F.col("_kh"), F.col("_vh")
    ident = schema_id(key, value, kh, vh)
    unknown = ident.isNotNull() if not known else ident.isNotNull() & ~ident.isin(known)
    return cut.select(
        "partition",
        "offset",
        payload_of(key, kh).alias("key"),
        payload_of(value, vh).alias("value"),
        ident.alias(SCHEMA_COLUMN),
        F.when(unknown, schema_text(key, kh)).alias(_KEY_SCHEMA),
        F.when(unknown, schema_text(value, vh)).alias(_VALUE_SCHEMA),
    )


def schema_ids(raw: DataFrame) -> tuple[int, ...]:
    """The :func:`schema_id` values of a raw frame, in one aggregate (where no facts aggregate
    runs anyway: the transaction-consistent mode's ready records)."""
    row = raw.agg(F.collect_set(schema_id(F.col("key"), F.col("value"))).alias("ids")).first()
    return tuple(sorted(int(i) for i in (row["ids"] if row is not None else None) or ()))


def _table(value: Column, prefix: str) -> Column:
    schema = F.coalesce(F.get_json_object(value, prefix + "schema"), F.get_json_object(value, prefix + "db"))
    return F.concat_ws(".", schema, F.get_json_object(value, prefix + "table"))


class BatchSchemas(dict[str, list[TableSchema]]):
    """A batch's schemas: source table -> its versions, oldest first; and ``encodings``: by
    schema id (as ``after`` carries it, ``frames.SCHEMA_KEY``), the columns whose values decode
    by that version (``table_schemas.encodings``)."""

    def __init__(self) -> None:
        super().__init__()
        self.encodings: dict[str, dict[str, Encoding]] = {}


class SchemaBook:
    """The schemas the job has seen, by :func:`schema_id`; on the driver, kept in ``store``
    (a directory Spark can write: beside the checkpoint) across runs."""

    def __init__(self, store: str | None = None) -> None:
        self.store = store
        self._known: dict[int, TableSchema | None] = {}
        self._order: dict[int, int] = {}  # the offset a version was first seen at: its age
        self._loaded = store is None

    def known(self, spark: Any) -> list[int]:
        """The ids learned so far, this run's and the stored ones."""
        if not self._loaded:
            self._loaded = True
            self._load(spark)
        return sorted(i for i, schema in self._known.items() if schema is not None)

    def of_batch(self, raw: DataFrame, ids: Any) -> BatchSchemas:
        """The schemas behind ``ids`` (the batch's facts), by table, oldest version first."""
        self.known(raw.sparkSession)
        ids = sorted(int(i) for i in ids)
        new = [i for i in ids if i not in self._known]
        if new:
            self._learn(raw, new)
        out = BatchSchemas()
        for i in sorted(ids, key=lambda i: self._order.get(i, 0)):
            schema = self._known.get(i)
            if schema is not None:
                out.setdefault(schema.table, []).append(schema)
                encoded = encodings(schema)
                if encoded:
                    out.encodings[str(i)] = encoded
        return out

    def _learn(self, raw: DataFrame, new: list[int]) -> None:
        if SCHEMA_COLUMN in raw.columns:  # ``stripped``: payloads, and the new ids' schema texts
            found = raw.where(F.col(SCHEMA_COLUMN).isin(new) & F.col(_VALUE_SCHEMA).isNotNull()).select(
                F.col(SCHEMA_COLUMN).alias("id"),
                "offset",
                F.col(_KEY_SCHEMA).alias("key_schema"),
                F.col(_VALUE_SCHEMA).alias("value_schema"),
                _table(F.col("value"), "$.source.").alias("table"),
            )
        else:
            key, value = F.col("key"), F.col("value")
            found = (
                raw.where(value.isNotNull())
                .select(
                    schema_id(key, value).alias("id"),
                    "offset",
                    schema_text(key).alias("key_schema"),
                    schema_text(value).alias("value_schema"),
                    _table(value, "$.payload.source.").alias("table"),
                )
                .where(F.col("id").isin(new))
            )
        rows = (
            found.groupBy("id")
            .agg(
                F.min("offset").alias("offset"),
                F.first("table").alias("table"),
                F.first("key_schema").alias("key_schema"),
                F.first("value_schema").alias("value_schema"),
            )
            .collect()
        )
        learned = [self._remember(r["id"], r["offset"], r["table"], r["key_schema"], r["value_schema"]) for r in rows]
        for i in new:
            self._known.setdefault(i, None)
        if self.store is not None and any(learned):
            stored = [(r["id"], r["offset"], r["table"], r["key_schema"], r["value_schema"]) for r in rows]
            raw.sparkSession.createDataFrame(stored, _STORED).coalesce(1).write.mode("append").json(self.store)

    def _remember(self, ident: int, offset: int, table: str, key_text: str | None, value_text: str | None) -> bool:
        value = schema_texts(value_text)
        schema = table_schema(table, schema_texts(key_text), value) if value else None
        self._known[int(ident)] = schema
        self._order[int(ident)] = int(offset)
        if schema is not None:
            log.info("schema of %s: %s", schema.table, ", ".join(c.name for c in schema.columns))
        return schema is not None

    def _load(self, spark: Any) -> None:
        try:
            rows = spark.read.schema(_STORED).json(self.store).collect()
        except Exception as exc:  # AnalysisException: nothing stored yet (the first run)
            if "PATH_NOT_FOUND" not in str(exc) and "does not exist" not in str(exc):
                raise
            return
        for r in rows:
            self._remember(r["id"], r["offset"], r["table"], r["key_schema"], r["value_schema"])
