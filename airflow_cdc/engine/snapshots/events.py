"""What a source feeds the snapshot coordinator, in stream order (:mod:`.coordinator`).

* a change: a plain :class:`SourceRecord` of a captured table;
* a position: a :class:`PositionMarker` (a commit, a heartbeat) - nothing to deliver;
* a signal row: a :class:`SignalRow`, a change of the signal table (``signal.data.collection``):
  a signal, or one of the watermark rows an incremental snapshot writes there. It is a change
  event like any other, emitted after it is acted on, as Debezium's EventDispatcher does;
* a watermark: a :class:`Watermark`, a window's open or close written into the source's log in a
  form that is no row (PostgreSQL's read-only mode writes WAL messages). Never emitted.

A source recognises these in its own log and builds them; everything else - what a signal
means, which watermark closes which window, the snapshot context in the offsets - is the
coordinator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from airflow_cdc.engine.immutable import immutable
from airflow_cdc.engine.records import Offset, Partition, PositionMarker, SourceRecord

OPEN, CLOSE = "open", "close"


@immutable
class Watermark(PositionMarker):
    """The source's log reached a snapshot window's open or close (``kind``). Taken out of the
    stream by the coordinator: it must never reach the engine (it is no exact PositionMarker)."""

    window: str = ""
    kind: str = OPEN

    @classmethod
    def of(cls, partition: Partition, offset: Offset, window: str, kind: str) -> Watermark:
        # By keyword: a field added to SourceRecord must not shift these (one did: ``schemas``).
        return cls("", None, None, partition, offset, window=window, kind=kind)


@dataclass(frozen=True, slots=True)
class SignalRow:
    """A change of the signal table, read from the Debezium envelope of ``record`` (which is
    emitted as it is). ``op`` is None for a tombstone."""

    record: SourceRecord
    op: str | None
    id: str
    type: str | None
    data: Any

    @classmethod
    def of(cls, record: SourceRecord) -> SignalRow:
        value = record.value
        if not isinstance(value, dict):
            return cls(record, None, "", None, None)
        row = value.get("after") or value.get("before") or {}
        return cls(record, value.get("op"), str(row.get("id") or ""), row.get("type"), row.get("data"))


#: One event of a source's stream, as the coordinator takes it.
SourceEvent: TypeAlias = SourceRecord | SignalRow


def with_signal_rows(records: Sequence[SourceRecord], signal_topic: str | None) -> Sequence[SourceEvent]:
    """The records, those of the signal table's topic as :class:`SignalRow`."""
    if signal_topic is None:
        return records
    return [SignalRow.of(r) if r.topic == signal_topic else r for r in records]
