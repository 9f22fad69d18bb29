"""DBLog incremental snapshots (seed 001; Debezium's incremental snapshot), source-agnostic.

For each table: read its maximum key (the end point), then chunks of
``incremental.snapshot.chunk.size`` rows in key order. Each chunk is read between two watermarks
the source writes into its own log (signal-table rows, or WAL messages in read-only mode):

1. write the window-open watermark; 2. read the chunk into a buffer; 3. write window-close.

The stream keeps flowing. Changes to keys that are in the buffer evict them (the streamed change
is newer, or at least as new) - DBLog counts those between the watermarks, we count every one
since the window was queued (:meth:`IncrementalSnapshot.on_change` says why); when the stream
reaches window-close, what is left in the buffer is emitted as ``op=r`` - at that point in the
stream, so every read is followed by every later change of its row. Nothing stops streaming.

Windows are read ahead: while the stream has not yet reached a window's close, the reader thread
already writes the next window's watermarks and reads its chunk (from the last key of the one
before), up to :data:`READ_AHEAD` windows. Windows never overlap in the log (each one's
watermarks are written after the previous one's close), so the stream meets them one at a time,
in order, and the dedup rule is the same; the server's work and the stream's latency overlap the
delivery of the rows before.

The context (tables left, current table, maximum key, last emitted key, signal id, counts)
travels in the offsets of every record (``incremental_snapshot``, a JSON string). Rows emitted at
a window's close carry the context *before* the chunk, and the record after them the context
after it; so a crash resumes at the last chunk whose rows were all delivered, re-reading at most
one chunk.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import orjson

from airflow_cdc.engine.notifications import INCREMENTAL, Notification, NotificationBus
from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.signals import watermark
from airflow_cdc.engine.signals.signal import AdditionalCondition, Signal, SignalError

log = logging.getLogger(__name__)

OFFSET_KEY = "incremental_snapshot"
#: Windows read but not yet closed in the stream, at most. Two keep the reader busy while the
#: stream catches up with the first; more only hold more rows in memory.
READ_AHEAD = 2


class ChunkRows(Protocol):
    """A chunk's rows as the source read them: they become records only when they are handed
    on, a batch at a time, so a chunk waiting for its close watermark holds no Python objects
    per row and each batch is serialized while it is still in the CPU cache (ADR 0007)."""

    def __len__(self) -> int: ...

    def records(self, offset: Offset) -> Iterator[list[SourceRecord]]:
        """The ``op=r`` records in key order, a batch at a time, each with ``offset``; the rows
        are let go as they go."""


@dataclass(frozen=True)
class Chunk:
    """A chunk as read: its rows in key order, the last one's key (the next chunk starts after
    it), and whether they are all there is up to the end point."""

    rows: ChunkRows
    last_key: tuple[str, ...] | None
    complete: bool


SUCCEEDED, EMPTY, NO_PRIMARY_KEY, SKIPPED, SQL_EXCEPTION, UNKNOWN_SCHEMA = (
    "SUCCEEDED",
    "EMPTY",
    "NO_PRIMARY_KEY",
    "SKIPPED",
    "SQL_EXCEPTION",
    "UNKNOWN_SCHEMA",
)


@dataclass(frozen=True)
class TablePlan:
    """One table of a snapshot: its name (``schema.table``), filter and chunking key."""

    name: str
    filter: str | None = None
    surrogate_key: str | None = None


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


class ChunkSource(Protocol):
    """What a source provides to snapshot its tables incrementally."""

    def snapshot_tables(self) -> list[str]:
        """Captured tables, ``schema.table``."""

    def check_table(self, plan: TablePlan) -> str | None:
        """None if the table can be snapshotted, else a status (NO_PRIMARY_KEY, UNKNOWN_SCHEMA)."""

    def check_filter(self, table: str, predicate: str) -> None:
        """Raise SignalError unless ``predicate`` is one boolean expression over the table."""

    def estimate_rows(self, table: str) -> int: ...

    def max_key(self, plan: TablePlan) -> tuple[str, ...] | None: ...

    def read_window(
        self,
        window_id: str,
        plan: TablePlan,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        limit: int,
        correlation_id: str | None = None,
    ) -> Chunk:
        """One window: write the open watermark into the source's log, read about ``limit`` rows
        with after < key <= upto in key order, write the close watermark - each committed before
        the next begins (a source may send all three in one round trip). ``correlation_id`` is
        the signal that asked for the snapshot, for the watermarks' metadata."""

    def dedup_key(self, record: SourceRecord) -> Hashable:
        """The identity of a row, equal for its snapshot read and its streamed changes."""

    def topic_of(self, table: str) -> str: ...

    def interrupt(self) -> None:
        """Cancel whatever a window read is waiting on."""

    def close(self) -> None:
        """Release reader connections."""


