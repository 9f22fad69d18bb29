"""The source-task lifecycle (``engine/sources/lifecycle.py``) on scripted source parts: each
phase change, the moves the table refuses, and the behaviour decided once for every source
(keep-alive while the stream waits, where a snapshot ends, when a blocking snapshot starts).

The lifecycle, the snapshot coordinator and the notifications are the real ones; only the
database is scripted: its stream and snapshots are lists of batches given by each test, and it
logs what the lifecycle asks of it. Both sources' ways of ending a snapshot are covered (the
last batch ends with the marker where the stream goes on; the batches running out)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_cdc.engine.errors import IllegalStateError, RetriableError
from airflow_cdc.engine.notifications import InitialSnapshotNotifications, NotificationBus
from airflow_cdc.engine.positions import Phase
from airflow_cdc.engine.records import Offset, PositionMarker, SourceRecord
from airflow_cdc.engine.signals.channels import InProcessChannel
from airflow_cdc.engine.signals.signal import WINDOW_CLOSE, WINDOW_OPEN, SignalError
from airflow_cdc.engine.snapshots.coordinator import SnapshotCoordinator
from airflow_cdc.engine.snapshots.incremental import OFFSET_KEY
from airflow_cdc.engine.sources.lifecycle import (
    ALLOWED_TRANSITIONS,
    Beginning,
    SnapshotRun,
    SourceLifecycle,
    SourcePhase,
)
from tests.unit.test_incremental_dedup import ScriptedSource
from tests.unit.test_snapshot_coordinator import SETTINGS

P = SourcePhase
PARTITION = {"server": "shop"}
SIGNALS = "shop.public.debezium_signal"
TOPIC = "shop.public.t"


def row(key: int, *, snapshot: bool = False, pos: int = 1) -> SourceRecord:
    offset: Offset = {"pos": pos, "snapshot": True} if snapshot else {"pos": pos}
    value = {"op": "r" if snapshot else "c", "after": {"id": key}}
    return SourceRecord(TOPIC, {"id": key}, value, PARTITION, offset)


def marker(pos: int) -> PositionMarker:
    return PositionMarker.at(PARTITION, {"pos": pos})


def signal(row_id: str, kind: str, data: dict[str, Any] | None = None, pos: int = 1) -> SourceRecord:
    """A row of the signal table, as the stream delivers it."""
    after = {"id": row_id, "type": kind, "data": None if data is None else json.dumps(data)}
    return SourceRecord(SIGNALS, {"id": row_id}, {"op": "c", "after": after}, PARTITION, {"pos": pos})


def blocking_signal(row_id: str, pos: int = 1) -> SourceRecord:
    return signal(row_id, "execute-snapshot", {"data-collections": ["public.t"], "type": "blocking"}, pos)


#: How a snapshot's batches end: the last rows and the marker where the stream goes on
#: (PostgreSQL's, and MySQL's when the rows do not fill the last batch), the marker alone in a
#: batch (MySQL's when they do), or no marker at all (the batches just run out).
ENDS = ["marker", "marker-alone", "exhausted"]


def snapshot_batches(keys: Sequence[int], *, end: str, per_batch: int = 2) -> list[list[SourceRecord]]:
    """A snapshot's batches of ``per_batch`` rows, ending as ``end`` says (see ENDS)."""
    batches = [[row(k, snapshot=True) for k in keys[i : i + per_batch]] for i in range(0, len(keys), per_batch)]
    if end == "marker" and batches:
        batches[-1].append(marker(100))
    elif end != "exhausted":
        batches.append([marker(100)])
    return batches


