"""The incremental snapshot's dedup rule, on a scripted chunk source (the real PostgreSQL runs
are in tests/integration/test_incremental_snapshot.py)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_cdc.engine.notifications import NotificationBus
from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.signals.signal import parse_signal
from airflow_cdc.engine.snapshots import incremental, windows
from airflow_cdc.engine.snapshots.incremental import Chunk, IncrementalSnapshot, TablePlan

TOPIC = "shop.public.t"


def row(key: int, value: str, op: str = "r", tx: int | None = None) -> SourceRecord:
    return SourceRecord(
        TOPIC, {"id": key}, {"op": op, "after": {"id": key, "v": value}}, {"server": "shop"}, {"txId": tx}
    )


class Rows:
    def __init__(self, keys: list[int]) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def records(self, offset: Offset) -> Iterator[list[SourceRecord]]:
        yield [row(k, f"read {k}").replace(offset=offset) for k in self.keys]


@dataclass(frozen=True)
class Seen:
    """What a scripted read saw: the transactions in ``seen``."""

    seen: frozenset[Hashable] = frozenset()

    def sees(self, transaction: Hashable) -> bool:
        return transaction in self.seen


@dataclass
class ScriptedSource:
    """One table, keys 1..3, read in one chunk; each read sees what ``reads`` says in turn
    (nothing known when it runs out)."""

    reads: list[Seen | None] = field(default_factory=list)
    windows: int = 0
    now: Seen | None = None  # what a read would see now (horizon)

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
        self.windows += 1
        return Chunk(Rows([1, 2, 3]), ("3",), True, self.reads.pop(0) if self.reads else None)

    def dedup_key(self, record: SourceRecord) -> Hashable:
        return tuple(record.key.values())

    def transaction(self, record: SourceRecord) -> Hashable:
        return record.offset.get("txId")

    def horizon(self) -> Seen | None:
        return self.now

    def topic_of(self, table: str) -> str:
        return TOPIC

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        pass


def started(source: ScriptedSource | None = None) -> tuple[IncrementalSnapshot, str]:
    snapshot = IncrementalSnapshot(source or ScriptedSource(), NotificationBus(("api",)), "test", 10)
    snapshot.execute(parse_signal("s1", "execute-snapshot", {"data-collections": ["public.t"]}, "api"))
    snapshot.step()
    window = snapshot.window_id
    assert window is not None
    return snapshot, window


def released(snapshot: IncrementalSnapshot, window: str) -> list[Any] | None:
    assert snapshot.on_watermark(window, "open", {}) is None
    batches = snapshot.on_watermark(window, "close", {"lsn": 7})
    return None if batches is None else [(r.key["id"], r.offset) for batch in batches for r in batch]


def keys(snapshot: IncrementalSnapshot, window: str) -> list[int] | None:
    out = released(snapshot, window)
    return None if out is None else [key for key, _ in out]


@pytest.fixture(autouse=True)
def _no_reread_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(incremental, "REREAD_DELAY_S", 0.0)


# -- without visibility (a source that cannot tell what its read saw) ---------------------------
def test_a_change_inside_the_window_drops_its_row_and_the_rest_carry_the_close_offset() -> None:
    snapshot, window = started()
    snapshot.on_watermark(window, "open", {})
    snapshot.on_change([row(2, "updated", "u", tx=5)])
    assert released(snapshot, window) == [(1, {"lsn": 7}), (3, {"lsn": 7})]
    snapshot.close()


def test_a_change_streamed_before_the_open_watermark_also_drops_its_row() -> None:
    """PostgreSQL can stream a commit before a snapshot taken after it sees it (ADR 0007): a
    change between the window's queueing and its open watermark counts too."""
    snapshot, window = started()
    snapshot.on_change([row(2, "updated", "u", tx=5)])
    assert keys(snapshot, window) == [1, 3]
    snapshot.close()


