"""An incremental snapshot's context: what it has left to read and where it stands, carried in
the offset of every record handed over while it runs (``incremental_snapshot``, a JSON string),
so that a restarted task resumes it at the last chunk whose rows were all delivered."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import orjson

from airflow_cdc.engine.snapshots.chunks import TablePlan

OFFSET_KEY = "incremental_snapshot"


@dataclass(frozen=True)
class SnapshotContext:
    #: The id it is reported under: the last signal whose tables it took in, as Debezium's
    #: ``addDataCollectionNamesToSnapshot`` sets its correlation id (no STARTED for a join).
    id: str
    tables: tuple[TablePlan, ...]  # left to scan, the current one first
    all_tables: tuple[str, ...]  # every table the snapshot was asked for (notifications)
    max_key: tuple[str, ...] | None = None  # of the current table, once read
    last_key: tuple[str, ...] | None = None  # the last key emitted from the current table
    table_rows: int = 0  # rows emitted from the current table
    rows: int = 0  # rows emitted, all tables
    estimated_rows: int = 0
    started_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    paused: bool = False
    #: Every execute-snapshot signal it acted on, in order (``id`` the last): a signal read again
    #: after a restart, the stream replaying it, must not add its tables a second time. Empty in
    #: an offset written before joins were recorded: then ``id`` alone.
    signals: tuple[str, ...] = ()

    @property
    def current(self) -> TablePlan | None:
        return self.tables[0] if self.tables else None

    def acted_on(self, signal_id: str) -> bool:
        """Whether this snapshot already took in the tables of the signal ``signal_id``."""
        return signal_id == self.id or signal_id in self.signals

    def joined(self, signal_id: str, **changes: Any) -> SnapshotContext:
        """This snapshot with the tables of ``signal_id`` taken in, reported under its id."""
        return replace(self, id=signal_id, signals=(self.signals or (self.id,)) + (signal_id,), **changes)

    def to_offset(self) -> dict[str, str]:
        return {OFFSET_KEY: orjson.dumps(asdict(self)).decode()}

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any] | None) -> SnapshotContext | None:
        raw = (offset or {}).get(OFFSET_KEY)
        if not raw:
            return None
        data = orjson.loads(raw)
        data["tables"] = tuple(TablePlan(**t) for t in data["tables"])
        data["all_tables"] = tuple(data["all_tables"])
        data["signals"] = tuple(data.get("signals", ()))
        for key in ("max_key", "last_key"):
            if data[key] is not None:
                data[key] = tuple(data[key])
        return cls(**data)