@dataclass
class ScriptedParts:
    """A source whose stream is ``changes`` (one batch per read, ``[]`` once they run out) and
    whose blocking snapshots are ``blocking`` (batches, or an error raised on opening; a
    SignalError among the batches is raised when the read reaches it)."""

    changes: list[list[SourceRecord]] = field(default_factory=list)
    blocking: list[SnapshotRun] | SignalError | None = None
    calls: list[str] = field(default_factory=list)
    start_failures: int = 0  # start_streaming fails (retriably) this many times first
    streaming: bool = False
    rows_read: dict[str, int] = field(default_factory=dict)

    def run(self, name: str, batches: Sequence[list[SourceRecord] | SignalError]) -> SnapshotRun:
        self.rows_read[name] = 0

        def read() -> Iterator[list[SourceRecord]]:
            for batch in batches:
                if isinstance(batch, SignalError):
                    raise batch
                self.calls.append(f"read {name}")
                self.rows_read[name] += sum(1 for r in batch if type(r) is not PositionMarker)
                yield batch

        return SnapshotRun(read(), lambda: self.rows_read[name], lambda: self.calls.append(f"close {name}"))

    def start_streaming(self) -> None:
        self.calls.append("start streaming")
        if self.start_failures:
            self.start_failures -= 1
            raise RetriableError("START_REPLICATION failed: the server is restarting")
        self.streaming = True

    def read_changes(self) -> list[SourceRecord]:
        assert self.streaming, "the stream is read only once it is started"
        self.calls.append("read changes")
        return self.changes.pop(0) if self.changes else []

    def blocking_snapshot(self, tables: Sequence[str]) -> SnapshotRun:
        self.calls.append(f"open blocking {','.join(tables)}")
        if isinstance(self.blocking, SignalError):
            raise self.blocking
        assert self.blocking, "the test gave no blocking snapshot"
        return self.blocking.pop(0)

    def keep_alive(self) -> None:
        self.calls.append("keep alive")

    def confirm(self, offset: Offset) -> None:
        self.calls.append(f"confirm {offset['pos']}")

    def newest_position(self) -> Offset | None:
        return {"pos": 42}

    def close(self) -> None:
        self.calls.append("close")


@dataclass
class Task:
    """A lifecycle over scripted parts, with the real coordinator and notifications."""

    parts: ScriptedParts
    lifecycle: SourceLifecycle
    coordinator: SnapshotCoordinator
    initial_snapshot: InitialSnapshotNotifications
    bus: NotificationBus

    def notifications(self, aggregate: str | None = None) -> list[str]:
        seen = self.bus.since(0)[0]
        return [n["type"] for n in seen if aggregate is None or n["aggregate_type"] == aggregate]

    def keys(self, records: list[SourceRecord]) -> list[Any]:
        return [r.key["id"] if r.key else None for r in records if type(r) is not PositionMarker]


def make_task(source: ScriptedSource) -> Task:
    bus = NotificationBus(("api",))
    coordinator = SnapshotCoordinator(
        source=source,
        position=lambda: {"pos": 0},
        partition=PARTITION,
        settings=SETTINGS,
        bus=bus,
        connector_name="shop",
        signals=InProcessChannel(),
        resume=None,
        signal_topic=SIGNALS,
    )
    parts = ScriptedParts()
    notifications = InitialSnapshotNotifications(bus, "shop")
    lifecycle = SourceLifecycle(
        "test", parts, coordinator=coordinator, initial_snapshot=notifications, poll_interval_s=0
    )
    return Task(parts, lifecycle, coordinator, notifications, bus)


@pytest.fixture
def task() -> Iterator[Task]:
    made = make_task(ScriptedSource())
    yield made
    made.lifecycle.stop()


def initial(task: Task, keys: Sequence[int], *, end: str = "marker", stream: bool = True) -> None:
    task.initial_snapshot.started(["public.t"])  # the source's to say, naming its tables
    task.lifecycle.begin(Beginning(task.parts.run("initial", snapshot_batches(keys, end=end)), stream))


# -- STARTING -> ... --------------------------------------------------------------------------------
@pytest.mark.parametrize("end", ENDS)
def test_starting_snapshotting_streaming(task: Task, end: str) -> None:
    initial(task, [1, 2, 3], end=end)
    assert task.lifecycle.phase is P.SNAPSHOTTING
    assert task.lifecycle.position(PARTITION).phase is Phase.SNAPSHOTTING
    polled: list[SourceRecord] = []
    while task.lifecycle.phase is P.SNAPSHOTTING:
        polled += task.lifecycle.poll()
    assert task.keys(polled) == [1, 2, 3]
    assert task.parts.calls.count("start streaming") == 1
    # The stream starts at the poll after the snapshot's last batch, never before it is read.
    assert task.parts.calls.index("start streaming") > task.parts.calls.index("close initial")
    assert task.lifecycle.phase is P.STREAMING
    assert task.lifecycle.position(PARTITION).current == {"pos": 42}
    task.parts.changes = [[row(7)]]
    assert task.keys(task.lifecycle.poll()) == [7]


def test_the_snapshot_ends_in_the_poll_that_returns_its_last_batch(task: Task) -> None:
    initial(task, [1, 2, 3])
    first, last = task.lifecycle.poll(), task.lifecycle.poll()
    assert task.keys(first) == [1, 2] and task.keys(last) == [3] and type(last[-1]) is PositionMarker
    assert task.parts.calls[-1] == "close initial"  # read and closed with its last batch
    # Committing that batch's marker (before any other poll) completes the initial snapshot.
    task.lifecycle.commit({"shop": last[-1].offset})
    assert task.notifications("Initial Snapshot") == ["STARTED", "COMPLETED"]
    assert task.parts.calls[-1] == "confirm 100"