def test_changes_of_other_tables_drop_nothing() -> None:
    snapshot, window = started()
    snapshot.on_change([SourceRecord("shop.public.other", {"id": 2}, {"op": "u"}, {"server": "shop"}, {"txId": 5})])
    assert keys(snapshot, window) == [1, 2, 3]
    snapshot.close()


# -- with the read's visibility: the exact rule ---------------------------------------------------
def test_a_change_the_read_saw_keeps_its_row_and_one_it_did_not_see_drops_it() -> None:
    snapshot, window = started(ScriptedSource([Seen(seen=frozenset({5}))]))
    snapshot.on_change([row(1, "updated", "u", tx=5)])  # committed before the read: the row has it
    snapshot.on_change([row(2, "updated", "u", tx=6)])  # committed after the read: the row is older
    assert keys(snapshot, window) == [1, 3]
    snapshot.close()


def test_a_key_changed_twice_counts_its_last_change() -> None:
    snapshot, window = started(ScriptedSource([Seen(seen=frozenset({5}))]))
    snapshot.on_change([row(2, "first", "u", tx=5)])
    snapshot.on_change([row(2, "second", "u", tx=6)])
    assert keys(snapshot, window) == [1, 3]
    snapshot.close()


def test_a_transaction_streamed_before_the_window_that_its_read_did_not_see_makes_it_read_again() -> None:
    """Transaction 6 was streamed before the window was queued - before the snapshot even
    started - yet the read did not see it (its commit waits for a standby): which keys it
    changed is not known any more, so the chunk is not released and the window is read again
    (here the second read sees it)."""
    source = ScriptedSource([Seen(), Seen(seen=frozenset({6}))])
    snapshot = IncrementalSnapshot(source, NotificationBus(("api",)), "test", 10)
    snapshot.on_change([row(2, "updated", "u", tx=6)])
    snapshot.execute(parse_signal("s1", "execute-snapshot", {"data-collections": ["public.t"]}, "api"))
    snapshot.step()
    first = snapshot.window_id
    assert first is not None and keys(snapshot, first) is None
    assert snapshot.context is not None and snapshot.context.last_key is None  # nothing was emitted
    snapshot.step()
    second = snapshot.window_id
    assert second not in (None, first)
    assert keys(snapshot, second) == [1, 2, 3]  # type: ignore[arg-type]
    assert source.windows == 2 and snapshot.context is None  # read twice, then done
    snapshot.close()


def test_an_unseen_transaction_of_other_tables_streamed_before_the_window_changes_nothing() -> None:
    """E.g. another connector's watermark rows in the signal table, committing slowly."""
    source = ScriptedSource([Seen()])
    snapshot = IncrementalSnapshot(source, NotificationBus(("api",)), "test", 10)
    other = SourceRecord("shop.public.debezium_signal", {"id": "w-open"}, {"op": "c"}, {"server": "shop"}, {"txId": 6})
    snapshot.on_change([other])
    snapshot.execute(parse_signal("s1", "execute-snapshot", {"data-collections": ["public.t"]}, "api"))
    snapshot.step()
    window = snapshot.window_id
    assert window is not None and keys(snapshot, window) == [1, 2, 3]
    assert source.windows == 1
    snapshot.close()


def test_streamed_transactions_are_remembered_until_a_read_sees_them(monkeypatch: pytest.MonkeyPatch) -> None:
    source = ScriptedSource([Seen(seen=frozenset({6}))])
    snapshot, window = started(source)
    snapshot.on_change([row(2, "updated", "u", tx=6)])
    snapshot.on_change([row(3, "updated", "u", tx=7)])
    assert keys(snapshot, window) == [1, 2]
    queue = snapshot._windows
    assert not queue._changed and list(queue._transactions) == [7]  # 6 was seen by the read
    monkeypatch.setattr(windows, "REMEMBERED_TRANSACTIONS", 2)
    for tx in (8, 9):
        snapshot.on_change([row(1, "updated", "u", tx=tx)])
    source.now = Seen(seen=frozenset({7, 8}))
    snapshot.tidy()  # too many: what a read would see now is forgotten
    assert list(queue._transactions) == [9]
    snapshot.close()