@dataclass(eq=False)
class _Window:
    """A window whose watermarks and chunk are being written and read, or wait for the stream."""

    id: str
    topic: str
    read: Future[Chunk | None]  # None: the window before ended the table, nothing was written
    # Keys of the table changed in the stream since the window was queued (not only since its
    # open watermark: see on_change).
    seen: set[Hashable] = field(default_factory=set)


class IncrementalSnapshot:
    """Driven by the source's task thread: ``step()`` when idle, ``on_*`` from the stream."""

    def __init__(
        self,
        source: ChunkSource,
        bus: NotificationBus,
        connector_name: str,
        chunk_size: int,
        context: SnapshotContext | None = None,
    ) -> None:
        self.source = source
        self.bus = bus
        self.connector_name = connector_name
        self.chunk_size = chunk_size
        self.context = context
        self._windows: deque[_Window] = deque()  # in the order the stream will meet them
        self._executor: ThreadPoolExecutor | None = None

    # -- state ---------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.context is not None

    @property
    def window_id(self) -> str | None:
        """The window the stream meets next, if any."""
        return self._windows[0].id if self._windows else None

    @property
    def collecting(self) -> bool:
        """Windows are queued: the stream's changes must be shown to :meth:`on_change`."""
        return bool(self._windows)

    @property
    def needs_step(self) -> bool:
        """Another window may be started now (fewer than READ_AHEAD pending, not paused)."""
        return self.context is not None and len(self._windows) < READ_AHEAD and not self.context.paused

    def offset_fields(self) -> dict[str, str]:
        return self.context.to_offset() if self.context is not None else {}

    # -- signals -------------------------------------------------------------------------------
    def execute(self, signal: Signal) -> None:
        """Start a snapshot of the signal's tables (or add them to the running one)."""
        tables = match_tables(self.source.snapshot_tables(), signal)
        conditions = signal.additional_conditions
        plans = []
        for table in tables:
            for condition in conditions:
                if re.fullmatch(condition.data_collection, table):
                    self.source.check_filter(table, condition.filter)  # each as the user wrote it
            plans.append(TablePlan(table, _filter_for(table, conditions), signal.surrogate_key))
        estimate = sum(self.source.estimate_rows(p.name) for p in plans)
        if self.context is not None:
            merged = self.context.tables + tuple(p for p in plans if p not in self.context.tables)
            self.context = replace(
                self.context,
                tables=merged,
                all_tables=self.context.all_tables + tuple(tables),
                estimated_rows=self.context.estimated_rows + estimate,
            )
            log.info("incremental snapshot %s: tables added: %s", self.context.id, ", ".join(tables))
            return
        self.context = SnapshotContext(signal.id, tuple(plans), tuple(tables), estimated_rows=estimate)
        self._notify("STARTED", data_collections=", ".join(tables))

    def stop(self, signal: Signal) -> None:
        """Stop everything (no data-collections), or drop those tables and go on with the rest."""
        if self.context is None:
            raise SignalError(f"signal {signal.id!r}: no incremental snapshot is running", signal.id)
        patterns = signal.data_collections
        if not patterns:
            self._abort()
            return
        dropped = [t for t in self.context.tables if any(re.fullmatch(p, t.name) for p in patterns)]
        if not dropped:
            raise SignalError(f"signal {signal.id!r}: no table of the running snapshot matches {patterns}", signal.id)
        current = self.context.current
        left = tuple(t for t in self.context.tables if t not in dropped)
        if current in dropped:
            self._discard_window()
            self.context = replace(self.context, tables=left, max_key=None, last_key=None, table_rows=0)
        else:
            self.context = replace(self.context, tables=left)
        for table in dropped:
            self._notify("TABLE_SCAN_COMPLETED", **self._scan_data(table.name, 0, SKIPPED))
        if not left:
            self._abort()

    def pause(self, signal: Signal) -> None:
        if self.context is None:
            raise SignalError(f"signal {signal.id!r}: no incremental snapshot is running", signal.id)
        self.context = replace(self.context, paused=True)
        self._notify("PAUSED")

    def resume(self, signal: Signal) -> None:
        if self.context is None:
            raise SignalError(f"signal {signal.id!r}: no incremental snapshot is running", signal.id)
        self.context = replace(self.context, paused=False)
        self._notify("RESUMED")

    # -- chunks --------------------------------------------------------------------------------
    def step(self) -> None:
        """Start reading the next window (or finish tables that have nothing left)."""
        while self.needs_step:
            context = self.context
            assert context is not None
            plan = context.current
            if plan is None:
                self._notify("COMPLETED")
                self.context = None
                return
            if context.max_key is None:
                status = self.source.check_table(plan)
                max_key = None if status else self._max_key(plan)
                if status or max_key is None:
                    self._table_done(status or EMPTY)
                    continue
                self.context = context = replace(context, max_key=max_key)
            self._read_window(plan, context)

    def _max_key(self, plan: TablePlan) -> tuple[str, ...] | None:
        return self.source.max_key(plan)

    def _read_window(self, plan: TablePlan, context: SnapshotContext) -> None:
        """Queue the window on the reader thread (watermark, chunk, watermark) and return: the
        task thread goes on streaming and delivering earlier rows meanwhile. The first window
        of a run starts after the context's last key, each later one after the last key the
        window before it read."""
        assert context.max_key is not None
        before = self._windows[-1].read if self._windows else None
        window = watermark.window_id()
        read = self._reader().submit(self._read, window, plan, before, context.last_key, context.max_key, context.id)
        self._windows.append(_Window(window, self.source.topic_of(plan.name), read))

    def _read(
        self,
        window: str,
        plan: TablePlan,
        before: Future[Chunk | None] | None,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        correlation_id: str | None = None,
    ) -> Chunk | None:
        if before is not None:
            # Done already (one reader thread, in order); if it failed, this one fails with it.
            previous = before.result()
            if previous is None or _table_ends(previous, upto):
                return None
            after = previous.last_key
        return self.source.read_window(window, plan, after, upto, self.chunk_size, correlation_id)

    def _reader(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="cdc-snapshot-window")
        return self._executor

    def failure(self) -> BaseException | None:
        """The error of the next window's read, if it failed (its close will never come)."""
        if not self._windows:
            return None
        read = self._windows[0].read
        if not read.done() or read.exception() is None:
            return None
        self._discard_window()
        return read.exception()

    def on_watermark(self, window_id: str, kind: str, offset: Offset) -> Iterator[list[SourceRecord]] | None:
        """The stream reached a watermark; at a close, the chunk's surviving rows in order, as
        records with ``offset`` (made a batch at a time as they are taken)."""
        if not self._windows or window_id != self._windows[0].id:
            return None  # an old window (before a crash or a stop): nothing to do
        if kind == "open":
            return None  # changes count from the window's queueing already (on_change)
        window = self._windows.popleft()
        # The close watermark is written after the chunk was read: the result is there.
        chunk = window.read.result()
        assert chunk is not None  # a window that read nothing wrote no watermarks
        self._finish_chunk(chunk)
        return _surviving(chunk.rows.records(offset), self.source.dedup_key, window.seen)

    def on_change(self, record: SourceRecord) -> None:
        """A streamed change of a queued window's table: its row, if the chunk holds it, is
        dropped from the chunk at the close (the streamed change is at least as new).

        DBLog needs only the changes between the two watermarks, if every change the chunk's
        snapshot misses is committed after the open watermark in the log. In PostgreSQL it need
        not be: a transaction's commit record is in the WAL (and can be streamed) a moment
        before it becomes visible to snapshots, so one whose commit record precedes the open
        watermark can still be invisible to a chunk read right after it (the storm test caught
        a stale row once, after the open watermark and the read went out in one round trip).
        So every change since the window was queued counts. Dropping more rows than needed is
        safe: a dropped row's key has a streamed change, which carries its whole row and is
        followed by every later change of it."""
        topic = record.topic
        key = None
        for window in self._windows:
            if window.topic == topic:
                if key is None:
                    key = self.source.dedup_key(record)
                window.seen.add(key)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _finish_chunk(self, chunk: Chunk) -> None:
        context = self.context
        assert context is not None and context.max_key is not None
        max_key, emitted, last = context.max_key, len(chunk.rows), chunk.last_key
        context = replace(
            context,
            last_key=last if last is not None else context.last_key,
            table_rows=context.table_rows + emitted,
            rows=context.rows + emitted,
        )
        self.context = context
        if _table_ends(chunk, max_key):
            self._discard_window()  # read ahead: windows that found the table ended
            self._table_done(SUCCEEDED if context.table_rows else EMPTY)
        else:
            self._progress()

    def fail_table(self, status: str) -> None:
        """The current table cannot be read (e.g. SQL_EXCEPTION): report it and go on."""
        if self.context is not None and self.context.current is not None:
            self._discard_window()
            self._table_done(status)

    def _table_done(self, status: str) -> None:
        context = self.context
        assert context is not None and context.current is not None
        table = context.current.name
        self._notify("TABLE_SCAN_COMPLETED", **self._scan_data(table, context.table_rows, status))
        self.context = replace(context, tables=context.tables[1:], max_key=None, last_key=None, table_rows=0)
        if not self.context.tables:
            self._notify("COMPLETED")
            self.context = None

    def _discard_window(self) -> None:
        # Reads still running finish on their own; their watermarks no longer match anything.
        self._windows.clear()

    def _abort(self) -> None:
        self._discard_window()
        self._notify("ABORTED")
        self.context = None

    # -- notifications -------------------------------------------------------------------------
    def _progress(self) -> None:
        context = self.context
        assert context is not None
        elapsed_s = max(0.001, time.time() - context.started_ms / 1000)
        rate = context.rows / elapsed_s
        left = max(0, context.estimated_rows - context.rows)
        current = context.current
        self._notify(
            "IN_PROGRESS",
            data_collections=", ".join(context.all_tables),
            current_collection_in_progress=current.name if current else "",
            maximum_key=_key_text(context.max_key),
            last_processed_key=_key_text(context.last_key),
            rows_scanned=str(context.rows),
            estimated_total_rows=str(max(context.estimated_rows, context.rows)),
            eta_seconds=str(round(left / rate)) if rate > 0 else "",
        )

    def _scan_data(self, table: str, rows: int, status: str) -> dict[str, str]:
        return {
            "data_collection": table,
            "scanned_collection": table,
            "total_rows_scanned": str(rows),
            "status": status,
        }

    def _notify(self, kind: str, **data: str) -> None:
        assert self.context is not None
        self.bus.publish(
            Notification(INCREMENTAL, kind, {"connector_name": self.connector_name, **data}, id=self.context.id)
        )