def test_snapshot_offsets_are_neither_confirmed_nor_complete_the_snapshot(task: Task) -> None:
    initial(task, [1, 2, 3])
    batch = task.lifecycle.poll()
    task.lifecycle.commit({"shop": batch[-1].offset})
    assert not any(c.startswith("confirm") for c in task.parts.calls)
    assert task.notifications("Initial Snapshot") == ["STARTED"]


def test_starting_snapshotting_finished_never_streams(task: Task) -> None:
    initial(task, [1, 2, 3], stream=False)  # snapshot.mode=initial_only
    task.lifecycle.poll()
    task.lifecycle.poll()
    assert task.lifecycle.phase is P.FINISHED
    assert task.lifecycle.position(PARTITION).phase is Phase.FINISHED
    assert task.lifecycle.poll() == []  # nothing more to read
    assert "start streaming" not in task.parts.calls


def test_starting_streaming_skips_the_initial_snapshot(task: Task) -> None:
    task.lifecycle.begin(Beginning(None, stream=True))
    assert task.lifecycle.phase is P.STREAMING
    assert task.parts.calls == ["start streaming"]
    assert task.notifications("Initial Snapshot") == ["SKIPPED"]


def test_starting_finished_when_the_snapshot_was_done_before(task: Task) -> None:
    task.lifecycle.begin(Beginning(None, stream=False))
    assert task.lifecycle.phase is P.FINISHED
    assert task.parts.calls == []
    assert task.notifications("Initial Snapshot") == ["SKIPPED"]


def test_a_stream_that_fails_to_start_after_the_snapshot_loses_no_row_and_is_started_again(task: Task) -> None:
    task.parts.start_failures = 1
    initial(task, [1, 2, 3])
    polled = task.lifecycle.poll() + task.lifecycle.poll()
    assert task.keys(polled) == [1, 2, 3] and type(polled[-1]) is PositionMarker  # the last batch came out
    with pytest.raises(RetriableError):
        task.lifecycle.poll()  # the engine retries a poll that failed retriably
    assert task.lifecycle.phase is P.SNAPSHOTTING
    assert task.lifecycle.poll() == []
    assert task.lifecycle.phase is P.STREAMING and task.parts.calls.count("start streaming") == 2


# -- STREAMING <-> BLOCKING --------------------------------------------------------------------------
def stream_with_blocking_request(task: Task) -> None:
    task.lifecycle.begin(Beginning(None, stream=True))
    task.parts.changes = [[row(1), blocking_signal("b1")], [row(2)]]
    polled = task.lifecycle.poll()
    assert task.keys(polled) == [1, "b1"]
    assert task.notifications("Blocking Snapshot") == ["STARTED"]


@pytest.mark.parametrize("end", ENDS)
def test_streaming_blocking_streaming(task: Task, end: str) -> None:
    task.parts.blocking = [task.parts.run("blocking", snapshot_batches([10, 11, 12], end=end))]
    stream_with_blocking_request(task)
    assert task.lifecycle.poll() == []  # the next poll opens it, before reading any change
    assert task.lifecycle.phase is P.BLOCKING
    assert task.lifecycle.position(PARTITION).phase is Phase.SNAPSHOTTING
    assert task.parts.calls[-1] == "open blocking public.t"
    polled: list[SourceRecord] = []
    while task.lifecycle.phase is P.BLOCKING:
        polled += task.lifecycle.poll()
    assert task.keys(polled) == [10, 11, 12]
    assert task.notifications("Blocking Snapshot") == ["STARTED", "COMPLETED"]
    done = [n for n in task.bus.since(0)[0] if n["type"] == "COMPLETED"]
    assert done[0]["additional_data"]["total_rows_scanned"] == "3"
    # The stream goes on where it paused.
    assert task.keys(task.lifecycle.poll()) == [2]


def test_the_stream_is_kept_alive_at_every_poll_of_a_snapshot(task: Task) -> None:
    task.parts.blocking = [task.parts.run("blocking", snapshot_batches([10, 11, 12, 13], end="marker"))]
    stream_with_blocking_request(task)
    task.lifecycle.poll()
    task.parts.calls.clear()
    while task.lifecycle.phase is P.BLOCKING:
        task.lifecycle.poll()
    reads = [i for i, c in enumerate(task.parts.calls) if c == "read blocking"]
    assert len(reads) == 2 and all(task.parts.calls[i - 1] == "keep alive" for i in reads)


