"""Serializers turn a :class:`SourceRecord` into bytes for a sink.

The JSON serializer writes what Debezium's ``JsonConverter`` writes with
``schemas.enable=false``: the key and the envelope as plain JSON. orjson does the encoding
(it is several times faster than the standard library and handles datetimes natively).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import uuid
from typing import Any, Protocol

import orjson

from airflow_cdc.engine.errors import SerializationError
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
    """Debezium JSON without schemas: ``key`` and ``value`` as JSON; tombstones stay None."""

    def __init__(self, *, sort_keys: bool = False) -> None:
        self._option = orjson.OPT_SORT_KEYS if sort_keys else 0

    def dumps(self, obj: Any) -> bytes:
        return orjson.dumps(obj, default=_default, option=self._option)

    def serialize(self, record: SourceRecord) -> SerializedRecord:
        try:
            key = None if record.key is None else orjson.dumps(record.key, default=_default, option=self._option)
            value = None if record.value is None else orjson.dumps(record.value, default=_default, option=self._option)
        except TypeError as exc:
            raise SerializationError(
                f"record for topic {record.topic!r} at offset {dict(record.offset)} cannot be serialized to JSON: {exc}"
            ) from exc
        return SerializedRecord(record.topic, key, value, record.headers, record)
