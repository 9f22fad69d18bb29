"""The coordinator on scripted typed events (no database): what it hands over, in which order,
with which offsets."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.notifications import NotificationBus
from airflow_cdc.engine.records import PositionMarker, SourceRecord
from airflow_cdc.engine.signals.channels import InProcessChannel
from airflow_cdc.engine.snapshots.context import SnapshotContext
from airflow_cdc.engine.snapshots.coordinator import SnapshotCoordinator
from airflow_cdc.engine.snapshots.events import SignalRow, Watermark
from airflow_cdc.engine.snapshots.incremental import OFFSET_KEY
from tests.unit.test_incremental_dedup import ScriptedSource, row

PARTITION = {"server": "shop"}
SIGNALS = "shop.public.debezium_signal"
SETTINGS = {
    "incremental.snapshot.watermarking.strategy": "insert_insert",
    "incremental.snapshot.chunk.size": 10,
    "incremental.snapshot.max.threads": 1,
    "signal.enabled.channels": ["source"],
    "signal.file": "",
    "signal.kafka.topic": "",
    "signal.kafka.bootstrap.servers": "",
    "topic.prefix": "shop",
    "signal.kafka.groupId": "",
}


class TwoTables(ScriptedSource):
    """public.t (keys 1..3, one chunk) and public.u, empty."""

    def snapshot_tables(self) -> list[str]:
        return ["public.t", "public.u"]

    def max_key(self, plan: Any) -> tuple[str, ...] | None:
        return ("3",) if plan.name == "public.t" else None


def signal_row(row_id: str, kind: str, data: str | None, lsn: int) -> SignalRow:
    value = {"op": "c", "after": {"id": row_id, "type": kind, "data": data}}
    return SignalRow.of(SourceRecord(SIGNALS, {"id": row_id}, value, PARTITION, {"lsn": lsn, "txId": lsn}))


def flat(segments: list[Any]) -> list[SourceRecord]:
    """The records of every segment, a released chunk's batches taken."""
    batches = [[segment] if isinstance(segment, list) else list(segment) for segment in segments]
    return [record for group in batches for batch in group for record in batch]


def make_coordinator(source: Any = None, resume: Any = None) -> SnapshotCoordinator:
    return SnapshotCoordinator(
        source=source or TwoTables(),
        position=lambda: {"lsn": 0},
        partition=PARTITION,
        settings=SETTINGS,
        bus=NotificationBus(("api",)),
        connector_name="test",
        signals=InProcessChannel(),
        resume=resume,
    )


@pytest.fixture
def coordinator() -> SnapshotCoordinator:
    return make_coordinator()


def test_a_snapshot_ending_on_an_empty_table_leaves_a_marker_without_its_context(
    coordinator: SnapshotCoordinator,
) -> None:
    execute = signal_row("s1", "execute-snapshot", '{"data-collections": ["public.t", "public.u"]}', 10)
    (handed,) = coordinator.feed([execute])
    assert handed[0].topic == SIGNALS and OFFSET_KEY in handed[0].offset  # the signal row, after it started
    (marker,) = coordinator.after_poll()  # the window is queued; the context got the table's end point
    assert type(marker) is PositionMarker and '"max_key":["3"]' in marker.offset[OFFSET_KEY]
    window = coordinator.snapshot.window_id
    assert window is not None
    change = row(2, "updated", "u", tx=11).replace(offset={"lsn": 11, "txId": 11})
    segments = coordinator.feed([Watermark.of(PARTITION, {"lsn": 12}, window, "open"), change])
    records = flat(segments)
    assert [r.key for r in records] == [{"id": 2}]  # the WAL watermark is no event
    segments = coordinator.feed([Watermark.of(PARTITION, {"lsn": 13, "txId": 13}, window, "close")])
    released = flat(segments)
    assert [r.key["id"] for r in released] == [1, 3]  # 2 changed after the read
    before = released[0].offset[OFFSET_KEY]
    assert '"last_key":null' in before  # the rows carry the context before their chunk
    tail = coordinator.after_poll()  # public.u is empty: the snapshot ends with no row to carry that
    assert [type(r) for r in tail] == [PositionMarker]
    assert tail[0].offset == {"lsn": 13, "txId": 13}  # the close's position, no context
    assert coordinator.snapshot.context is None
    coordinator.close()