def test_a_blocking_snapshot_completes_in_the_poll_of_its_last_batch(task: Task) -> None:
    task.parts.blocking = [task.parts.run("blocking", snapshot_batches([10, 11, 12], end="marker"))]
    stream_with_blocking_request(task)
    task.lifecycle.poll()
    task.lifecycle.poll()
    assert task.notifications("Blocking Snapshot") == ["STARTED"]
    last = task.lifecycle.poll()
    assert task.keys(last) == [12] and task.notifications("Blocking Snapshot") == ["STARTED", "COMPLETED"]
    assert task.lifecycle.phase is P.STREAMING


def test_a_blocking_snapshot_the_source_refuses_is_rejected_and_streaming_goes_on(task: Task) -> None:
    task.parts.blocking = SignalError("the schema of public.t changed after the stream's position")
    stream_with_blocking_request(task)
    assert task.lifecycle.poll() == []
    assert task.lifecycle.phase is P.STREAMING
    rejected = [n for n in task.bus.since(0)[0] if n["type"] == "REJECTED"]
    assert rejected[0]["id"] == "b1" and "schema of public.t changed" in rejected[0]["additional_data"]["problem"]
    assert task.keys(task.lifecycle.poll()) == [2]


def test_a_blocking_snapshot_interrupted_by_the_source_closes_rejects_and_streams_on(task: Task) -> None:
    batches: list[list[SourceRecord] | SignalError] = [
        [row(10, snapshot=True)],
        SignalError("public.t was rebuilt after the snapshot's point: send the blocking snapshot again"),
    ]
    task.parts.blocking = [task.parts.run("blocking", batches)]
    stream_with_blocking_request(task)
    task.lifecycle.poll()
    assert task.keys(task.lifecycle.poll()) == [10]
    assert task.lifecycle.poll() == []
    assert task.lifecycle.phase is P.STREAMING and "close blocking" in task.parts.calls
    assert task.notifications("Blocking Snapshot") == ["STARTED"]
    (rejected,) = [n for n in task.bus.since(0)[0] if n["type"] == "REJECTED"]
    assert "rebuilt" in rejected["additional_data"]["problem"]
    assert task.keys(task.lifecycle.poll()) == [2]


def test_an_error_of_the_initial_snapshot_is_not_taken_for_a_signal(task: Task) -> None:
    run = task.parts.run("initial", [SignalError("not a blocking snapshot's")])
    task.lifecycle.begin(Beginning(run, stream=True))
    with pytest.raises(SignalError):
        task.lifecycle.poll()


def test_a_blocking_snapshot_starts_once_everything_polled_before_it_is_handed_over(task: Task) -> None:
    """An incremental snapshot's last window closes in the same batch as a blocking signal: the
    chunk's rows (and the stream's records after them) go out before the blocking snapshot
    opens - its rows carry the stream's position, after theirs."""
    task.parts.blocking = [task.parts.run("blocking", snapshot_batches([10], end="marker"))]
    task.lifecycle.begin(Beginning(None, stream=True))
    task.parts.changes = [[signal("i1", "execute-snapshot", {"data-collections": ["public.t"]})]]
    task.lifecycle.poll()  # the incremental snapshot starts; its window is read
    window = task.coordinator.snapshot.window_id
    assert window is not None
    task.parts.changes = [
        [
            signal(f"{window}-open", WINDOW_OPEN, None, 2),
            signal(f"{window}-close", WINDOW_CLOSE, None, 3),
            row(5, pos=4),
            blocking_signal("b1", 5),
        ]
    ]
    handed: list[list[Any]] = []
    while "open blocking public.t" not in task.parts.calls:
        handed.append(task.keys(task.lifecycle.poll()))
    keys = [k for poll in handed for k in poll]
    assert [k for k in keys if k in (1, 2, 3)] == [1, 2, 3]  # the chunk's rows (ScriptedSource reads 1..3)
    assert keys.index(5) > keys.index(3) and "b1" in keys  # all handed over before the snapshot opened
    assert task.lifecycle.phase is P.BLOCKING


