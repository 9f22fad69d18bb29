"""The incremental snapshot's dedup rule, on a scripted chunk source (the real PostgreSQL runs
are in tests/integration/test_incremental_snapshot.py)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from airflow_cdc.engine.notifications import NotificationBus
from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.signals.signal import parse_signal
from airflow_cdc.engine.snapshots.incremental import Chunk, IncrementalSnapshot, TablePlan

TOPIC = "shop.public.t"


def row(key: int, value: str, op: str = "r") -> SourceRecord:
    return SourceRecord(TOPIC, {"id": key}, {"op": op, "after": {"id": key, "v": value}}, {"server": "shop"}, {})


class Rows:
    def __init__(self, keys: list[int]) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def records(self, offset: Offset) -> Iterator[list[SourceRecord]]:
        yield [row(k, f"read {k}").replace(offset=offset) for k in self.keys]


class ScriptedSource:
    """One table, keys 1..3, read in one chunk."""

    def snapshot_tables(self) -> list[str]:
        return ["public.t"]

    def check_table(self, plan: TablePlan) -> str | None:
        return None

    def check_filter(self, table: str, predicate: str) -> None:
        pass

    def estimate_rows(self, table: str) -> int:
        return 3

    def max_key(self, plan: TablePlan) -> tuple[str, ...] | None:
        return ("3",)

    def read_window(
        self,
        window_id: str,
        plan: TablePlan,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        limit: int,
        correlation_id: str | None = None,
    ) -> Chunk:
        return Chunk(Rows([1, 2, 3]), ("3",), True)

    def dedup_key(self, record: SourceRecord) -> Hashable:
        return tuple(record.key.values())

    def topic_of(self, table: str) -> str:
        return TOPIC

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        pass


def started() -> tuple[IncrementalSnapshot, str]:
    snapshot = IncrementalSnapshot(ScriptedSource(), NotificationBus(("api",)), "test", 10)
    snapshot.execute(parse_signal("s1", "execute-snapshot", {"data-collections": ["public.t"]}, "api"))
    snapshot.step()
    window = snapshot.window_id
    assert window is not None
    return snapshot, window


def released(snapshot: IncrementalSnapshot, window: str) -> list[Any]:
    assert snapshot.on_watermark(window, "open", {}) is None
    batches = snapshot.on_watermark(window, "close", {"lsn": 7})
    assert batches is not None
    out = [(r.key["id"], r.offset) for batch in batches for r in batch]
    snapshot.close()
    return out


def test_a_change_inside_the_window_drops_its_row_and_the_rest_carry_the_close_offset() -> None:
    snapshot, window = started()
    snapshot.on_watermark(window, "open", {})
    snapshot.on_change(row(2, "updated", "u"))
    batches = snapshot.on_watermark(window, "close", {"lsn": 7})
    assert batches is not None
    assert [(r.key["id"], r.offset) for batch in batches for r in batch] == [(1, {"lsn": 7}), (3, {"lsn": 7})]
    snapshot.close()


def test_a_change_streamed_before_the_open_watermark_also_drops_its_row() -> None:
    """PostgreSQL can stream a commit before a snapshot taken after it sees it (ADR 0007): a
    change between the window's queueing and its open watermark counts too."""
    snapshot, window = started()
    snapshot.on_change(row(2, "updated", "u"))
    assert [key for key, _ in released(snapshot, window)] == [1, 3]


def test_changes_of_other_tables_drop_nothing() -> None:
    snapshot, window = started()
    snapshot.on_change(SourceRecord("shop.public.other", {"id": 2}, {"op": "u"}, {"server": "shop"}, {}))
    assert [key for key, _ in released(snapshot, window)] == [1, 2, 3]
