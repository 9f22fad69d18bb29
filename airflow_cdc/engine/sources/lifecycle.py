"""One source task's lifecycle, the same for every database: an initial snapshot or not, then
streaming, with blocking snapshots in between and the incremental-snapshot coordinator fed by
every streamed batch. One phase enum, one allowed-transitions table, one guarded transition
(as the engine's own, ``engine/state.py``).

The database-specific work comes through :class:`SourceParts`: start streaming, read a batch
of changes, open a blocking snapshot, keep the source alive while the stream is not read,
confirm a committed offset. An initial or blocking snapshot is a :class:`SnapshotRun`.

Behaviour decided here once for every source (the sources had drifted apart):

* **Keep-alive while the stream is not read.** Every poll of a snapshot (initial or blocking)
  and every idle call of a paused engine calls :meth:`SourceParts.keep_alive`. PostgreSQL's
  WAL sender cuts a replication connection that sent no standby status update for
  ``wal_sender_timeout``; MySQL's binlog connection needs nothing (see its task), but the rule
  is one, so a source cannot forget it.
* **A snapshot ends in the poll that returns its last batch**, the one ending with the marker
  where the stream goes on. The initial snapshot's "read" is then noted before that marker can
  be committed (a commit first would hold back COMPLETED until the next one, which an idle
  source may never make), and a blocking snapshot's COMPLETED names every row it read. The
  stream after an initial snapshot starts at the next poll: a failure to start it then fails a
  poll that returns nothing, never the one carrying the snapshot's last rows.
* **A blocking snapshot starts at the beginning of a stream poll, once everything polled
  before it is handed over.** Its rows carry the stream's position: handing over older records
  after them would let a commit of those rows skip the older ones. And nothing is read from the
  stream in a poll whose opening of the snapshot fails, so a retried poll loses no change.
* **Nothing read from the stream is dropped by a failed poll.** An incremental snapshot's step
  that fails after the stream was read (a window read whose connection was lost) fails the poll,
  and the records read wait for the retried poll (``_poll_stream``).
* **A snapshot the source cannot serve** (SignalError from opening or reading a blocking one)
  answers its signal REJECTED with the reason, and streaming goes on.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from airflow_cdc.engine.errors import IllegalStateError
from airflow_cdc.engine.notifications import InitialSnapshotNotifications
from airflow_cdc.engine.positions import Phase, SourcePosition
from airflow_cdc.engine.records import Offset, Partition, PositionMarker, SourceRecord
from airflow_cdc.engine.signals.signal import SignalError
from airflow_cdc.engine.snapshots.coordinator import BlockingSnapshot, SnapshotCoordinator
from airflow_cdc.engine.snapshots.handover import HandOver

log = logging.getLogger(__name__)


class SourcePhase(enum.Enum):
    STARTING = "STARTING"
    #: Reading the initial snapshot; the stream is not read yet.
    SNAPSHOTTING = "SNAPSHOTTING"
    #: Reading the stream; signals and incremental snapshots run meanwhile.
    STREAMING = "STREAMING"
    #: Reading a blocking snapshot; the stream waits where it stood.
    BLOCKING = "BLOCKING"
    #: Nothing more to read (``snapshot.mode=initial_only``).
    FINISHED = "FINISHED"
    STOPPED = "STOPPED"


P = SourcePhase

#: Every legal move. Each phase may go to STOPPED (a stop, or a failed start); STOPPED is final: a
#: task started again builds a new lifecycle.
ALLOWED_TRANSITIONS: dict[SourcePhase, frozenset[SourcePhase]] = {
    P.STARTING: frozenset({P.SNAPSHOTTING, P.STREAMING, P.FINISHED, P.STOPPED}),
    P.SNAPSHOTTING: frozenset({P.STREAMING, P.FINISHED, P.STOPPED}),
    P.STREAMING: frozenset({P.BLOCKING, P.STOPPED}),
    P.BLOCKING: frozenset({P.STREAMING, P.STOPPED}),
    P.FINISHED: frozenset({P.STOPPED}),
    P.STOPPED: frozenset(),
}

#: What status and sensors see of each phase (``SourceTask.position``).
_REPORTED = {
    P.STARTING: Phase.STARTING,
    P.SNAPSHOTTING: Phase.SNAPSHOTTING,
    P.STREAMING: Phase.STREAMING,
    P.BLOCKING: Phase.SNAPSHOTTING,
    P.FINISHED: Phase.FINISHED,
    P.STOPPED: Phase.STOPPED,
}


@dataclass(frozen=True)
class SnapshotRun:
    """One snapshot as its source reads it. ``batches``: its records, table after table; the
    last batch ends with the position marker where the stream goes on (the snapshot ends with
    that batch, or when the batches run out), and no other batch holds a marker. ``rows``: the
    rows read so far (read from other threads: no I/O). ``close``: release what it holds."""

    batches: Iterator[list[SourceRecord]]
    rows: Callable[[], int]
    close: Callable[[], None]


@dataclass(frozen=True)
class Beginning:
    """Where a task begins, as its source decided from the committed offset: an initial
    snapshot to read first (None: none is needed), and whether the stream is read afterwards
    (False: ``snapshot.mode=initial_only``)."""

    snapshot: SnapshotRun | None
    stream: bool


class SourceParts(Protocol):
    """What a database supplies to the lifecycle. All called from the task's thread, except
    :meth:`newest_position` (any thread: read fields, no I/O)."""

    def start_streaming(self) -> None:
        """Start reading the stream where the snapshot (or the committed offset) left it."""

    def read_changes(self) -> list[SourceRecord]:
        """The next batch of the stream: records in source order, position markers included;
        ``[]`` after ``poll.interval.ms`` without any."""

    def blocking_snapshot(self, tables: Sequence[str]) -> SnapshotRun:
        """Open a blocking snapshot of these tables (``schema.table`` / ``database.table``), read
        while the stream waits. SignalError - from here or from its batches - when the source
        cannot serve it: the signal is rejected with the reason."""

    def keep_alive(self) -> None:
        """The stream is not read now (a snapshot, a paused engine): keep the source's stream
        connection alive if it needs it."""

    def confirm(self, offset: Offset) -> None:
        """``offset`` (a streamed one, not a snapshot's) is durable downstream: the source may
        release what precedes it."""

    def newest_position(self) -> Offset | None:
        """The newest position the stream has seen, for status (None: unknown)."""

    def close(self) -> None:
        """Release everything the task opened, a snapshot in progress included, in the order the
        source needs. Must work after a start that failed half-way."""


def ends_snapshot(batch: list[SourceRecord]) -> bool:
    """The last batch of a snapshot: it ends with the marker where the stream goes on."""
    return bool(batch) and isinstance(batch[-1], PositionMarker)


class SourceLifecycle:
    """The phases of one source task (``name``: for the log). Changed only on the task's thread;
    :meth:`position` and :meth:`metrics` may be called from any thread."""

    def __init__(
        self,
        name: str,
        parts: SourceParts,
        *,
        coordinator: SnapshotCoordinator,
        initial_snapshot: InitialSnapshotNotifications,
        poll_interval_s: float,
    ) -> None:
        self._name, self._parts, self._coordinator = name, parts, coordinator
        self._initial, self._poll_interval_s = initial_snapshot, poll_interval_s
        self._phase = SourcePhase.STARTING
        self._handover = HandOver()  # polled but not yet handed over (a released chunk)
        self._run: SnapshotRun | None = None  # the snapshot being read (SNAPSHOTTING, BLOCKING)
        self._stream_after_snapshot = True
        self._blocking_signal = ""  # the signal id of the blocking snapshot being read

    @property
    def phase(self) -> SourcePhase:
        return self._phase

    def transition(self, expected: SourcePhase, requested: SourcePhase) -> None:
        """Move from ``expected`` to ``requested``, or raise without changing anything."""
        refusal = self._refusal(expected, requested)
        if refusal is not None:
            raise refusal
        self._phase = requested
        log.info("source task %r: %s -> %s", self._name, expected.value, requested.value)

    def _refusal(self, expected: SourcePhase, requested: SourcePhase) -> IllegalStateError | None:
        actual = self._phase
        if actual is not expected:
            return IllegalStateError(
                f"source task {self._name!r}: cannot move {expected.value} -> {requested.value}, "
                f"the task is in {actual.value}",
                expected=expected.value,
                actual=actual.value,
                requested=requested.value,
            )
        if requested not in ALLOWED_TRANSITIONS[expected]:
            allowed = sorted(s.value for s in ALLOWED_TRANSITIONS[expected]) or "none, it is final"
            return IllegalStateError(
                f"source task {self._name!r}: {expected.value} -> {requested.value} is not an allowed "
                f"transition (allowed from {expected.value}: {allowed})",
                expected=expected.value,
                actual=actual.value,
                requested=requested.value,
            )
        return None

    # -- starting -------------------------------------------------------------------------------
    def begin(self, beginning: Beginning) -> None:
        """The task is connected and has decided where to begin: go there."""
        if beginning.snapshot is not None:
            self.transition(P.STARTING, P.SNAPSHOTTING)
            self._run, self._stream_after_snapshot = beginning.snapshot, beginning.stream
            return
        if not beginning.stream:
            self.transition(P.STARTING, P.FINISHED)
            self._initial.skipped()
            return
        refusal = self._refusal(P.STARTING, P.STREAMING)  # checked before the source acts on it
        if refusal is not None:
            raise refusal
        self._initial.skipped()
        self._parts.start_streaming()
        self.transition(P.STARTING, P.STREAMING)

    # -- polling --------------------------------------------------------------------------------
    def poll(self) -> list[SourceRecord]:
        phase = self._phase
        if phase is P.STREAMING:
            return self._poll_stream()
        if phase is P.SNAPSHOTTING or phase is P.BLOCKING:
            return self._poll_snapshot(phase)
        if phase is P.FINISHED:
            time.sleep(self._poll_interval_s)  # nothing more to read: do not spin
            return []
        raise IllegalStateError(
            f"source task {self._name!r}: polled in {phase.value}",
            expected=P.STREAMING.value,
            actual=phase.value,
            requested=phase.value,
        )

    def _poll_stream(self) -> list[SourceRecord]:
        coordinator, handover = self._coordinator, self._handover
        if handover.pending:
            coordinator.kick()  # the next window is read while these rows are delivered
            return handover.next()
        blocking = coordinator.take_blocking()
        if blocking is not None:
            self._begin_blocking(blocking)
            return []
        records = self._parts.read_changes()
        segments = coordinator.watch(records)
        try:
            notifications = coordinator.after_poll()  # after the rows of a chunk they report on
        except BaseException:
            # The stream has moved past these records: a retried poll reads what follows them,
            # so they must not go with this poll. The error is raised now, where it happened
            # (the retry policy's backoff and errors.max.retries apply as to any failed poll,
            # and a database that stays away ends the task); the records wait in the hand-over,
            # which the retried poll returns first, before reading the stream again - once, in
            # order - and a clean stop drains. Deferring the error to the next poll instead
            # would need a stored error and a rule for what that poll may still read first.
            handover.hold(segments)
            raise
        return handover.first(segments, notifications)

    def _begin_blocking(self, blocking: BlockingSnapshot) -> None:
        try:
            self._run = self._parts.blocking_snapshot(blocking.tables)
        except SignalError as exc:
            self._coordinator.reject(exc, blocking.signal_id, "execute-snapshot")
            return
        self._blocking_signal = blocking.signal_id
        self.transition(P.STREAMING, P.BLOCKING)

    def _poll_snapshot(self, phase: SourcePhase) -> list[SourceRecord]:
        run = self._run
        if run is None:  # the initial snapshot is read: only the stream is left to start
            self._parts.start_streaming()
            self.transition(P.SNAPSHOTTING, P.STREAMING)
            return []
        self._parts.keep_alive()  # the stream waits: keep the source from timing it out
        try:
            batch = next(run.batches, None)
        except SignalError as exc:
            if phase is not P.BLOCKING:
                raise
            self._end_blocking(run)
            self._coordinator.reject(exc, self._blocking_signal, "execute-snapshot")
            return []
        if batch is None or ends_snapshot(batch):
            if phase is P.BLOCKING:
                rows = self._end_blocking(run)
                self._coordinator.blocking_done(self._blocking_signal, rows)
                log.info("%s: blocking snapshot done, %d rows", self._name, rows)
            else:
                self._end_initial(run)
        return batch or []

    def _end_blocking(self, run: SnapshotRun) -> int:
        rows = run.rows()
        self._run = None
        run.close()
        self.transition(P.BLOCKING, P.STREAMING)  # the stream goes on where it paused
        return rows

    def _end_initial(self, run: SnapshotRun) -> None:
        log.info("%s: initial snapshot done, %d rows", self._name, run.rows())
        self._run = None
        run.close()
        self._initial.read()  # COMPLETED once committed (see commit)
        if not self._stream_after_snapshot:
            self.transition(P.SNAPSHOTTING, P.FINISHED)
        # Else the next poll starts the stream: were it started here, a failure to start it
        # would lose this poll's batch - the snapshot's last rows and its end.

    def drain(self) -> list[SourceRecord]:
        """At a clean stop: what was read but held for later polls (a released chunk, the
        marker carrying a snapshot's end), so that it is delivered and committed with the rest -
        else a snapshot reported COMPLETED would be resumed at the next start."""
        if self._phase is not P.STREAMING:
            return []
        return self._handover.drain() + self._coordinator.tail()

    # -- between polls --------------------------------------------------------------------------
    def idle(self) -> None:
        """The engine is paused: nothing is polled, the source is kept alive all the same."""
        if self._phase is not P.STOPPED:
            self._parts.keep_alive()

    def commit(self, offsets: Mapping[str, Offset]) -> None:
        if self._phase is P.STOPPED:
            return
        for offset in offsets.values():
            if not offset.get("snapshot"):
                self._parts.confirm(offset)
                self._initial.committed()  # an offset after the snapshot: all its rows are in

    def position(self, partition: Partition | None) -> SourcePosition:
        phase = self._phase
        if phase is P.STREAMING:
            return SourcePosition(Phase.STREAMING, partition, self._parts.newest_position())
        return SourcePosition(_REPORTED[phase], partition)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        run = self._run
        if run is not None:
            out["snapshot_rows_scanned"] = run.rows()
        out.update(self._coordinator.metrics())  # an incremental snapshot's, when one runs
        return out

    def stop(self) -> None:
        """Stop for good (again: nothing more happens). The source closes last, whatever failed
        before: its connections must not leak (nor, for PostgreSQL, its slot stay held)."""
        phase = self._phase
        if phase is P.STOPPED:
            return
        self.transition(phase, P.STOPPED)
        self._run = None
        try:
            self._initial.stopped()
            self._coordinator.close()
        finally:
            self._parts.close()
