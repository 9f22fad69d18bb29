"""Kafka Connect schemas, as Connect's ``JsonConverter`` writes them with ``schemas.enable=true``.

With ``key.converter.schemas.enable`` / ``value.converter.schemas.enable`` a record's key and
value are ``{"schema": {...}, "payload": {...}}``, the schema in the JSON of
``JsonConverter.asJsonSchema``: ``type``, then ``fields`` (struct; each field's schema with its
name in ``field``), ``items`` (array) or ``keys``/``values`` (map), ``optional``, ``name``,
``version``, ``doc``, ``parameters``, ``default``. The sources build the schemas of a table once
per table schema (its columns as the source last described them) and hand them on with every
record (:attr:`SourceRecord.schemas`); the serializer writes the bytes built here, so the cost
per event is one concatenation (ADR 0024).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from airflow_cdc.engine.config import ConfigDef, Field

#: The JSON converters' settings (Debezium's embedded engine and Kafka Connect name them so).
KEY_SCHEMAS_ENABLE = "key.converter.schemas.enable"
VALUE_SCHEMAS_ENABLE = "value.converter.schemas.enable"

CONVERTER_CONFIG = ConfigDef(
    [
        Field(
            KEY_SCHEMAS_ENABLE,
            type="bool",
            default=False,
            doc="Write each record's key as JsonConverter does with schemas enabled: "
            '{"schema": <the key\'s Connect schema>, "payload": <the key>}.',
        ),
        Field(
            VALUE_SCHEMAS_ENABLE,
            type="bool",
            default=False,
            doc="Write each record's value with its Connect schema (the envelope's: before/after "
            "structs with every column's type, optionality, semantic name and parameters).",
        ),
    ]
)

Schema = dict[str, Any]


@dataclass(frozen=True)
class SchemaSettings:
    """Whether the sources build schemas at all, and which columns carry their source type."""

    enabled: bool = False
    by_column: Sequence[re.Pattern[str]] = ()
    by_type: Sequence[re.Pattern[str]] = ()
    #: Schemas of the initial snapshot, where Debezium reads the columns' sizes from JDBC's
    #: metadata instead of a RELATION message (schema_facts.source_size).
    snapshot: bool = False

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SchemaSettings:
        # Debezium matches these case-insensitively against the whole name (Predicates.includes).
        def compiled(key: str) -> tuple[re.Pattern[str], ...]:
            return tuple(re.compile(p, re.IGNORECASE) for p in settings.get(key) or ())

        return cls(
            bool(settings.get(KEY_SCHEMAS_ENABLE) or settings.get(VALUE_SCHEMAS_ENABLE)),
            compiled("column.propagate.source.type"),
            compiled("datatype.propagate.source.type"),
        )

    def propagates(self, schema: str, table: str, column: str, type_name: str) -> bool:
        """Debezium's column mappers: ``schema.table.column`` or ``schema.table.type`` matches (for
        MySQL the schema is the database)."""
        return any(p.fullmatch(f"{schema}.{table}.{column}") for p in self.by_column) or any(
            p.fullmatch(f"{schema}.{table}.{type_name}") for p in self.by_type
        )


def schema(
    type_: str,
    *,
    optional: bool = False,
    name: str | None = None,
    version: int | None = None,
    doc: str | None = None,
    parameters: Mapping[str, str] | None = None,
    fields: Iterable[Schema] | None = None,
    items: Schema | None = None,
    keys: Schema | None = None,
    values: Schema | None = None,
) -> Schema:
    """A schema in asJsonSchema's key order (the parent adds ``default`` and ``field``)."""
    out: Schema = {"type": type_}
    if fields is not None:
        out["fields"] = list(fields)
    if items is not None:
        out["items"] = items
    if keys is not None:
        out["keys"], out["values"] = keys, values
    out["optional"] = optional
    if name is not None:
        out["name"] = name
    if version is not None:
        out["version"] = version
    if doc is not None:
        out["doc"] = doc
    if parameters:
        out["parameters"] = dict(parameters)
    return out


def field(name: str, field_schema: Schema) -> Schema:
    """``field_schema`` as a struct's field named ``name`` (``field`` comes last, as Connect writes it)."""
    return {**field_schema, "field": name}


def optional(field_schema: Schema) -> Schema:
    return {**field_schema, "optional": True}


def struct(name: str | None, fields: Iterable[Schema], *, optional: bool = False, version: int | None = None) -> Schema:
    return schema("struct", fields=fields, optional=optional, name=name, version=version)


#: Debezium's ``transaction`` block of a change event (TransactionStructMaker, "event.block").
TRANSACTION_BLOCK = struct(
    "event.block",
    [
        field("id", schema("string")),
        field("total_order", schema("int64")),
        field("data_collection_order", schema("int64")),
    ],
    optional=True,
    version=1,
)

