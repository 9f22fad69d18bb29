"""Signals and snapshots of one source task, source-agnostic: the task feeds its stream as typed
events (:mod:`.events`) and gets back what to hand over, in order.

* Signal-table rows are acted on - a watermark goes to the incremental snapshot, anything else is
  a signal - and emitted as change events, as Debezium does. Watermarks that are no rows (WAL
  messages of read-only snapshots) are taken out.
* At a window's close the chunk's surviving rows are released right after it; the stream's
  changes meanwhile tell the snapshot which rows are stale.
* Every record handed over carries the snapshot context in its offset (``incremental_snapshot``);
  when the context changes with nothing left to carry it (a snapshot finishing on empty or
  key-less tables, a pause) a position marker carries it, so the committed offset never keeps a
  context that is over.
* The api, file and kafka channels are polled at most every :data:`CHANNEL_POLL_S`, through the
  engine's router (several tasks: each signal goes to the tasks it concerns). A bad signal is
  answered with a ``Signal``/``REJECTED`` notification and a log line; it never stops the stream.
* A blocking snapshot is validated and announced here; the task takes it (:meth:`take_blocking`),
  reads the tables with its own means and reports back (:meth:`blocking_done`).

The source supplies a :class:`ChunkSource` and its errors as the engine's: RetriableError for a
lost connection, TableReadError for a refused query. Nothing here knows which database it is.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from airflow_cdc.engine.config import Field
from airflow_cdc.engine.connect_schema import NOTIFICATION_SCHEMAS
from airflow_cdc.engine.connector import TaskContext
from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.notifications import BLOCKING, SIGNAL, Notification, NotificationBus
from airflow_cdc.engine.records import Offset, Partition, PositionMarker, SourceRecord
from airflow_cdc.engine.signals.channels import InProcessChannel, configured_channels
from airflow_cdc.engine.signals.signal import (
    EXECUTE,
    LOG,
    PAUSE,
    RESUME,
    STOP,
    WINDOW_CLOSE,
    WINDOW_OPEN,
    Signal,
    SignalError,
    parse_signal,
)
from airflow_cdc.engine.snapshots.chunks import SQL_EXCEPTION, ChunkSource, TableReadError
from airflow_cdc.engine.snapshots.events import CLOSE, OPEN, SignalRow, SourceEvent, Watermark, with_signal_rows
from airflow_cdc.engine.snapshots.incremental import IncrementalSnapshot, SnapshotContext

log = logging.getLogger(__name__)

#: A closed window's rows, made records a batch at a time as they are taken.
Released: TypeAlias = Iterator[list[SourceRecord]]
#: A piece of what to hand over, in stream order: records, or a window's released rows.
Segment: TypeAlias = list[SourceRecord] | Released

CHANNEL_POLL_S = 0.1

#: The incremental snapshots' settings (Debezium's names), shared by the database sources.
INCREMENTAL_SNAPSHOT_FIELDS = (
    Field(
        "incremental.snapshot.chunk.size",
        type="int",
        default=1024,
        minimum=1,
        doc="Rows per window (Debezium's default). Larger chunks cost fewer watermarks and round "
        "trips per row: 8192 ran 1.2-1.5x faster than 1024 here, holding one chunk more in memory.",
    ),
    Field(
        "incremental.snapshot.max.threads",
        type="int",
        default=1,
        minimum=1,
        doc="Chunk readers per window: each reads a chunk of its own key range on its own connection. "
        "Pays when the server's reading is the slow part (big rows, a busy or distant server); on "
        "a 2-core machine one reader was faster (README, Benchmarks).",
    ),
    Field(
        "incremental.snapshot.watermarking.strategy",
        default="insert_insert",
        choices=("insert_insert", "insert_delete"),
    ),
)


@dataclass(frozen=True)
class BlockingSnapshot:
    """A blocking snapshot the task is to run: stop reading the stream, read these tables."""

    signal_id: str
    tables: tuple[str, ...]


class SnapshotCoordinator:
    """``position``: where the source's stream stands, for records with no position of their
    own before anything was fed (an offset whose commit loses nothing handed over so far).
    ``signal_topic``: the signal table's topic, whose records :meth:`watch` takes for signal rows.
    ``watermarks``: for a source whose watermarks are points of its stream rather than rows or
    messages (MySQL's read-only GTID windows): places :class:`Watermark` events among the
    records :meth:`watch` is given."""

    def __init__(
        self,
        *,
        source: ChunkSource,
        position: Callable[[], Offset],
        partition: Partition,
        settings: Mapping[str, Any],
        bus: NotificationBus,
        connector_name: str,
        signals: InProcessChannel,
        resume: Offset | None,
        qualifier: str | None = None,
        signal_topic: str | None = None,
        watermarks: Callable[[Sequence[SourceRecord]], Sequence[SourceRecord]] | None = None,
    ) -> None:
        self.source, self.bus, self.connector_name = source, bus, connector_name
        self._signal_topic, self._place_watermarks = signal_topic, watermarks
        self._source_position, self._partition = position, partition
        self._strategy = settings["incremental.snapshot.watermarking.strategy"]
        self.snapshot = IncrementalSnapshot(
            source,
            bus,
            connector_name,
            # Several readers read a chunk each within one window.
            settings["incremental.snapshot.chunk.size"] * settings["incremental.snapshot.max.threads"],
            SnapshotContext.from_offset(resume),
            qualifier,
        )
        self._fields_of = self.snapshot.context
        self._fields = self.snapshot.offset_fields()
        #: The context fields of the last record handed over (the committed one's, at first).
        self._handed_fields: Mapping[str, Any] = self._fields
        self._position: Offset | None = None  # the last fed record's, without the context
        self._blocking: deque[BlockingSnapshot] = deque()
        api, channels = configured_channels(settings)
        self._signals = signals.subscribe(self._concerns, channels, api=api)
        self._next_channel_poll = 0.0
        if self.snapshot.active:
            log.info("incremental snapshot %s resumes", self.snapshot.context.id)  # type: ignore[union-attr]

    @classmethod
    def for_task(
        cls,
        context: TaskContext,
        *,
        settings: Mapping[str, Any],
        source: ChunkSource,
        partition: Partition,
        position: Callable[[], Offset],
        signal_topic: str | None,
        qualifier: str | None = None,
        watermarks: Callable[[Sequence[SourceRecord]], Sequence[SourceRecord]] | None = None,
    ) -> SnapshotCoordinator:
        """The coordinator of a source task: the task's notifications, signal router and
        committed offset (a snapshot to resume)."""
        return cls(
            source=source,
            position=position,
            partition=partition,
            settings=settings,
            bus=context.notifications,
            connector_name=settings["topic.prefix"],  # as Debezium names its connector in notifications
            signals=context.signals,
            resume=context.offset(partition),
            qualifier=qualifier,
            signal_topic=signal_topic,
            watermarks=watermarks,
        )

    # -- the stream ------------------------------------------------------------------------------
    def watch(self, records: Sequence[SourceRecord]) -> list[Segment]:
        """The polled records to hand over, in order, with each closed window's rows after it
        (the signal table's records are taken for signal rows)."""
        if self._place_watermarks is not None:
            records = self._place_watermarks(records)
        return self.feed(with_signal_rows(records, self._signal_topic))

    def feed(self, events: Sequence[SourceEvent]) -> list[Segment]:
        """What to hand over for these events, in stream order: lists of records, and after each
        window's close its chunk's rows (made records a batch at a time as they are taken)."""
        observe = self.snapshot.on_change
        specials = [i for i, event in enumerate(events) if type(event) is SignalRow or type(event) is Watermark]
        if not specials:  # the usual poll: changes and positions only
            records = cast(Sequence[SourceRecord], events)
            observe(records)
            return [self._hand_over(records)]
        segments: list[Segment] = []
        out: list[SourceRecord] = []
        start = 0
        for index in [*specials, len(events)]:
            if index > start:
                run = cast(Sequence[SourceRecord], events[start:index])
                observe(run)
                out += self._hand_over(run)
            if index == len(events):
                break
            start, event = index + 1, events[index]
            context = self._context_fields()
            if isinstance(event, SignalRow):
                observe((event.record,))
                released = self._signal_row(event)
            else:
                assert isinstance(event, Watermark)
                observe((event,))
                released = self._watermark(event.window, event.kind, event.offset)
                self._position = event.offset  # no event, but a position after all before it
            if released is not None:
                # The chunk's rows carry the context before it, the records after them the one after.
                segments += (out, released)
                out, self._handed_fields = [], context
            if isinstance(event, SignalRow):  # an event after it is acted on; a watermark is none
                out += self._hand_over((event.record,))
        segments.append(out)
        return segments

    def _hand_over(self, records: Sequence[SourceRecord]) -> list[SourceRecord]:
        """The records as they are, the snapshot context of now added to their offsets."""
        if not records:
            return []
        self._position = records[-1].offset
        self._handed_fields = fields = self._context_fields()
        if fields:
            return [_stamped(record, fields) for record in records]
        return records if isinstance(records, list) else list(records)

    def _signal_row(self, row: SignalRow) -> Released | None:
        if row.op == "d":
            if self._strategy == "insert_delete" and row.id.endswith("-open"):
                return self._watermark(row.id.removesuffix("-open"), CLOSE, row.record.offset)
            return None
        if row.op != "c":
            return None  # an update, or the tombstone after a delete
        if row.type in (WINDOW_OPEN, WINDOW_CLOSE):
            window = row.id.rsplit("-", 1)[0]
            return self._watermark(window, OPEN if row.type == WINDOW_OPEN else CLOSE, row.record.offset)
        try:
            signal = parse_signal(row.id, str(row.type or ""), row.data, "source")
        except SignalError as exc:
            self.reject(exc, row.id, str(row.type))
            return None
        if self._signals.share(signal):  # other tasks it concerns get it too
            self._act_or_reject(signal)
        return None

    def _watermark(self, window: str, kind: str, offset: Offset) -> Released | None:
        # The rows carry the offset before the chunk, so a crash before all of them are
        # delivered reads the chunk again.
        return self.snapshot.on_watermark(window, kind, {**offset, **self._context_fields()})

    def _context_fields(self) -> Mapping[str, Any]:
        context = self.snapshot.context
        if context is not self._fields_of:
            self._fields_of, self._fields = context, self.snapshot.offset_fields()
        return self._fields

    # -- signals ---------------------------------------------------------------------------------
    def _concerns(self, signal: Signal) -> bool:
        """Called by the router, from any task's thread: reads fixed or atomic state only."""
        return signal.type != LOG and self.snapshot.concerns(signal)

    def _act_or_reject(self, signal: Signal) -> None:
        try:
            self.act(signal)
        except SignalError as exc:
            self.reject(exc, signal.id, signal.type)
        except RetriableError as exc:
            # The source is away (the catalog connection lost) while the signal arrives in the
            # middle of a poll's records: raising would lose them, the stream having moved on.
            # As Debezium's SignalProcessor, the action fails with a word and the stream goes on.
            problem = f"the source could not be reached to act on it ({exc}); send it again once it is back"
            self.reject(SignalError(f"signal {signal.id!r}: {problem}", signal.id), signal.id, signal.type)

    def act(self, signal: Signal) -> None:
        snapshot = self.snapshot
        try:
            if signal.type == EXECUTE:
                if signal.snapshot_type == "blocking":
                    self._request_blocking(signal)
                # A signal the running snapshot already took in is a replay after a restart.
                elif snapshot.context is None or not snapshot.context.acted_on(signal.id):
                    snapshot.execute(signal)
            elif signal.type == STOP:
                snapshot.stop(signal)
            elif signal.type == PAUSE:
                snapshot.pause(signal)
            elif signal.type == RESUME:
                snapshot.resume(signal)
            elif signal.type == LOG:
                log.info("signal %s (%s): %s", signal.id, signal.channel, signal.data["message"])
        except TableReadError as exc:
            raise SignalError(f"signal {signal.id!r}: {exc}".strip(), signal.id) from None

    def _request_blocking(self, signal: Signal) -> None:
        if self.snapshot.active:
            raise SignalError(
                f"signal {signal.id!r}: an incremental snapshot is running; stop it or let it finish before a "
                "blocking snapshot",
                signal.id,
            )
        if signal.additional_conditions:
            raise SignalError(
                f"signal {signal.id!r}: additional-conditions work with incremental snapshots only here; "
                'use "type": "incremental" for a filtered snapshot',
                signal.id,
            )
        tables = self.snapshot.match_tables(signal)
        self._publish(BLOCKING, "STARTED", signal.id, data_collections=", ".join(tables))
        self._blocking.append(BlockingSnapshot(signal.id, tuple(tables)))

    def take_blocking(self) -> BlockingSnapshot | None:
        """The next blocking snapshot to run, if one was asked for."""
        return self._blocking.popleft() if self._blocking else None

    def blocking_done(self, signal_id: str, rows: int) -> None:
        self._publish(BLOCKING, "COMPLETED", signal_id, total_rows_scanned=str(rows))

    def reject(self, error: SignalError, signal_id: str = "", kind: str = "") -> None:
        log.warning("signal %s rejected: %s", signal_id or error.signal_id or "?", error)
        signal_id = signal_id or error.signal_id
        self._publish(
            SIGNAL,
            "REJECTED",
            signal_id or Notification(SIGNAL, "").id,
            signal_id=signal_id,
            signal_type=kind,
            problem=str(error),
        )

    def _publish(self, aggregate: str, kind: str, notification_id: str, **data: str) -> None:
        self.bus.publish(
            Notification(aggregate, kind, {"connector_name": self.connector_name, **data}, id=notification_id)
        )

    # -- each poll -------------------------------------------------------------------------------
    def after_poll(self) -> list[SourceRecord]:
        """Poll the signal channels, start the next window if one is due; the records to hand
        over after the poll's: notifications, or a marker carrying a changed context."""
        now = time.monotonic()
        if now >= self._next_channel_poll:
            self._next_channel_poll = now + CHANNEL_POLL_S
            for item in self._signals.read():
                if isinstance(item, SignalError):
                    self.reject(item)
                else:
                    self._act_or_reject(item)
        failure = self.snapshot.failure()
        if failure is not None:
            self._failed_window(failure)
        self.kick()
        self.snapshot.tidy()
        return self.tail()

    def kick(self) -> None:
        """Start the next window now if one is due (while earlier rows are still handed over)."""
        if not self.snapshot.needs_step:
            return
        try:
            self.snapshot.step()
        except TableReadError as exc:
            log.error("incremental snapshot: reading a table failed: %s", exc)
            self.snapshot.fail_table(SQL_EXCEPTION)

    def _failed_window(self, error: BaseException) -> None:
        if isinstance(error, RetriableError):
            raise error
        log.error("incremental snapshot: reading a chunk failed: %s", error)
        self.snapshot.fail_table(SQL_EXCEPTION)

    def tail(self) -> list[SourceRecord]:
        """Notifications for the sink, or a marker carrying a context that changed since the
        last hand-over; [] when there is nothing new."""
        fields = self._context_fields()
        topic = self.bus.sink_topic
        taken = self.bus.take_for_sink() if topic else []
        if not taken and fields == self._handed_fields:
            return []
        # After everything handed over: the last fed record's position (or the source's, if
        # nothing was fed yet) with the context of now.
        position = self._position if self._position is not None else self._source_position()
        offset = {**position, **fields}
        self._handed_fields = fields
        if not taken:
            return [PositionMarker.at(self._partition, offset)]
        return [
            SourceRecord(topic, {"id": n.id}, n.as_sink_value(), self._partition, offset, schemas=NOTIFICATION_SCHEMAS)
            for n in taken
        ]

    def metrics(self) -> dict[str, float]:
        context = self.snapshot.context
        if context is None:
            return {}
        return {"snapshot_rows_scanned": context.rows, "snapshot_total_rows": max(context.estimated_rows, context.rows)}

    def close(self) -> None:
        self.source.interrupt()  # a window read still running must not hold the stop
        self.snapshot.close()
        self.source.close()
        self._signals.close()


def _stamped(record: SourceRecord, fields: Mapping[str, Any]) -> SourceRecord:
    """The record with ``fields`` added to its offset (its own class kept: a marker stays one)."""
    offset = {**record.offset, **fields}
    return type(record)(
        record.topic,
        record.key,
        record.value,
        record.partition,
        offset,
        record.timestamp_ms,
        record.headers,
        record.schemas,
    )
