"""Debezium's ``ExtractNewRecordState``: replace the envelope by the row state.

Deletes and tombstones follow ``delete.tombstone.handling.mode`` exactly as Debezium's
``DefaultDeleteHandlingStrategy`` does; ``add.fields`` copies envelope or source fields into the
row as ``__<field>`` (``source.ts_ms`` becomes ``__source_ts_ms``).
"""

from __future__ import annotations

from typing import Any

import orjson

from airflow_cdc.engine.config import Config, ConfigDef, Field
from airflow_cdc.engine.connect_schema import unwrapped
from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.transforms.base import ConfigurableTransform

_ENVELOPE_FIELDS = frozenset({"op", "ts_ms", "ts_us", "ts_ns", "before", "after"})
_REWRITE_MODES = frozenset({"rewrite", "rewrite-with-tombstone"})


def _field_path(name: str) -> tuple[str, ...]:
    """Where ``add.fields`` entries are read from: ``op``/``ts_ms`` from the envelope,
    ``source.x``/``transaction.x`` from those blocks, anything else from ``source``."""
    if name.startswith(("source.", "transaction.")):
        return tuple(name.split(".", 1))
    if name in _ENVELOPE_FIELDS:
        return (name,)
    return ("source", name)


def _lookup(envelope: dict[str, Any], path: tuple[str, ...]) -> Any:
    current: Any = envelope
    for part in path:
        if not isinstance(current, dict):
            return None
        current = current.get(part)
    return current


class ExtractNewRecordState(ConfigurableTransform):
    config_def = ConfigDef(
        [
            Field(
                "delete.tombstone.handling.mode",
                default="tombstone",
                choices=("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone"),
                doc="What deletes and tombstones become.",
            ),
            Field("add.fields", type="list", default=[], doc="Envelope/source fields to copy into the row."),
            Field("add.fields.prefix", default="__", doc="Prefix of the copied fields' names."),
            Field("add.headers", type="list", default=[], doc="Envelope/source fields to copy into headers."),
            Field("add.headers.prefix", default="__", doc="Prefix of the copied headers' names."),
        ]
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self._mode: str = self.settings["delete.tombstone.handling.mode"]
        prefix = self.settings["add.fields.prefix"]
        self._fields = [(prefix + name.replace(".", "_"), _field_path(name)) for name in self.settings["add.fields"]]
        hprefix = self.settings["add.headers.prefix"]
        self._headers = [(hprefix + name.replace(".", "_"), _field_path(name)) for name in self.settings["add.headers"]]

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        envelope = record.value
        if envelope is None:  # a tombstone
            return record if self._mode == "rewrite-with-tombstone" else None
        if not isinstance(envelope, dict) or "op" not in envelope:
            return record  # not a change event (a heartbeat, a schema change): pass through
        if envelope["op"] == "d":
            return self._delete(record, envelope)
        row = dict(envelope.get("after") or {})
        if self._mode in _REWRITE_MODES:
            row["__deleted"] = "false"
        return self._finish(record, envelope, row)

    def _delete(self, record: SourceRecord, envelope: dict[str, Any]) -> SourceRecord | None:
        if self._mode == "drop":
            return None
        if self._mode in ("tombstone", "delete-to-tombstone"):
            return self._finish(record, envelope, None)
        row = dict(envelope.get("before") or {})
        row["__deleted"] = "true"
        return self._finish(record, envelope, row)

    def _finish(self, record: SourceRecord, envelope: dict[str, Any], row: dict[str, Any] | None) -> SourceRecord:
        if row is not None:
            for name, path in self._fields:
                row[name] = _lookup(envelope, path)
        headers = record.headers
        if self._headers:
            headers = headers + tuple((name, orjson.dumps(_lookup(envelope, path))) for name, path in self._headers)
        if record.schemas is None:
            return record.replace(value=row, headers=headers)
        exact = row is not None and len(row) == len(envelope.get("after") or envelope.get("before") or {})
        return record.replace(value=row, headers=headers, schemas=unwrapped(record.schemas, exact))
