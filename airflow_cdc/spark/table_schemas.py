"""A captured table's schema as the apply job reads it from the change events themselves.

With Connect's JSON converter and ``schemas.enable=true`` (Debezium on Connect, or our engine's
``key.converter.schemas.enable`` / ``value.converter.schemas.enable``, ADR 0024) every record is
``{"schema": ..., "payload": ...}``: the key's schema names the key columns, the envelope's
``after`` struct every column in order with its Connect type, optionality, Debezium's semantic
type (``io.debezium.time.MicroTimestamp``, ...) and parameters - with
``column.propagate.source.type`` the source type, length and scale too. That is all a target
needs to create a table and follow its changes (``schema_changes.py``), and it is the same for
both backends: no registry, no second topic.

Nothing here imports Spark: the driver parses the few distinct schemas of a batch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The parameters ``column.propagate.source.type`` adds to a field's schema.
SOURCE_TYPE = "__debezium.source.column.type"
SOURCE_LENGTH = "__debezium.source.column.length"
SOURCE_SCALE = "__debezium.source.column.scale"


@dataclass(frozen=True)
class SourceColumn:
    """One column of a captured table, as its Connect field schema describes it."""

    name: str
    #: Connect's type: int8, int16, int32, int64, float32, float64, boolean, string, bytes,
    #: array, map, struct.
    type: str
    optional: bool = True
    #: Debezium's or Connect's logical type (the schema's ``name``), e.g. ``io.debezium.time.Date``.
    semantic: str | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    #: An array's element.
    items: SourceColumn | None = None
    #: The schema's ``default`` in Connect's JSON form (Debezium gives a constant default's value).
    default: Any = None
    has_default: bool = False

    @property
    def source_type(self) -> str | None:
        """The source's own type name (``VARCHAR``, ``NUMERIC``), with ``column.propagate.source.type``."""
        value = self.parameters.get(SOURCE_TYPE)
        return value.upper() if value else None

    @property
    def length(self) -> int | None:
        return _int(self.parameters.get(SOURCE_LENGTH))

    @property
    def scale(self) -> int | None:
        value = self.parameters.get(SOURCE_SCALE, self.parameters.get("scale"))
        return _int(value)

    @property
    def precision(self) -> int | None:
        """A decimal's precision: Connect's ``connect.decimal.precision``, else the source length."""
        value = _int(self.parameters.get("connect.decimal.precision"))
        return value if value is not None else self.length

    @property
    def described(self) -> str:
        """How messages show the column's type: the source's with its length and scale, else Connect's."""
        if self.source_type:
            size = ",".join(str(n) for n in (self.length, self.scale) if n is not None)
            return f"{self.source_type}({size})" if size else self.source_type
        return self.semantic or self.type


@dataclass(frozen=True)
class TableSchema:
    """A table's columns in the source's order and its key, from one record's schemas."""

    table: str
    columns: tuple[SourceColumn, ...]
    key: tuple[str, ...] = ()

    def column(self, name: str) -> SourceColumn | None:
        for column in self.columns:
            if column.name == name:
                return column
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _column(schema: Mapping[str, Any]) -> SourceColumn:
    items = schema.get("items")
    return SourceColumn(
        name=str(schema.get("field", "")),
        type=str(schema.get("type", "string")),
        optional=bool(schema.get("optional", True)),
        semantic=schema.get("name"),
        parameters={str(k): str(v) for k, v in (schema.get("parameters") or {}).items()},
        items=_column(items) if isinstance(items, Mapping) else None,
        default=schema.get("default"),
        has_default="default" in schema,
    )


def row_struct(value_schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The struct of the row's columns: the envelope's ``after`` (or ``before``), or the value
    schema itself when a transform (``ExtractNewRecordState``) unwrapped the envelope."""
    if value_schema.get("type") != "struct":
        return None
    fields = {f.get("field"): f for f in value_schema.get("fields") or ()}
    if "op" in fields and "source" in fields:  # an envelope: a message's or heartbeat's has no row
        row = fields.get("after") or fields.get("before")
        return row if isinstance(row, Mapping) and row.get("type") == "struct" else None
    return value_schema


def table_schema(
    table: str, key_schema: Mapping[str, Any] | None, value_schema: Mapping[str, Any]
) -> TableSchema | None:
    """The schema of ``table`` from a record's key and value schemas; None when the value schema
    describes no row (a TRUNCATE's or a message's envelope still has ``after``; a heartbeat's does not)."""
    row = row_struct(value_schema)
    if row is None:
        return None
    columns = tuple(_column(f) for f in row.get("fields") or ())
    key: tuple[str, ...] = ()
    if key_schema and key_schema.get("type") == "struct":
        key = tuple(str(f.get("field")) for f in key_schema.get("fields") or ())
    return TableSchema(table, columns, key)


def schema_texts(text: str | None) -> Mapping[str, Any] | None:
    """A record's ``schema`` as data (the part ``schema_batches.py`` cut from the record)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


def merged(versions: Iterable[TableSchema]) -> TableSchema:
    """The schemas of one table seen in one batch (before and after an ALTER) as one: the newest's
    columns in its order, then any column only an older one has (dropped within the batch).
    Where versions differ in a column's type, the newest wins: ``schema_changes.py`` widens a
    target, never narrows it, so an older narrower type asks for nothing more."""
    ordered = list(versions)
    newest = ordered[-1]
    names = set(newest.names)
    extra = [c for version in ordered[:-1] for c in version.columns if c.name not in names]
    seen: set[str] = set()
    dropped = tuple(c for c in extra if not (c.name in seen or seen.add(c.name)))  # type: ignore[func-returns-value]
    return TableSchema(newest.table, newest.columns + dropped, newest.key)


_MILLIS = (
    "io.debezium.time.Timestamp",
    "io.debezium.time.Time",
    "org.apache.kafka.connect.data.Timestamp",
    "org.apache.kafka.connect.data.Time",
)
_MICROS = ("io.debezium.time.MicroTimestamp", "io.debezium.time.MicroTime")

#: How a value's encoding depends on its schema: ``("scale", n)`` (a Decimal's unscaled value)
#: or ``("precision", 3 | 6)`` (a temporal value in milli- or microseconds).
Encoding = tuple[str, int]


def encodings(schema: TableSchema) -> dict[str, Encoding]:
    """The columns of ``schema`` whose values a target can decode only knowing this schema."""
    out: dict[str, Encoding] = {}
    for column in schema.columns:
        if column.semantic == "org.apache.kafka.connect.data.Decimal" and column.scale is not None:
            out[column.name] = ("scale", column.scale)
        elif column.semantic in _MILLIS:
            out[column.name] = ("precision", 3)
        elif column.semantic in _MICROS:
            out[column.name] = ("precision", 6)
    return out


def fingerprint(schema: TableSchema) -> str:
    """A short stable digest of a table schema (what the job logs and compares)."""
    text = json.dumps([schema.table, schema.key, [c.__dict__ | {"items": None} for c in schema.columns]], default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]