def test_a_signal_joining_a_running_snapshot_renames_it_as_debezium_does_and_a_replay_adds_nothing() -> None:
    """Debezium takes a second execute-snapshot's tables into the running snapshot and reports it
    under the second signal's id from then on, with no STARTED for it
    (``addDataCollectionNamesToSnapshot`` sets the context's correlation id). After a restart the
    stream replays both signals from the committed offset: neither may add its tables again."""

    first = signal_row("s1", "execute-snapshot", '{"data-collections": ["public.t"]}', 10)
    second = signal_row("s2", "execute-snapshot", '{"data-collections": ["public.u"]}', 11)
    coordinator = make_coordinator()
    (handed,) = coordinator.feed([first, second])
    context = coordinator.snapshot.context
    assert context is not None
    assert (context.id, context.signals, context.all_tables) == ("s2", ("s1", "s2"), ("public.t", "public.u"))
    assert [(n["type"], n["id"]) for n in coordinator.bus.since(0)[0]] == [("STARTED", "s1")]
    assert '"id":"s2"' in handed[-1].offset[OFFSET_KEY]
    coordinator.close()

    restarted = make_coordinator(resume=handed[-1].offset)
    resumed = restarted.snapshot.context
    assert resumed == context
    restarted.feed([first, second])  # replayed from before the signals
    assert restarted.snapshot.context == resumed  # nothing added twice
    restarted.close()


def test_a_context_from_an_offset_written_before_joins_were_recorded_knows_its_own_signal() -> None:
    offset = {OFFSET_KEY: '{"id":"s1","tables":[],"all_tables":["public.t"],"max_key":null,"last_key":null}'}
    context = SnapshotContext.from_offset(offset)
    assert context is not None and context.signals == () and context.acted_on("s1") and not context.acted_on("s2")
    joined = context.joined("s2")
    assert (joined.id, joined.signals) == ("s2", ("s1", "s2"))
    assert SnapshotContext.from_offset(joined.to_offset()) == joined


def test_a_signal_naming_no_table_is_rejected_and_its_row_still_handed_over(coordinator: SnapshotCoordinator) -> None:
    (handed,) = coordinator.feed([signal_row("bad", "execute-snapshot", '{"data-collections": ["public.x"]}', 5)])
    assert [r.key for r in handed] == [{"id": "bad"}] and OFFSET_KEY not in handed[0].offset
    problems = [n for n in coordinator.bus.since(0)[0] if n["type"] == "REJECTED"]
    assert "no captured table matches" in problems[0]["additional_data"]["problem"]
    coordinator.close()


class LostCatalog(TwoTables):
    """The catalog connection is gone when the snapshot starts (its row estimate fails)."""

    def estimate_rows(self, table: str) -> int:
        raise RetriableError("server closed the connection unexpectedly")


def test_a_signal_the_source_cannot_act_on_now_is_rejected_and_the_stream_goes_on() -> None:
    """As Debezium's SignalProcessor: an action that fails is logged (here also a REJECTED
    notification naming the cause) and the stream's records go on - raising would lose them."""
    coordinator = make_coordinator(LostCatalog())
    execute = signal_row("s1", "execute-snapshot", '{"data-collections": ["public.t"]}', 10)
    after = row(2, "after", "u", tx=11).replace(offset={"lsn": 11, "txId": 11})
    records = flat(coordinator.feed([execute, after]))
    assert [r.key for r in records] == [{"id": "s1"}, {"id": 2}]
    (problem,) = [n for n in coordinator.bus.since(0)[0] if n["type"] == "REJECTED"]
    assert "server closed the connection" in problem["additional_data"]["problem"]
    assert "send it again" in problem["additional_data"]["problem"]
    assert coordinator.snapshot.context is None
    coordinator.close()


def test_the_coordinator_imports_no_source_and_no_database_driver() -> None:
    """A MySQL source reuses it as it is: nothing of PostgreSQL's comes with it."""
    code = (
        "import sys; import airflow_cdc.engine.snapshots.coordinator; "
        "print(sorted(m for m in sys.modules if m.startswith(('psycopg', 'airflow_cdc.engine.sources'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