def test_a_clean_stop_drains_what_was_read_and_the_marker_that_ends_the_snapshot(task: Task) -> None:
    """The snapshot's last window closes and COMPLETED is published in one poll, whose released
    rows wait for later polls: a stop before those polls takes them all, the last without the
    finished snapshot's context - else the next start resumes the snapshot."""
    task.lifecycle.begin(Beginning(None, stream=True))
    task.parts.changes = [[signal("i1", "execute-snapshot", {"data-collections": ["public.t"]})]]
    task.lifecycle.poll()
    window = task.coordinator.snapshot.window_id
    assert window is not None
    task.parts.changes = [
        [
            signal(f"{window}-open", WINDOW_OPEN, None, 2),
            signal(f"{window}-close", WINDOW_CLOSE, None, 3),
            row(5, pos=4),
        ]
    ]
    first = task.lifecycle.poll()
    assert "COMPLETED" in task.notifications("Incremental Snapshot")
    held = task.lifecycle.drain()
    keys = task.keys(first + held)
    assert [k for k in keys if k in (1, 2, 3, 5)] == [1, 2, 3, 5]
    assert held and all(OFFSET_KEY in r.offset for r in first)  # the rows polled carry the open snapshot
    assert not held[-1].offset.get(OFFSET_KEY)  # the last one drained: the snapshot is over
    assert task.lifecycle.drain() == []  # taken once


@dataclass
class LosingReads(ScriptedSource):
    """The first ``losses`` window reads lose their connection, as a source reports it (the
    watermarks they wrote, if any, still reach the stream)."""

    losses: int = 1

    def read_window(self, *args: Any, **kwargs: Any) -> Any:
        if self.losses:
            self.losses -= 1
            raise RetriableError("incremental snapshot: the database went away: terminating connection")
        return super().read_window(*args, **kwargs)


def window_read_over(task: Task) -> str:
    """The id of the window being read, once its read (on the reader thread) is over."""
    window = task.coordinator.snapshot._windows.first  # the read's future: no public view of it
    assert window is not None
    window.read.exception(timeout=10)  # waits; the outcome is the poll's to see
    return window.id


@pytest.mark.parametrize("watermarks_streamed", [False, True])
def test_stream_records_of_a_poll_whose_window_read_failed_are_handed_over_once_in_order(
    watermarks_streamed: bool,
) -> None:
    """A window's read lost its connection: the poll that notices it fails retriably (the engine
    retries it), but the stream's records it read are handed over all the same - by the retried
    poll, in order, once; the window is read again and the snapshot completes. Whether the lost
    read's watermarks reached the stream (a connection lost after the close was written) or not."""
    task = make_task(LosingReads())
    failed: list[RetriableError] = []

    def poll() -> list[SourceRecord]:  # as the engine does: a poll that failed retriably is retried
        try:
            return task.lifecycle.poll()
        except RetriableError as exc:
            failed.append(exc)
            return []

    try:
        task.lifecycle.begin(Beginning(None, stream=True))
        task.parts.changes = [[signal("i1", "execute-snapshot", {"data-collections": ["public.t"]})]]
        handed = poll()  # the snapshot starts; its first window is read, and fails
        lost = window_read_over(task)
        stream = [row(5, pos=2), row(6, pos=3), row(7, pos=4)]
        if watermarks_streamed:
            stream = [
                signal(f"{lost}-open", WINDOW_OPEN, None, 2),
                *stream,
                signal(f"{lost}-close", WINDOW_CLOSE, None, 4),
            ]
        task.parts.changes = [stream]
        for _ in range(20):
            handed += poll()
            if "COMPLETED" in task.notifications("Incremental Snapshot"):
                break
            window = task.coordinator.snapshot.window_id
            if window is not None and not task.parts.changes:
                window_read_over(task)
                task.parts.changes = [
                    [signal(f"{window}-open", WINDOW_OPEN, None, 5), signal(f"{window}-close", WINDOW_CLOSE, None, 6)]
                ]
        handed += task.lifecycle.drain()
        keys = task.keys(handed)
        assert [k for k in keys if k in (5, 6, 7)] == [5, 6, 7]  # none lost, none twice, in order
        assert [k for k in keys if k in (1, 2, 3)] == [1, 2, 3]  # the chunk, read again
        assert "COMPLETED" in task.notifications("Incremental Snapshot")
        assert len(failed) == 1 and "went away" in str(failed[0])  # one lost read, one failed poll
    finally:
        task.lifecycle.stop()


def test_nothing_is_drained_outside_the_stream(task: Task) -> None:
    initial(task, [1, 2, 3])
    assert task.lifecycle.drain() == []


