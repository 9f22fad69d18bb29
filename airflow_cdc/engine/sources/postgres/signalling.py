"""The PostgreSQL task's signals and incremental snapshot, driven from its poll loop.

Signal-table rows are recognised in the stream: watermarks go to the incremental snapshot,
anything else is a signal; either way the row is emitted as a change event, as Debezium does.
The api, file and kafka channels are polled at most every :data:`CHANNEL_POLL_S`. A bad signal
is answered with a ``Signal``/``REJECTED`` notification and a log line; it never stops the
stream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeAlias

import psycopg

from airflow_cdc.engine.connector import TaskContext
from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.notifications import BLOCKING, SIGNAL, Notification
from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.signals import (
    FileChannel,
    InProcessChannel,
    KafkaChannel,
    Signal,
    SignalChannel,
    SignalError,
    parse_signal,
)
from airflow_cdc.engine.signals.signal import EXECUTE, LOG, PAUSE, RESUME, STOP, WINDOW_CLOSE, WINDOW_OPEN
from airflow_cdc.engine.snapshots.incremental import (
    OFFSET_KEY,
    SQL_EXCEPTION,
    IncrementalSnapshot,
    SnapshotContext,
    match_tables,
)
from airflow_cdc.engine.sources.postgres import pgoutput
from airflow_cdc.engine.sources.postgres.changes import WATERMARK_PREFIX, ChangeBuilder
from airflow_cdc.engine.sources.postgres.incremental import PostgresChunkSource

log = logging.getLogger(__name__)

#: A closed window's rows, made records a batch at a time as they are taken.
Released: TypeAlias = Iterator[list[SourceRecord]]
#: A piece of a poll, in stream order: records, or a window's released rows.
Segment: TypeAlias = list[SourceRecord] | Released

CHANNEL_POLL_S = 0.1
#: The topic of the in-stream stand-in for a read-only watermark; never leaves this module.
WATERMARK_TOPIC = "\x00watermark"


class Signalling:
    def __init__(
        self,
        *,
        settings: Mapping[str, Any],
        context: TaskContext,
        builder: ChangeBuilder,
        source: PostgresChunkSource,
        signal_topic: str | None,
        resume: Mapping[str, Any] | None,
        begin_blocking: Callable[[str, list[str]], None],
    ) -> None:
        #: Starts a blocking snapshot of these tables: the task stops reading the stream meanwhile.
        self.begin_blocking = begin_blocking
        self.settings = settings
        self.builder = builder
        self.bus = context.notifications
        self.connector_name = context.engine_name
        self.signal_topic = signal_topic
        self.strategy = settings["incremental.snapshot.watermarking.strategy"]
        self.snapshot = IncrementalSnapshot(
            source,
            self.bus,
            context.engine_name,
            # Several readers read a chunk each within one window.
            settings["incremental.snapshot.chunk.size"] * settings["incremental.snapshot.max.threads"],
            SnapshotContext.from_offset(resume),
        )
        self.channels = self._channels(settings, context)
        self._next_channel_poll = 0.0
        builder.on_transactional_message = self.on_message
        self._sync_offsets()
        if self.snapshot.active:
            log.info("incremental snapshot %s resumes", self.snapshot.context.id)  # type: ignore[union-attr]

    @staticmethod
    def _channels(settings: Mapping[str, Any], context: TaskContext) -> list[SignalChannel]:
        enabled = set(settings["signal.enabled.channels"])
        channels: list[SignalChannel] = []
        if "api" in enabled:
            channels.append(context.signals)
        if "file" in enabled:
            channels.append(FileChannel(settings["signal.file"]))
        if "kafka" in enabled and settings["signal.kafka.topic"]:
            channels.append(
                KafkaChannel(
                    settings["signal.kafka.bootstrap.servers"],
                    settings["signal.kafka.topic"],
                    settings["topic.prefix"],
                    settings["signal.kafka.groupId"],
                )
            )
        return channels

    @property
    def watching(self) -> bool:
        """Records must pass through :meth:`watch` (a signal table, or a window to dedupe)."""
        return self.signal_topic is not None or self.snapshot.window_id is not None

    # -- the stream ------------------------------------------------------------------------------
    def watch(self, records: list[SourceRecord]) -> list[Segment]:
        """The polled records, in stream order, with each window's chunk released after its close
        watermark: lists of records, and at each close the chunk's rows (made records a batch at
        a time as they are taken). Signal-table rows are acted on and stay events; WAL-message
        watermarks (read-only snapshots) are taken out."""
        segments: list[Segment] = []
        out: list[SourceRecord] = []
        signal_topic, snapshot = self.signal_topic, self.snapshot
        # The records were built before any of them was watched, with the snapshot context of
        # then; once a chunk closes in this batch, those after it get the context of now.
        context = self.builder.offset_extra
        for record in records:
            if self.builder.offset_extra is not context:
                record = record.replace(offset=self._restamped(record.offset))
            released: Released | None = None
            emitted: SourceRecord | None = record
            if record.topic == signal_topic and signal_topic is not None:
                # A signal or a watermark; the row is a change event all the same, as in Debezium
                # (EventDispatcher emits the signal table's changes after acting on them).
                released = self._signal_row(record)
            elif record.topic == WATERMARK_TOPIC:  # a WAL-message watermark: no row, no event
                window, kind = record.value
                released, emitted = self._watermark(window, kind, record.offset), None
            elif snapshot.collecting:
                snapshot.on_change(record)
            if released is not None:
                segments += (out, released)
                out = []
            if emitted is not None:
                out.append(emitted)
        segments.append(out)
        return segments

    def _restamped(self, offset: Mapping[str, Any]) -> dict[str, Any]:
        restamped = {k: v for k, v in offset.items() if k != OFFSET_KEY}  # gone once the snapshot ends
        restamped.update(self.builder.offset_extra)
        return restamped

    def on_message(self, message: pgoutput.Message) -> list[SourceRecord]:
        """A read-only watermark: passed on as a record, so :meth:`watch` meets it in stream
        order (the changes before it in the same poll must not be deduplicated against it)."""
        if message.prefix != WATERMARK_PREFIX or self.snapshot.window_id is None:
            return []  # another client's message, or a window from before a restart
        kind, _, window = message.content.decode(errors="replace").partition(":")
        offset = self.builder.offset(message.lsn)
        return [SourceRecord(WATERMARK_TOPIC, None, (window, kind), self.builder.partition, offset)]

    def _signal_row(self, record: SourceRecord) -> Released | None:
        value = record.value
        if not isinstance(value, dict):
            return None  # the tombstone after a delete
        row = value.get("after") or value.get("before") or {}
        row_id, kind = str(row.get("id") or ""), row.get("type")
        if value.get("op") == "d":
            if self.strategy == "insert_delete" and row_id.endswith("-open"):
                return self._watermark(row_id.removesuffix("-open"), "close", record.offset)
            return None
        if value.get("op") != "c":
            return None
        if kind in (WINDOW_OPEN, WINDOW_CLOSE):
            window = row_id.rsplit("-", 1)[0]
            return self._watermark(window, "open" if kind == WINDOW_OPEN else "close", record.offset)
        self._accept(row_id, kind, row.get("data"), "source")
        return None

    def _watermark(self, window: str, kind: str, offset: Mapping[str, Any]) -> Released | None:
        # The rows carry the offset before the chunk (offset_extra is not yet updated), so a
        # crash before all of them are delivered reads the chunk again.
        released = self.snapshot.on_watermark(window, kind, offset)
        if released is not None:
            self._sync_offsets()
        return released

    # -- signals ---------------------------------------------------------------------------------
    def _accept(self, signal_id: str, kind: Any, data: Any, channel: str) -> None:
        try:
            self.act(parse_signal(signal_id, str(kind or ""), data, channel))
        except SignalError as exc:
            self.reject(exc, signal_id, str(kind))

    def act(self, signal: Signal) -> None:
        snapshot = self.snapshot
        try:
            if signal.type == EXECUTE:
                if signal.snapshot_type == "blocking":
                    self._blocking(signal)
                    return
                if snapshot.context is not None and snapshot.context.id == signal.id:
                    return  # seen again after a restart: it is running already
                snapshot.execute(signal)
            elif signal.type == STOP:
                snapshot.stop(signal)
            elif signal.type == PAUSE:
                snapshot.pause(signal)
            elif signal.type == RESUME:
                snapshot.resume(signal)
            elif signal.type == LOG:
                log.info("signal %s (%s): %s", signal.id, signal.channel, signal.data["message"])
        except psycopg.OperationalError as exc:
            raise RetriableError(f"signal {signal.id!r}: the database went away: {exc}") from exc
        except psycopg.Error as exc:
            raise SignalError(f"signal {signal.id!r}: {exc}".strip(), signal.id) from None
        finally:
            self._sync_offsets()

    def _blocking(self, signal: Signal) -> None:
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
        tables = match_tables(self.snapshot.source.snapshot_tables(), signal)
        self.bus.publish(
            Notification(
                BLOCKING,
                "STARTED",
                {"connector_name": self.connector_name, "data_collections": ", ".join(tables)},
                id=signal.id,
            )
        )
        self.begin_blocking(signal.id, tables)

    def blocking_done(self, signal_id: str, rows: int) -> None:
        self.bus.publish(
            Notification(
                BLOCKING,
                "COMPLETED",
                {"connector_name": self.connector_name, "total_rows_scanned": str(rows)},
                id=signal_id,
            )
        )

    def reject(self, error: SignalError, signal_id: str = "", kind: str = "") -> None:
        log.warning("signal %s rejected: %s", signal_id or error.signal_id or "?", error)
        self.bus.publish(
            Notification(
                SIGNAL,
                "REJECTED",
                {
                    "connector_name": self.connector_name,
                    "signal_id": signal_id or error.signal_id,
                    "signal_type": kind,
                    "problem": str(error),
                },
                id=signal_id or error.signal_id or Notification(SIGNAL, "").id,
            )
        )

    # -- each poll -------------------------------------------------------------------------------
    def after_poll(self) -> list[SourceRecord]:
        """Poll the signal channels, read the next chunk if one is due; notification records."""
        now = time.monotonic()
        if self.channels and now >= self._next_channel_poll:
            self._next_channel_poll = now + CHANNEL_POLL_S
            for channel in self.channels:
                for item in channel.read():
                    if isinstance(item, SignalError):
                        self.reject(item)
                        continue
                    try:
                        self.act(item)
                    except SignalError as exc:
                        self.reject(exc, item.id, item.type)
        failure = self.snapshot.failure()
        if failure is not None:
            self._failed_window(failure)
        if self.snapshot.needs_step:
            self._step()
        return self._notification_records()

    def kick(self) -> None:
        """Start the next window now if one is due (while earlier rows are still handed over)."""
        if self.snapshot.needs_step:
            self._step()

    def _failed_window(self, error: BaseException) -> None:
        if isinstance(error, psycopg.OperationalError):
            raise RetriableError(f"incremental snapshot: the database went away: {error}") from error
        log.error("incremental snapshot: reading a chunk failed: %s", error)
        self.snapshot.fail_table(SQL_EXCEPTION)
        self._sync_offsets()

    def _step(self) -> None:
        try:
            self.snapshot.step()
        except psycopg.OperationalError as exc:
            raise RetriableError(f"incremental snapshot: the database went away: {exc}") from exc
        except psycopg.Error as exc:
            log.error("incremental snapshot: reading a chunk failed: %s", exc)
            self.snapshot.fail_table(SQL_EXCEPTION)
        finally:
            self._sync_offsets()

    def _notification_records(self) -> list[SourceRecord]:
        topic = self.bus.sink_topic
        taken = self.bus.take_for_sink() if topic else []
        if not taken:
            return []
        offset = {**self.builder.offset(self.builder.last_completed), "txId": None}
        return [SourceRecord(topic, {"id": n.id}, n.as_dict(), self.builder.partition, offset) for n in taken]

    def _sync_offsets(self) -> None:
        self.builder.offset_extra = self.snapshot.offset_fields()

    def metrics(self) -> dict[str, float]:
        context = self.snapshot.context
        if context is None:
            return {}
        return {"snapshot_rows_scanned": context.rows, "snapshot_total_rows": max(context.estimated_rows, context.rows)}

    def close(self) -> None:
        self.snapshot.source.interrupt()  # a window read still running must not hold the stop
        self.snapshot.close()
        self.snapshot.source.close()
        channels, self.channels = self.channels, []  # closing twice is harmless
        for channel in channels:
            if not isinstance(channel, InProcessChannel):  # the api channel is the engine's
                channel.close()
