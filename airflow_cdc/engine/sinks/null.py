"""Sinks that keep nothing: ``null`` discards (benchmarks, dry runs), ``stdout`` prints one
JSON line per record (a quick look at what a configuration captures)."""

from __future__ import annotations

import sys
import threading
from typing import IO

from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.sinks.base import Sink
from airflow_cdc.engine.sinks.line import record_line


class NullSink(Sink):
    type = "null"

    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        self._count(len(records))
        committer.mark_all_processed()
        committer.mark_batch_finished()


class StdoutSink(Sink):
    """One line per record: ``{"topic", "key", "value"}`` (value null for a tombstone)."""

    type = "stdout"

    def __init__(self, settings: dict[str, object] | None = None, stream: IO[bytes] | None = None) -> None:
        super().__init__(settings)
        self._stream = stream
        self._lock = threading.Lock()

    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        out = self._stream or sys.stdout.buffer
        data = b"".join(record_line(record) for record in records)
        with self._lock:
            out.write(data)
            out.flush()
        self._count(len(records))
        committer.mark_all_processed()
        committer.mark_batch_finished()
