"""The table schemas of one micro-batch, read from its records without parsing each one.

Every record of a table version carries the same schema text (``{"schema":<S>,"payload":...}``,
ADR 0024), so the batch's facts aggregate (``transforms.raw_facts``) collects only a 64-bit hash
of each record's key and value schema text (``schema_id``): a hash costs a fraction of a JSON
parse. The driver keeps the schemas it has parsed by that hash (:class:`SchemaBook`) and reads
the text of a hash it has not seen - once per table version for the whole run - from one record
of the cached batch.
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


def schema_text(text: Column) -> Column:
    """The ``schema`` of a schemas-enabled record as JSON text; null for a plain record or a null schema.

    Connect's ``JsonConverter`` (and the engine, ADR 0024) writes ``schema`` first, compactly, so
    it is the text between the head and the first ``,"payload":`` - no JSON field name inside a
    schema is ``payload`` (a column named so is a ``"field"`` value, preceded by ``:``)."""
    return F.when(text.startswith(_HEAD + "{"), F.substring_index(text, _PAYLOAD, 1).substr(len(_HEAD) + 1, 1 << 30))


def schema_id(key: Column, value: Column) -> Column:
    """A hash of a record's key and value schema texts; null when the value has no schema."""
    value_schema = schema_text(value)
    return F.when(value_schema.isNotNull(), F.xxhash64(F.coalesce(schema_text(key), F.lit("")), value_schema))


def _table(value: Column) -> Column:
    source = "$.payload.source."
    schema = F.coalesce(F.get_json_object(value, source + "schema"), F.get_json_object(value, source + "db"))
    return F.concat_ws(".", schema, F.get_json_object(value, source + "table"))


def schema_ids(raw: DataFrame) -> tuple[int, ...]:
    """The :func:`schema_id` values of a raw frame, in one aggregate (where no facts aggregate
    runs anyway: the transaction-consistent mode's ready records)."""
    row = raw.agg(F.collect_set(schema_id(F.col("key"), F.col("value"))).alias("ids")).first()
    return tuple(sorted(int(i) for i in (row["ids"] if row is not None else None) or ()))


class BatchSchemas(dict[str, list[TableSchema]]):
    """A batch's schemas: source table -> its versions, oldest first; and ``encodings``: by
    schema id (as ``after`` carries it, ``frames.SCHEMA_KEY``), the columns whose values decode
    by that version (``table_schemas.encodings``)."""

    def __init__(self) -> None:
        super().__init__()
        self.encodings: dict[str, dict[str, Encoding]] = {}


class SchemaBook:
    """The schemas the run has seen, by :func:`schema_id`; lives on the driver for the run."""

    def __init__(self) -> None:
        self._known: dict[int, TableSchema | None] = {}
        self._order: dict[int, int] = {}  # the offset a version was first seen at: its age

    def of_batch(self, raw: DataFrame, ids: Any) -> BatchSchemas:
        """The schemas behind ``ids`` (the batch's facts), by table, oldest version first."""
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
        found = (
            raw.where(F.col("value").isNotNull())
            .select(
                schema_id(F.col("key"), F.col("value")).alias("id"),
                "key",
                "value",
                "offset",
            )
            .where(F.col("id").isin(new))
            .groupBy("id")
            .agg(
                F.min("offset").alias("offset"),
                F.first(schema_text(F.col("key"))).alias("key_schema"),
                F.first(schema_text(F.col("value"))).alias("value_schema"),
                F.first(_table(F.col("value"))).alias("table"),
            )
            .collect()
        )
        for row in found:
            value = schema_texts(row["value_schema"])
            schema = table_schema(row["table"], schema_texts(row["key_schema"]), value) if value else None
            self._known[int(row["id"])] = schema
            self._order[int(row["id"])] = int(row["offset"])
            if schema is not None:
                log.info("schema of %s: %s", schema.table, ", ".join(c.name for c in schema.columns))
        for i in new:
            self._known.setdefault(i, None)
