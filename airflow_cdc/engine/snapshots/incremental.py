"""DBLog incremental snapshots (seed 001; Debezium's incremental snapshot), source-agnostic.

For each table: read its maximum key (the end point), then chunks of
``incremental.snapshot.chunk.size`` rows in key order. Each chunk is read between two watermarks
the source writes into its own log (signal-table rows, or WAL messages in read-only mode):

1. write the window-open watermark; 2. read the chunk into a buffer; 3. write window-close.

The stream keeps flowing. A streamed change the chunk's read did not see makes its key's row
stale, and it is dropped from the chunk (:mod:`.windows` says exactly which); when the stream
reaches window-close, what is left is emitted as ``op=r`` - at that point in the stream, so every
read is followed by every later change of its row. Nothing stops streaming.

Windows are read ahead: while the stream has not yet reached a window's close, the reader thread
already writes the next window's watermarks and reads its chunk (from the last key of the one
before), up to :data:`READ_AHEAD` windows. Windows never overlap in the log (each one's
watermarks are written after the previous one's close), so the stream meets them one at a time,
in order; the server's work and the stream's latency overlap the delivery of the rows before.

A window whose read fails for a lost connection (RetriableError from the source) is read again
from the last key emitted, with the windows read ahead of it; the poll that finds it fails, and
the engine retries it (the source opens its reader connection again). Its watermarks, if they
were written, match no window any more and are passed over.

The context (tables left, current table, maximum key, last emitted key, signal id, counts)
travels in the offsets of every record (``incremental_snapshot``, a JSON string, stamped by the
coordinator). Rows emitted at a window's close carry the context *before* the chunk, and the
records after them the context after it; so a crash resumes at the last chunk whose rows were all
delivered, re-reading at most one chunk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import orjson

from airflow_cdc.engine.notifications import INCREMENTAL, Notification, NotificationBus
from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.signals import watermark
from airflow_cdc.engine.signals.signal import EXECUTE, PAUSE, RESUME, STOP, AdditionalCondition, Signal, SignalError
from airflow_cdc.engine.snapshots.chunks import (
    EMPTY,
    NO_PRIMARY_KEY,
    SKIPPED,
    SQL_EXCEPTION,
    SUCCEEDED,
    UNKNOWN_SCHEMA,
    Chunk,
    ChunkSource,
    TablePlan,
)
from airflow_cdc.engine.snapshots.context import OFFSET_KEY, SnapshotContext
from airflow_cdc.engine.snapshots.matching import match_tables, matches
from airflow_cdc.engine.snapshots.windows import WindowQueue, surviving

__all__ = [
    "EMPTY",
    "NO_PRIMARY_KEY",
    "OFFSET_KEY",
    "READ_AHEAD",
    "SKIPPED",
    "SQL_EXCEPTION",
    "SUCCEEDED",
    "UNKNOWN_SCHEMA",
    "Chunk",
    "ChunkSource",
    "IncrementalSnapshot",
    "SnapshotContext",
    "TablePlan",
    "match_tables",
]

log = logging.getLogger(__name__)

#: Windows read but not yet closed in the stream, at most. Two keep the reader busy while the
#: stream catches up with the first; more only hold more rows in memory.
READ_AHEAD = 2
#: How long to wait before reading a window again whose read missed an already committed
#: transaction (one stalled between its commit record and its visibility).
REREAD_DELAY_S = 0.05
#: Windows of one table in a row read again for a changed shape before its snapshot gives up.
MAX_RESHAPED_WINDOWS = 20


class IncrementalSnapshot:
    """Driven by the source's task thread: ``step()`` when idle, ``on_*`` from the stream.
    ``qualifier``: a name that may stand before ``schema.table`` in a signal's table patterns to
    pick this source's tables (the database, when a connector captures several)."""

    def __init__(
        self,
        source: ChunkSource,
        bus: NotificationBus,
        connector_name: str,
        chunk_size: int,
        context: SnapshotContext | None = None,
        qualifier: str | None = None,
    ) -> None:
        self.source = source
        self.bus = bus
        self.connector_name = connector_name
        self.chunk_size = chunk_size
        self.context = context
        self.qualifier = qualifier
        self._windows = WindowQueue(source.dedup_key, source.transaction)
        #: Every streamed record, in stream order, whether windows are queued or not: which
        #: transactions were streamed matters before a window is queued (see :mod:`.windows`).
        self.on_change: Callable[[Sequence[SourceRecord]], None] = self._windows.observe
        self._executor: ThreadPoolExecutor | None = None
        self._not_before = 0.0  # a window to read again waits until then
        self._reshaped = 0  # windows in a row read again because the table's shape changed
        self._failed: BaseException | None = None  # a read found failed at its close (failure)

    # -- state ---------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.context is not None

    @property
    def window_id(self) -> str | None:
        """The window the stream meets next, if any."""
        window = self._windows.first
        return None if window is None else window.id

    @property
    def needs_step(self) -> bool:
        """Another window may be started now (fewer than READ_AHEAD pending, not paused)."""
        return (
            self.context is not None
            and len(self._windows) < READ_AHEAD
            and not self.context.paused
            and (not self._not_before or time.monotonic() >= self._not_before)
        )

    def offset_fields(self) -> dict[str, str]:
        return self.context.to_offset() if self.context is not None else {}

    def concerns(self, signal: Signal) -> bool:
        """The signal is this snapshot's to act on: an execute-snapshot naming some of the
        source's tables, or a stop, pause or resume while it runs (a stop naming tables: some
        of those it has left)."""
        if signal.type == EXECUTE:
            return any(self._matches(p, t) for t in self.source.snapshot_tables() for p in signal.data_collections)
        context = self.context
        if context is None or signal.type not in (STOP, PAUSE, RESUME):
            return False
        patterns = signal.data_collections if signal.type == STOP else []
        return not patterns or any(self._matches(p, t.name) for t in context.tables for p in patterns)

    def match_tables(self, signal: Signal) -> list[str]:
        """The captured tables the signal's ``data-collections`` name; SignalError if none."""
        return match_tables(self.source.snapshot_tables(), signal, self.qualifier)

    def _matches(self, pattern: str, table: str) -> bool:
        return matches(pattern, table, self.qualifier)

    # -- signals -------------------------------------------------------------------------------
    def execute(self, signal: Signal) -> None:
        """Start a snapshot of the signal's tables (or add them to the running one)."""
        tables = self.match_tables(signal)
        conditions = signal.additional_conditions
        plans = []
        for table in tables:
            for condition in conditions:
                if self._matches(condition.data_collection, table):
                    self.source.check_filter(table, condition.filter)  # each as the user wrote it
            plans.append(TablePlan(table, self._filter_for(table, conditions), signal.surrogate_key))
        estimate = sum(self.source.estimate_rows(p.name) for p in plans)
        if self.context is not None:
            # Debezium takes the tables into the running snapshot and reports it under the new
            # signal's id from here on (no STARTED for it): so do we, for the sensors of either.
            joined = self.context.id
            merged = self.context.tables + tuple(p for p in plans if p not in self.context.tables)
            self.context = self.context.joined(
                signal.id,
                tables=merged,
                all_tables=self.context.all_tables + tuple(tables),
                estimated_rows=self.context.estimated_rows + estimate,
            )
            log.info(
                "incremental snapshot %s: tables added: %s; it goes on as %s", joined, ", ".join(tables), signal.id
            )
            return
        self.context = SnapshotContext(
            signal.id, tuple(plans), tuple(tables), estimated_rows=estimate, signals=(signal.id,)
        )
        self._notify("STARTED", data_collections=", ".join(tables))

    def stop(self, signal: Signal) -> None:
        """Stop everything (no data-collections), or drop those tables and go on with the rest."""
        if self.context is None:
            raise SignalError(f"signal {signal.id!r}: no incremental snapshot is running", signal.id)
        patterns = signal.data_collections
        if not patterns:
            self._abort()
            return
        dropped = [t for t in self.context.tables if any(self._matches(p, t.name) for p in patterns)]
        if not dropped:
            raise SignalError(f"signal {signal.id!r}: no table of the running snapshot matches {patterns}", signal.id)
        current = self.context.current
        left = tuple(t for t in self.context.tables if t not in dropped)
        if current in dropped:
            self._windows.clear()
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
                max_key = None if status else self.source.max_key(plan)
                if status or max_key is None:
                    self._table_done(status or EMPTY)
                    continue
                self.context = context = replace(context, max_key=max_key)
            self._read_window(plan, context)

    def _read_window(self, plan: TablePlan, context: SnapshotContext) -> None:
        """Queue the window on the reader thread (watermark, chunk, watermark) and return: the
        task thread goes on streaming and delivering earlier rows meanwhile. The first window
        of a run starts after the context's last key, each later one after the last key the
        window before it read."""
        assert context.max_key is not None
        last = self._windows.last
        before = None if last is None else last.read
        window = watermark.window_id()
        read = self._reader().submit(self._read, window, plan, before, context.last_key, context.max_key, context.id)
        self._windows.queue(window, self.source.topic_of(plan.name), read)

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
        """The error of the next window's read, if it failed (its close will never come, or came
        without a chunk); reported once, the windows discarded: the next step reads again."""
        failed, self._failed = self._failed, None
        if failed is not None:
            return failed
        window = self._windows.first
        if window is None or not window.read.done() or window.read.exception() is None:
            return None
        self._windows.clear()
        return window.read.exception()

    def on_watermark(self, window_id: str, kind: str, offset: Offset) -> Iterator[list[SourceRecord]] | None:
        """The stream reached a watermark; at a close, the chunk's surviving rows in order, as
        records with ``offset`` (made a batch at a time as they are taken)."""
        if kind != "close":
            return None  # changes count from the window's queueing already (on_change)
        window = self._windows.take(window_id)
        if window is None:
            return None  # an old window (before a crash or a stop): nothing to do
        # The close watermark is written after the chunk was read: the read is over, or nearly.
        error = window.read.exception()
        if error is not None:
            # Its connection was lost after the close was written, before the chunk came back:
            # read again, and the windows read ahead of it with it (they start where it ended).
            # The error is the poll's to report (failure), not the stream's: raised from here it
            # would cut this poll's records off half-way.
            self._windows.clear()
            self._failed = error
            return None
        chunk = window.read.result()
        assert chunk is not None  # a window that read nothing wrote no watermarks
        if chunk.current is not None and not chunk.current():
            self._reshaped_window()
            return None
        self._reshaped = 0
        stale = self._windows.stale_keys(window, chunk)
        if stale is None:  # read again, from the same key, with the windows read ahead of it
            self._windows.clear()
            self._not_before = time.monotonic() + REREAD_DELAY_S
            return None
        self._not_before = 0.0
        self._finish_chunk(chunk)
        return surviving(chunk.rows.records(offset), self.source.dedup_key, stale)

    def _reshaped_window(self) -> None:
        """The chunk was read with another shape of its table than the stream gives it now (a
        DDL): read again, once the stream has passed the DDL - unless that never happens (the
        schema history and the server disagree on the table: a history that missed a DDL)."""
        self._windows.clear()
        self._reshaped += 1
        table = self.context.current.name if self.context is not None and self.context.current else "?"
        if self._reshaped > MAX_RESHAPED_WINDOWS:
            log.error(
                "%s: read %d times with a shape the stream never gave it: the schema history disagrees with the "
                "server's definition (take a new snapshot); the table's incremental snapshot stops",
                table,
                self._reshaped,
            )
            self._reshaped = 0
            self.fail_table(UNKNOWN_SCHEMA)
            return
        log.info("%s: a DDL changed the table's shape since its chunk was read: reading the chunk again", table)

    def tidy(self) -> None:
        """After each poll: forget the streamed transactions a read would see now, if many wait
        for a window's read to see them (a snapshot paused or idle between tables)."""
        if self._windows.remembers_too_much:
            self._windows.forget_seen(self.source.horizon())

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
            self._windows.clear()  # read ahead: windows that found the table ended
            self._table_done(SUCCEEDED if context.table_rows else EMPTY)
        else:
            self._progress()

    def fail_table(self, status: str) -> None:
        """The current table cannot be read (e.g. SQL_EXCEPTION): report it and go on."""
        if self.context is not None and self.context.current is not None:
            self._windows.clear()
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

    def _abort(self) -> None:
        self._windows.clear()
        self._notify("ABORTED")
        self.context = None

    def _filter_for(self, table: str, conditions: list[AdditionalCondition]) -> str | None:
        predicates = [c.filter for c in conditions if self._matches(c.data_collection, table)]
        if not predicates:
            return None
        return " and ".join(f"({p})" for p in predicates)

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


def _table_ends(chunk: Chunk, max_key: tuple[str, ...]) -> bool:
    """The read says nothing is left, or the chunk reached the end point (keys are compared by
    the server; their text is equal only for the same key)."""
    return chunk.last_key is None or chunk.complete or chunk.last_key == max_key


def _key_text(key: tuple[str, ...] | None) -> str:
    if key is None:
        return ""
    return key[0] if len(key) == 1 else orjson.dumps(list(key)).decode()
