"""An incremental snapshot's context: what it has left to read and where it stands, carried in
the offset of every record handed over while it runs (``incremental_snapshot``, a JSON string),
so that a restarted task resumes it at the last chunk whose rows were all delivered."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from airflow_cdc.engine.snapshots.chunks import TablePlan

OFFSET_KEY = "incremental_snapshot"


@dataclass(frozen=True)
class SnapshotContext:
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

    @property
    def current(self) -> TablePlan | None:
        return self.tables[0] if self.tables else None

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
        for key in ("max_key", "last_key"):
            if data[key] is not None:
                data[key] = tuple(data[key])
        return cls(**data)
