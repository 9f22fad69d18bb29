"""Serializers turn a :class:`SourceRecord` into bytes for a sink.

The JSON serializer writes what Debezium's ``JsonConverter`` writes: by default with
``schemas.enable=false``, the key and the envelope as plain JSON; with
``key.converter.schemas.enable`` / ``value.converter.schemas.enable`` each as
``{"schema": ..., "payload": ...}``, the schema the source built for the record's table
(connect_schema.py, ADR 0024). orjson does the encoding (it is several times faster than the
standard library and handles datetimes natively).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

import orjson

from airflow_cdc.engine.connect_schema import CONVERTER_CONFIG, KEY_SCHEMAS_ENABLE, NO_SCHEMA, VALUE_SCHEMAS_ENABLE
from airflow_cdc.engine.errors import ConfigError, ConfigProblem, SerializationError
from airflow_cdc.engine.records import SerializedRecord, SourceRecord


class Serializer(Protocol):
    def serialize(self, record: SourceRecord) -> SerializedRecord: ...


def _default(value: Any) -> Any:
    # Sources convert column values to Debezium's JSON representation themselves; this is the
    # safety net for values a user transform put into a record.
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.timedelta):
        return int(value.total_seconds() * 1_000_000)
    if isinstance(value, uuid.UUID | dt.tzinfo):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class JsonSerializer:
    """Debezium JSON: ``key`` and ``value`` as JSON, with their Connect schemas when enabled;
    tombstones stay None (as JsonConverter writes a null value with a null schema)."""

    def __init__(self, *, sort_keys: bool = False, key_schemas: bool = False, value_schemas: bool = False) -> None:
        self._option = orjson.OPT_SORT_KEYS if sort_keys else 0
        self._key_schemas, self._value_schemas = key_schemas, value_schemas
        if key_schemas or value_schemas:
            # Chosen once: the default path keeps its one call per key and value.
            self.serialize = self._serialize_with_schemas  # type: ignore[method-assign]

    @property
    def schemas(self) -> tuple[bool, bool]:
        """Whether keys and values carry their Connect schemas."""
        return self._key_schemas, self._value_schemas

    def check_config(self, config: Mapping[str, object]) -> None:
        """Raises :class:`ConfigError` when ``config``'s converters ask for other schemas than
        this serializer writes: an embedding user's ``JsonSerializer()`` would silently write
        none while the config enables them (or schemas the source never builds)."""
        wanted = JsonSerializer.from_config(config).schemas
        if wanted != self.schemas:
            raise ConfigError(
                [
                    ConfigProblem(
                        f"{KEY_SCHEMAS_ENABLE} / {VALUE_SCHEMAS_ENABLE}",
                        f"the config asks for key/value schemas {wanted}, the serializer writes {self.schemas}",
                        "pass serializer=JsonSerializer.from_config(config), which reads them from the config",
                    )
                ]
            )

    @classmethod
    def from_config(cls, config: Mapping[str, object], *, sort_keys: bool = False) -> JsonSerializer:
        """With the converters' ``*.converter.schemas.enable`` of an engine configuration."""
        enabled = {
            key: bool(CONVERTER_CONFIG.fields[key].parse(config[key])) if config.get(key) is not None else False
            for key in (KEY_SCHEMAS_ENABLE, VALUE_SCHEMAS_ENABLE)
        }
        key, value = enabled[KEY_SCHEMAS_ENABLE], enabled[VALUE_SCHEMAS_ENABLE]
        return cls(sort_keys=sort_keys, key_schemas=key, value_schemas=value)

    def dumps(self, obj: Any) -> bytes:
        return orjson.dumps(obj, default=_default, option=self._option)

    def serialize(self, record: SourceRecord) -> SerializedRecord:
        try:
            key = None if record.key is None else orjson.dumps(record.key, default=_default, option=self._option)
            value = None if record.value is None else orjson.dumps(record.value, default=_default, option=self._option)
        except TypeError as exc:
            raise _unserializable(record, exc) from exc
        return SerializedRecord(record.topic, key, value, record.headers, record)

    def _serialize_with_schemas(self, record: SourceRecord) -> SerializedRecord:
        schemas = record.schemas
        try:
            key = value = None
            if record.key is not None:
                key = orjson.dumps(record.key, default=_default, option=self._option)
                if self._key_schemas:
                    key = (_NO_SCHEMA if schemas is None or schemas.key is None else schemas.key) + key + b"}"
            if record.value is not None:
                value = orjson.dumps(record.value, default=_default, option=self._option)
                if self._value_schemas:
                    value = (_NO_SCHEMA if schemas is None else schemas.value) + value + b"}"
        except TypeError as exc:
            raise _unserializable(record, exc) from exc
        return SerializedRecord(record.topic, key, value, record.headers, record)


#: What JsonConverter writes for a value without a schema (a record no source built one for).
_NO_SCHEMA = NO_SCHEMA


def _unserializable(record: SourceRecord, exc: TypeError) -> SerializationError:
    return SerializationError(
        f"record for topic {record.topic!r} at offset {dict(record.offset)} cannot be serialized to JSON: {exc}"
    )
