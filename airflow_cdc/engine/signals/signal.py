"""A signal and its validation. A bad signal is a :class:`SignalError` that names the problem;
the source answers it with a notification and a log line and keeps streaming."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from airflow_cdc.engine.errors import CdcError

EXECUTE, STOP, PAUSE, RESUME, LOG = "execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot", "log"
ACTIONS = (EXECUTE, STOP, PAUSE, RESUME, LOG)
#: Watermark rows an incremental snapshot writes to the signal table (not signals).
WINDOW_OPEN, WINDOW_CLOSE = "snapshot-window-open", "snapshot-window-close"
SNAPSHOT_TYPES = ("incremental", "blocking")


class SignalError(CdcError):
    """A signal that cannot be acted on; the message says what to fix."""

    def __init__(self, message: str, signal_id: str = "") -> None:
        super().__init__(message)
        self.signal_id = signal_id


@dataclass(frozen=True)
class AdditionalCondition:
    data_collection: str  # a regex on schema.table, as Debezium's
    filter: str


@dataclass(frozen=True)
class Signal:
    id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    channel: str = "source"

    @property
    def data_collections(self) -> list[str]:
        return list(self.data.get("data-collections") or [])

    @property
    def snapshot_type(self) -> str:
        return str(self.data.get("type") or "incremental").lower()

    @property
    def additional_conditions(self) -> list[AdditionalCondition]:
        return [
            AdditionalCondition(c["data-collection"], c["filter"]) for c in self.data.get("additional-conditions") or []
        ]

    @property
    def surrogate_key(self) -> str | None:
        key = self.data.get("surrogate-key")
        return str(key) if key else None


def parse_signal(signal_id: str, signal_type: str, data: str | bytes | dict[str, Any] | None, channel: str) -> Signal:
    """Validate a signal's shape; raises SignalError naming the problem."""
    signal_id = str(signal_id or "")
    kind = str(signal_type or "").strip()
    if kind not in ACTIONS:
        raise SignalError(f"unknown signal type {kind!r}: use one of {', '.join(ACTIONS)}", signal_id)
    parsed: Any
    if data is None or data == "" or data == b"":
        parsed = {}
    elif isinstance(data, dict):
        parsed = data
    else:
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SignalError(f"signal {signal_id!r}: data is not valid JSON ({exc})", signal_id) from None
    if not isinstance(parsed, dict):
        raise SignalError(f"signal {signal_id!r}: data must be a JSON object, got {type(parsed).__name__}", signal_id)
    signal = Signal(signal_id, kind, parsed, channel)
    _check(signal)
    return signal


def _check(signal: Signal) -> None:
    data, sid = signal.data, signal.id
    if signal.type in (EXECUTE, STOP):
        collections = data.get("data-collections")
        if signal.type == EXECUTE and (not isinstance(collections, list) or not collections):
            raise SignalError(f"signal {sid!r}: execute-snapshot needs a non-empty 'data-collections' list", sid)
        if collections is not None and not (
            isinstance(collections, list) and all(isinstance(c, str) for c in collections)
        ):
            raise SignalError(f"signal {sid!r}: 'data-collections' must be a list of table names or regexes", sid)
        for pattern in collections or []:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise SignalError(f"signal {sid!r}: data-collection {pattern!r} is not a regex ({exc})", sid) from None
        if signal.snapshot_type not in SNAPSHOT_TYPES:
            raise SignalError(
                f"signal {sid!r}: snapshot type {signal.snapshot_type!r} is not incremental or blocking", sid
            )
    if signal.type == EXECUTE:
        conditions = data.get("additional-conditions") or []
        if not isinstance(conditions, list) or not all(
            isinstance(c, dict) and isinstance(c.get("data-collection"), str) and isinstance(c.get("filter"), str)
            for c in conditions
        ):
            raise SignalError(
                f"signal {sid!r}: 'additional-conditions' must be a list of "
                '{"data-collection": "<table>", "filter": "<predicate>"}',
                sid,
            )
    if signal.type == LOG and not isinstance(data.get("message"), str):
        raise SignalError(f"signal {sid!r}: a log signal needs a 'message' string", sid)
