"""The PostgreSQL task's part in signals and incremental snapshots: what only it knows.

The coordinator (:mod:`airflow_cdc.engine.snapshots.coordinator`) does the rest. This module
gives it the task's stream as typed events - the signal table's rows as
:class:`~airflow_cdc.engine.snapshots.events.SignalRow`; the read-only watermarks (WAL messages)
come out of the :class:`~.changes.ChangeBuilder` as
:class:`~airflow_cdc.engine.snapshots.events.Watermark` already - and the stream's position.
Chunks and watermarks are written and read by :class:`~.incremental.PostgresChunkSource`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_cdc.engine.connector import TaskContext
from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.snapshots.coordinator import Segment, SnapshotCoordinator
from airflow_cdc.engine.snapshots.events import with_signal_rows
from airflow_cdc.engine.sources.postgres.changes import ChangeBuilder
from airflow_cdc.engine.sources.postgres.incremental import PostgresChunkSource


class Signalling(SnapshotCoordinator):
    def __init__(
        self,
        *,
        settings: Mapping[str, Any],
        context: TaskContext,
        builder: ChangeBuilder,
        source: PostgresChunkSource,
        signal_topic: str | None,
        resume: Offset | None,
        qualifier: str | None = None,
    ) -> None:
        self._builder, self._signal_topic = builder, signal_topic
        super().__init__(
            source=source,
            position=self._stream_position,
            partition=builder.partition,
            settings=settings,
            bus=context.notifications,
            connector_name=settings["topic.prefix"],  # as Debezium names its connector in notifications
            signals=context.signals,
            resume=resume,
            qualifier=qualifier,
        )

    def watch(self, records: Sequence[SourceRecord]) -> list[Segment]:
        """The polled records to hand over, in order, with each closed window's rows after it."""
        return self.feed(with_signal_rows(records, self._signal_topic))

    def _stream_position(self) -> Offset:
        # The end of the last transaction streamed completely: committing it loses nothing.
        return {**self._builder.offset(self._builder.last_completed), "txId": None}