_SNAPSHOT_MARKERS = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
#: The head every connector's source struct starts with (AbstractSourceInfoStructMaker).
SOURCE_HEAD_FIELDS = (
    field("version", schema("string")),
    field("connector", schema("string")),
    field("name", schema("string")),
    field("ts_ms", schema("int64")),
    {
        **schema(
            "string",
            optional=True,
            name="io.debezium.data.Enum",
            version=1,
            parameters={"allowed": _SNAPSHOT_MARKERS},
        ),
        "default": "false",
        "field": "snapshot",
    },
    field("db", schema("string")),
    field("sequence", schema("string", optional=True)),
    field("ts_us", schema("int64", optional=True)),
    field("ts_ns", schema("int64", optional=True)),
)


def envelope(topic: str, row: Schema, source: Schema) -> Schema:
    """Debezium's change-event envelope (``<topic>.Envelope``, version 2) around ``row``, the
    table's ``<topic>.Value`` struct (optional: before and after are each null sometimes)."""
    return struct(
        f"{topic}.Envelope",
        [
            field("before", row),
            field("after", row),
            field("source", source),
            field("transaction", TRANSACTION_BLOCK),
            field("op", schema("string")),
            field("ts_ms", schema("int64", optional=True)),
            field("ts_us", schema("int64", optional=True)),
            field("ts_ns", schema("int64", optional=True)),
        ],
        version=2,
    )


@dataclass(frozen=True, eq=False)
class ConnectSchemas:
    """A record's key and value schemas, encoded once: the serializer's prefixes
    (``{"schema":<schema>,"payload":``). ``key`` is None for a table without a key (its
    records' keys are null, and a null key with no schema is written as null)."""

    key: bytes | None
    value: bytes

    @classmethod
    def of(cls, key: Schema | None, value: Schema) -> ConnectSchemas:
        return cls(None if key is None else _prefix(key), _prefix(value))

    @property
    def key_schema(self) -> Schema | None:
        return None if self.key is None else _schema_of(self.key)

    @property
    def value_schema(self) -> Schema:
        return _schema_of(self.value)


@functools.lru_cache(maxsize=4096)
def unwrapped(schemas: ConnectSchemas, exact: bool) -> ConnectSchemas:
    """The schemas of ``schemas``' records after ExtractNewRecordState: the same key; as the
    value the envelope's ``after`` struct (``<topic>.Value``) when the row is exactly that
    (``exact``), else no value schema (added fields are not described yet: ``"schema": null``
    rather than a schema that does not fit). Cached per table schema (one object per table)."""
    after = next((f for f in schemas.value_schema.get("fields", ()) if f.get("field") == "after"), None)
    if after is None or not exact:
        return ConnectSchemas(schemas.key, NO_SCHEMA)
    return ConnectSchemas(schemas.key, _prefix({k: v for k, v in after.items() if k != "field"}))


#: What JsonConverter writes before a value without a schema.
NO_SCHEMA = b'{"schema":null,"payload":'


def _prefix(schema_: Schema) -> bytes:
    return b'{"schema":' + orjson.dumps(schema_) + b',"payload":'


def _schema_of(prefix: bytes) -> Schema:
    parsed: Schema = orjson.loads(prefix + b"null}")["schema"]
    return parsed


#: The transaction topic's key and value (SchemaFactory's TransactionMetadataKey/Value).
TRANSACTION_SCHEMAS = ConnectSchemas.of(
    struct("io.debezium.connector.common.TransactionMetadataKey", [field("id", schema("string"))], version=1),
    struct(
        "io.debezium.connector.common.TransactionMetadataValue",
        [
            field("status", schema("string")),
            field("id", schema("string")),
            field("event_count", schema("int64", optional=True)),
            field(
                "data_collections",
                schema(
                    "array",
                    optional=True,
                    items=struct(
                        "event.collection",
                        [field("data_collection", schema("string")), field("event_count", schema("int64"))],
                        optional=True,
                        version=1,
                    ),
                ),
            ),
            field("ts_ms", schema("int64")),
        ],
        version=1,
    ),
)

#: The notification sink topic's key and value (SchemaFactory's NotificationKey/Notification).
NOTIFICATION_SCHEMAS = ConnectSchemas.of(
    struct("io.debezium.connector.common.NotificationKey", [field("id", schema("string"))], version=1),
    struct(
        "io.debezium.connector.common.Notification",
        [
            field("id", schema("string")),
            field("type", schema("string")),
            field("aggregate_type", schema("string")),
            field("additional_data", schema("map", optional=True, keys=schema("string"), values=schema("string"))),
            field("timestamp", schema("int64")),
        ],
        version=1,
    ),
)