def _surviving(
    batches: Iterator[list[SourceRecord]], dedup: Callable[[SourceRecord], Hashable], seen: set[Hashable]
) -> Iterator[list[SourceRecord]]:
    """The rows whose key did not change in the stream since their window was queued."""
    for records in batches:
        if seen:
            records = [record for record in records if dedup(record) not in seen]
        if records:
            yield records


def _table_ends(chunk: Chunk, max_key: tuple[str, ...]) -> bool:
    """The read says nothing is left, or the chunk reached the end point (keys are compared by
    the server; their text is equal only for the same key)."""
    return chunk.last_key is None or chunk.complete or chunk.last_key == max_key


def match_tables(known: list[str], signal: Signal) -> list[str]:
    """The captured tables the signal's ``data-collections`` regexes match (whole names)."""
    tables = [t for t in known if any(re.fullmatch(p, t) for p in signal.data_collections)]
    if not tables:
        raise SignalError(
            f"signal {signal.id!r}: no captured table matches {signal.data_collections} "
            f"(captured: {', '.join(known) or 'none'})",
            signal.id,
        )
    return tables


def _filter_for(table: str, conditions: list[AdditionalCondition]) -> str | None:
    predicates = [c.filter for c in conditions if re.fullmatch(c.data_collection, table)]
    if not predicates:
        return None
    return " and ".join(f"({p})" for p in predicates)


def _key_text(key: tuple[str, ...] | None) -> str:
    if key is None:
        return ""
    return key[0] if len(key) == 1 else orjson.dumps(list(key)).decode()
