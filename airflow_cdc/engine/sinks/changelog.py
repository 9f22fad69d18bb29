"""The changelog sink: the embedded default, a local directory that needs no broker.

Layout: ``<dir>/<topic>/<first seq, 20 digits>.jsonl`` - one subdirectory per topic (a table,
named like its Kafka topic), JSON-lines segments whose names sort in source order. Each line is
:func:`~airflow_cdc.engine.sinks.line.record_line` with ``seq``, a number that grows by one per
record of the topic across segments and restarts, so a reader can order changes without
knowing file boundaries.

A segment is written to a hidden temp file (``.<name>.tmp``: Spark's file source and most
readers skip dot files), fsynced, renamed into place and the directory fsynced; only then are
its records marked processed. A reader therefore never sees a partial segment, and a crash
loses nothing: the temp file is discarded at the next start and its records, never committed,
are captured again. A segment is published when it reaches ``segment.max.records`` or
``segment.max.bytes``, when it is ``segment.max.ms`` old, and when the engine stops.
A write that fails (a full disk) fails nothing else: the segment is sealed with its records
unmarked, later segments of the topic wait behind it, and it is written again from its records
every :data:`RETRY_S` until there is room (``retrying`` says why meanwhile: the status's RETRYING). The engine's offsets
stay behind it, and its back-pressure stops polling once ``max.queue.size`` records wait.
Retention (``retention.ms``, ``retention.bytes``) deletes whole segments, oldest first, never
the newest one. Segments are created ``0600`` and the directories the sink makes ``0700``
(``private_files``): they hold captured rows.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from airflow_cdc.engine.config import ConfigDef, Field
from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.private_files import open_private, private_dir
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.sinks.base import Sink
from airflow_cdc.engine.sinks.line import record_line

log = logging.getLogger(__name__)

#: After a failed write, the wait before a segment is written again.
RETRY_S = 1.0

SEGMENT = re.compile(r"^(\d{20})\.jsonl$")
TOPIC = re.compile(r"^[A-Za-z0-9._-]+$")

CHANGELOG_CONFIG = ConfigDef(
    [
        Field(
            "sink.changelog.dir",
            doc="The changelog directory (one subdirectory per topic).",
            fix="set sink.changelog.dir to a directory, e.g. /var/lib/airflow-cdc/NAME/changelog",
        ),
        Field("sink.changelog.segment.max.records", type="int", default=50_000, minimum=1),
        Field("sink.changelog.segment.max.bytes", type="int", default=64 * 1024 * 1024, minimum=1),
        Field(
            "sink.changelog.segment.max.ms",
            type="int",
            default=1000,
            minimum=1,
            doc="Publish an open segment at most this long after its first record.",
        ),
        Field("sink.changelog.retention.ms", type="int", default=-1, doc="Delete older segments (-1: keep)."),
        Field(
            "sink.changelog.retention.bytes",
            type="int",
            default=-1,
            doc="Per topic, delete the oldest segments beyond this size (-1: keep).",
        ),
        Field("sink.changelog.fsync", type="bool", default=True, doc="fsync segments (off only for tests)."),
    ]
)


class _Segment:
    """The open segment of one topic: a temp file and the records waiting in it.

    A write that fails (a full disk) breaks the temp file: it is deleted and the records are
    kept, each with its sequence number, so the next attempt writes the whole segment again
    from them. A half-written line can therefore never be renamed into place."""

    def __init__(self, directory: Path, first_seq: int) -> None:
        self.first_seq = first_seq
        self.name = f"{first_seq:020d}.jsonl"
        self.temp = directory / f".{self.name}.tmp"
        self.opened = time.monotonic()
        self.records = 0
        self.bytes = 0
        self.waiting: list[tuple[RecordCommitter, SerializedRecord, int]] = []
        self.file: IO[bytes] | None = None
        with contextlib.suppress(OSError):  # no room even for the file: written at publish
            self.file = os.fdopen(open_private(self.temp), "wb")

    def add(self, committer: RecordCommitter, record: SerializedRecord, seq: int) -> None:
        line = record_line(record, seq)
        self.waiting.append((committer, record, seq))
        self.records += 1
        self.bytes += len(line)
        if self.file is not None:
            try:
                self.file.write(line)
            except OSError:
                self.discard_file()

    def write_out(self, fsync: bool) -> None:
        """The complete temp file, durable; rewritten from the records if a write failed."""
        if self.file is None:
            self.file = os.fdopen(open_private(self.temp), "wb")
            for _, record, seq in self.waiting:
                self.file.write(record_line(record, seq))
        self.file.flush()
        if fsync:
            os.fsync(self.file.fileno())
        self.file.close()
        self.file = None

    def discard_file(self) -> None:
        file, self.file = self.file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()  # flushing what is buffered may fail again: the file goes anyway
        with contextlib.suppress(FileNotFoundError):
            self.temp.unlink()


class _Topic:
    """One topic's segments: the open one, and those sealed (full, or old) but not yet
    published because writing failed - published strictly in order, so a reader never sees a
    segment before the ones that precede it."""

    def __init__(self, directory: Path, next_seq: int) -> None:
        self.directory = directory
        self.next_seq = next_seq
        #: The sequence number after the last published record: what a reader can see.
        self.published = next_seq
        self.segment: _Segment | None = None
        self.sealed: deque[_Segment] = deque()
        self.retry_at = 0.0  # after a failure: no new attempt before this (monotonic)
        self.lock = threading.Lock()

    def seal(self) -> None:
        if self.segment is not None:
            self.sealed.append(self.segment)
            self.segment = None


class ChangelogSink(Sink):
    type = "changelog"
    config = CHANGELOG_CONFIG

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(settings)
        self.root = Path(self.settings["sink.changelog.dir"])
        self._max_records = self.settings["sink.changelog.segment.max.records"]
        self._max_bytes = self.settings["sink.changelog.segment.max.bytes"]
        self._max_age = self.settings["sink.changelog.segment.max.ms"] / 1000
        self._fsync = self.settings["sink.changelog.fsync"]
        self._topics: dict[str, _Topic] = {}
        self._topics_lock = threading.Lock()
        self._closed = threading.Event()
        self._timer: threading.Thread | None = None
        self.segments_published = 0
        self.publish_failures = 0
        self._failed_in_a_row = 0

    def start(self) -> None:
        private_dir(self.root)
        for directory in sorted(self.root.iterdir()):  # every topic's end is known from the start
            if directory.is_dir() and TOPIC.match(directory.name) and not directory.name.startswith("."):
                self._topic(directory.name)
        self._timer = threading.Thread(target=self._publish_aged, name="changelog-timer", daemon=True)
        self._timer.start()

    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        for record in records:
            topic = self._topic(record.topic)
            with topic.lock:
                segment = topic.segment or self._open(topic)
                segment.add(committer, record, topic.next_seq)
                topic.next_seq += 1
                if segment.records >= self._max_records or segment.bytes >= self._max_bytes:
                    topic.seal()
                    if time.monotonic() >= topic.retry_at:
                        self._publish(topic)
        committer.mark_batch_finished()

    def flush(self, timeout: float) -> None:
        for topic in list(self._topics.values()):
            with topic.lock:
                topic.seal()
                self._publish(topic)

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)
        self._closed.set()
        if self._timer is not None:
            self._timer.join(timeout)

    def metrics(self) -> dict[str, float]:
        return {
            **super().metrics(),
            "segments_published": self.segments_published,
            "publish_failures": self.publish_failures,
        }

    def topic_ends(self) -> dict[str, int]:
        with self._topics_lock:
            topics = dict(self._topics)
        return {name: topic.published for name, topic in sorted(topics.items())}

    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is not None:
            return topic
        if not TOPIC.match(name) or name in (".", ".."):
            raise ConfigError(
                [
                    ConfigProblem(
                        "sink.type",
                        f"topic {name!r} cannot be a changelog directory name",
                        "route it to a name of letters, digits, '.', '_' and '-' (RegexRouter transform)",
                    )
                ]
            )
        with self._topics_lock:
            if name not in self._topics:
                directory = self.root / name
                private_dir(directory)
                self._topics[name] = _Topic(directory, _recover(directory))
            return self._topics[name]

    def _open(self, topic: _Topic) -> _Segment:
        topic.segment = _Segment(topic.directory, topic.next_seq)
        return topic.segment

    def _publish(self, topic: _Topic) -> None:
        """Publish the sealed segments, oldest first; called with ``topic.lock`` held. On a
        failure (a full disk, say) the rest stay sealed with their records unmarked - the
        engine's offsets do not move past them and polling stops once too many wait - and the
        next attempt, :data:`RETRY_S` later, writes the failed segment again from its records."""
        while topic.sealed:
            segment = topic.sealed[0]
            try:
                segment.write_out(self._fsync)
                os.rename(segment.temp, topic.directory / segment.name)
                if self._fsync:
                    _fsync_dir(topic.directory)
            except OSError as exc:
                segment.discard_file()
                topic.retry_at = time.monotonic() + RETRY_S
                self.publish_failures += 1
                self._failed_in_a_row += 1
                if self.retrying.current() is None:
                    log.error("changelog: writing a segment of %s failed, retrying: %s", topic.directory, exc)
                cause = OSError(exc.errno, f"writing {topic.directory / segment.name} failed: {exc.strerror}")
                self.retrying.failed("segment write", cause, self._failed_in_a_row, RETRY_S, shared=True)
                return
            topic.sealed.popleft()
            topic.published = segment.first_seq + segment.records
            self._failed_in_a_row = 0
            if self.retrying.current() is not None:
                log.info("changelog: segments of %s are written again", topic.directory)
                self.retrying.ended("segment write", shared=True)
            self.segments_published += 1
            for committer, record, _ in segment.waiting:
                committer.mark_processed(record)
            self._count(segment.records)
        self._apply_retention(topic.directory)

    def _publish_aged(self) -> None:
        period = min(self._max_age / 2, 0.5)
        while not self._closed.wait(period):
            now = time.monotonic()
            for topic in list(self._topics.values()):
                with topic.lock:
                    if topic.segment is not None and now - topic.segment.opened >= self._max_age:
                        topic.seal()
                    if topic.sealed and now >= topic.retry_at:
                        self._publish(topic)

    def _apply_retention(self, directory: Path) -> None:
        max_ms = self.settings["sink.changelog.retention.ms"]
        max_bytes = self.settings["sink.changelog.retention.bytes"]
        if max_ms < 0 and max_bytes < 0:
            return
        segments = sorted(p for p in directory.iterdir() if SEGMENT.match(p.name))
        sizes = [p.stat() for p in segments]
        total = sum(s.st_size for s in sizes)
        cutoff = time.time() - max_ms / 1000
        for path, stat in zip(segments[:-1], sizes[:-1], strict=True):  # never the newest
            too_big = max_bytes >= 0 and total > max_bytes
            too_old = max_ms >= 0 and stat.st_mtime < cutoff
            if not (too_big or too_old):
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            total -= stat.st_size


def _recover(directory: Path) -> int:
    """Discard temp files a crash left behind; return the next sequence number."""
    for stale in directory.glob(".*.tmp"):
        stale.unlink()
    segments = sorted(p for p in directory.iterdir() if SEGMENT.match(p.name))
    if not segments:
        return 0
    last = segments[-1]
    with open(last, "rb") as file:
        return int(SEGMENT.match(last.name).group(1)) + sum(1 for _ in file)  # type: ignore[union-attr]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
