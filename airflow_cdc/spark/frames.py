"""The frames the apply job passes between its steps, and the columns each one has.

A source yields the **raw** frame, the shape of Spark's own ``kafka`` source with key and value
cast to text: one row per record, ``value`` null for a tombstone. Every source (the native Kafka
source, the Python one on kafka-python, the engine's changelog directory) yields exactly this.

The transforms turn it into the **latest** frame: per micro-batch, one row per (table, key) with
the last change to that key, plus one row per table for a TRUNCATE:

- ``table``: the source's ``schema.table`` (PostgreSQL) or ``db.table`` (MySQL).
- ``op``: ``c``/``u``/``r`` (write the row), ``d`` (delete it), ``t`` (empty the table).
- ``key``: the record key as JSON text (``{"id":1}``); null for ``t``.
- ``after``: column → value as *JSON text*, the form ``from_json(..., 'map<string,string>')``
  gives: a JSON string without its quotes, a number or boolean as its JSON text, an object or
  array as JSON text, SQL NULL as null. Null for ``d`` and ``t``. Values are Debezium's encodings
  (epoch days for a date, base64 for bytes, ...): the target decodes them by its column types.
- ``unavailable``: columns still holding Debezium's unavailable-value placeholder (an unchanged
  TOASTed value) after merging the batch's earlier changes; the target keeps its current value.
- ``position``: the change's source position as a fixed-width string; string order is source
  order. A target stores it with the row (``_cdc_position``) and applies a change only when the
  stored position is null or not greater, so an older change never overwrites a newer one and a
  replayed batch is a no-op.
"""

from __future__ import annotations

RAW_SCHEMA = "topic string, partition int, offset long, key string, value string"
LATEST_SCHEMA = (
    "table string, op string, key string, after map<string,string>, unavailable array<string>, position string"
)
#: The pseudo-column ``after`` carries for a record with Connect schemas: its schema's id
#: (``schema_batches.schema_id``), so that a target decodes a value by the encoding of the
#: schema it was written with (a Decimal's scale before and after ``numeric(10,2) ->
#: numeric(20,4)`` in one batch), not by the target column's.
SCHEMA_KEY = "__cdc_schema"
#: The column a target keeps each row's source position in.
POSITION_COLUMN = "_cdc_position"
#: Debezium's ``unavailable.value.placeholder`` default (an unchanged TOASTed column).
UNAVAILABLE_PLACEHOLDER = "__debezium_unavailable_value"