# -- ... -> STOPPED ---------------------------------------------------------------------------------
def reach(task: Task, phase: SourcePhase) -> None:
    if phase is P.SNAPSHOTTING:
        initial(task, [1, 2, 3])
    elif phase is P.STREAMING:
        task.lifecycle.begin(Beginning(None, stream=True))
    elif phase is P.FINISHED:
        task.lifecycle.begin(Beginning(None, stream=False))
    elif phase is P.BLOCKING:
        task.parts.blocking = [task.parts.run("blocking", snapshot_batches([10, 11, 12], end="marker"))]
        stream_with_blocking_request(task)
        task.lifecycle.poll()
    assert task.lifecycle.phase is phase


@pytest.mark.parametrize("phase", [P.STARTING, P.SNAPSHOTTING, P.STREAMING, P.BLOCKING, P.FINISHED])
def test_every_phase_stops_once_and_for_good(task: Task, phase: SourcePhase) -> None:
    reach(task, phase)
    task.lifecycle.stop()
    task.lifecycle.stop()  # a failed start is stopped, then the runner stops the task again
    assert task.lifecycle.phase is P.STOPPED
    assert task.parts.calls.count("close") == 1 and task.parts.calls[-1] == "close"
    assert task.lifecycle.position(PARTITION).phase is Phase.STOPPED
    with pytest.raises(IllegalStateError, match="polled in STOPPED"):
        task.lifecycle.poll()
    with pytest.raises(IllegalStateError, match="cannot move STARTING -> "):
        task.lifecycle.begin(Beginning(None, stream=True))
    task.lifecycle.commit({"shop": {"pos": 9}})
    task.lifecycle.idle()
    assert task.parts.calls[-1] == "close"  # after the stop, nothing reaches the source


def test_a_snapshot_stopped_part_way_is_aborted(task: Task) -> None:
    initial(task, [1, 2, 3])
    task.lifecycle.poll()
    task.lifecycle.stop()
    assert task.notifications("Initial Snapshot") == ["STARTED", "ABORTED"]


def test_the_source_closes_even_when_the_coordinator_fails_to(task: Task) -> None:
    reach(task, P.STREAMING)

    def broken() -> None:
        raise RuntimeError("signal channel refused to close")

    task.coordinator.close = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        task.lifecycle.stop()
    assert task.parts.calls[-1] == "close"


# -- the table --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expected,requested",
    [(a, b) for a in SourcePhase for b in SourcePhase if b not in ALLOWED_TRANSITIONS[a]],
)
def test_a_move_not_in_the_table_is_refused_naming_what_is_allowed(
    task: Task, expected: SourcePhase, requested: SourcePhase
) -> None:
    if expected is P.STOPPED:
        task.lifecycle.stop()
    else:
        reach(task, expected)
    with pytest.raises(IllegalStateError, match=f"{expected.value} -> {requested.value} is not an allowed") as info:
        task.lifecycle.transition(expected, requested)
    assert task.lifecycle.phase is expected  # nothing changed
    assert info.value.change.requested == requested.value


def test_a_move_from_a_phase_the_task_is_not_in_is_refused(task: Task) -> None:
    reach(task, P.STREAMING)
    with pytest.raises(IllegalStateError, match="cannot move SNAPSHOTTING -> STREAMING, the task is in STREAMING"):
        task.lifecycle.transition(P.SNAPSHOTTING, P.STREAMING)


def test_every_phase_but_stopped_can_stop_and_stopped_is_final() -> None:
    assert all(P.STOPPED in ALLOWED_TRANSITIONS[p] for p in SourcePhase if p is not P.STOPPED)
    assert ALLOWED_TRANSITIONS[P.STOPPED] == frozenset()


# -- between polls ----------------------------------------------------------------------------------
@pytest.mark.parametrize("phase", [P.SNAPSHOTTING, P.STREAMING, P.BLOCKING, P.FINISHED])
def test_a_paused_engine_keeps_the_source_alive_in_every_phase(task: Task, phase: SourcePhase) -> None:
    reach(task, phase)
    task.parts.calls.clear()
    task.lifecycle.idle()
    assert task.parts.calls == ["keep alive"]


def test_metrics_count_the_rows_of_the_snapshot_being_read(task: Task) -> None:
    initial(task, [1, 2, 3])
    assert task.lifecycle.metrics() == {"snapshot_rows_scanned": 0}
    task.lifecycle.poll()
    assert task.lifecycle.metrics() == {"snapshot_rows_scanned": 2}
    task.lifecycle.poll()
    assert task.lifecycle.metrics() == {}
