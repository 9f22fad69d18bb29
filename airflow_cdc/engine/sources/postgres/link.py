"""A task's replication connection, opened again when it is lost.

A replication connection is lost when its WAL sender is terminated (``pg_terminate_backend``),
the server restarts or crashes, or the network drops it; libpq then reports the end of the COPY
or a dead socket, and the stream (``stream.py``) raises RetriableError from a read, a standby
status update or a keep-alive. Retrying on the same connection could never succeed: the link
closes it, and the next read opens a new connection and runs START_REPLICATION from the newest
*committed* offset (never from what was only read: records handed to the engine and not yet
committed may still be lost with a failing sink). The server sends everything after that
position again, so changes arrive at least once; a committed offset inside a transaction skips
that transaction's delivered part (``ChangeBuilder.rewind``), as after a restart of the engine.

Reopening fails, and is retried by the engine's retry policy, while the server is down or
starting up (57P03), full (53300), or still has the slot active for the lost WAL sender (55006:
a terminated one exits within moments; one whose client vanished lives until
wal_sender_timeout - that one is ours, and is ended).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import psycopg

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.records import Offset
from airflow_cdc.engine.sources.postgres import catalog as cat
from airflow_cdc.engine.sources.postgres import pgoutput
from airflow_cdc.engine.sources.postgres.stream import ReplicationStream, SlotActiveError

log = logging.getLogger(__name__)


def stream_order(offset: Offset) -> tuple[int, int, int]:
    """Offsets of a stream in stream order: the last complete transaction's end, then the
    change (and its record) inside the next transaction."""
    return (int(offset.get("lsn_commit") or 0), int(offset.get("lsn") or 0), int(offset.get("event") or 0))


class ReplicationLink:
    """The replication connection of one task (``name``: for the log) and where it resumes."""

    def __init__(self, name: str, conninfo: str, slot: str, publication: str, resume: Offset | None) -> None:
        self._name, self._conninfo, self._slot, self._publication = name, conninfo, slot, publication
        #: The open connection; None before the start, and after a loss until it is reopened.
        self.stream: ReplicationStream | None = None
        #: The newest committed offset of the stream: where a reopened connection starts.
        self.resume = resume if resume and not resume.get("snapshot") else None
        self.losses = 0
        self._lost_walsender: int | None = None

    def connect(self) -> ReplicationStream:
        """The first connection: it creates the slot (and exports the snapshot) if needed."""
        self.stream = ReplicationStream.connect(self._conninfo)
        return self.stream

    def start(self, start_lsn: int) -> None:
        """Stream from ``start_lsn`` (the snapshot's end, or the committed offset), on the first
        connection unless it was lost meanwhile; a failure leaves none open."""
        if self.resume is None or self.resume.get("lsn_commit") != start_lsn:
            self.resume = {"lsn_commit": start_lsn}
        stream = self.stream or ReplicationStream.connect(self._conninfo)
        self.stream = None
        try:
            stream.start(self._slot, self._publication, start_lsn)
        except BaseException:
            stream.close()
            raise
        self.stream = stream

    def reopen(self, catalog: psycopg.Connection[tuple[Any, ...]]) -> tuple[ReplicationStream, Offset]:
        """A new connection streaming from the newest committed offset, and that offset (to
        rewind the change builder to). ``catalog``: a live connection, to end our lost WAL sender."""
        resume = self.resume or {"lsn_commit": 0}
        start = int(resume["lsn_commit"])  # type: ignore[arg-type]
        stream = ReplicationStream.connect(self._conninfo)
        try:
            stream.start(self._slot, self._publication, start)
        except SlotActiveError:
            stream.close()
            self._end_lost_walsender(catalog)
            raise
        except BaseException:
            stream.close()
            raise
        self.stream = stream
        log.info("%s: replication connection reopened, streaming from %s", self._name, pgoutput.format_lsn(start))
        return stream, resume

    def lost(self, exc: BaseException) -> None:
        """The connection failed with ``exc``: close it; the next read opens a new one."""
        stream, self.stream = self.stream, None
        if stream is None:
            return
        self.losses += 1
        with contextlib.suppress(psycopg.Error):  # its PID, while the connection object lives
            self._lost_walsender = stream.backend_pid
        stream.close()
        log.warning(
            "%s: replication connection lost (%s); reopening it to stream again from %s",
            self._name,
            exc,
            pgoutput.format_lsn(int((self.resume or {}).get("lsn_commit") or 0)),
        )

    def confirm(self, offset: Offset) -> None:
        """``offset`` is committed: the newest committed offset is confirmed to the server."""
        if self.resume is None or stream_order(offset) > stream_order(self.resume):
            # After a reconnect the offsets committed can be older than those before it (the
            # server sent them again): the stream resumes from the newest.
            self.resume = offset
        stream = self.stream
        if stream is not None:
            try:
                stream.confirm(int(self.resume.get("lsn_commit") or 0))
            except RetriableError as exc:
                self.lost(exc)
                raise

    def keep_alive(self) -> None:
        """While the stream is not read: never raises, a loss is noticed at the next read."""
        if self.stream is not None:
            try:
                self.stream.keep_alive()
            except RetriableError as exc:
                self.lost(exc)

    def close(self) -> int | None:
        """Close the connection; the PID of its WAL sender (None: there was none open)."""
        stream, self.stream = self.stream, None
        if stream is None:
            return None
        walsender = None
        with contextlib.suppress(psycopg.Error):
            walsender = stream.backend_pid
        stream.close()  # the server's WAL sender lets go of the slot (soon after)
        return walsender

    def _end_lost_walsender(self, catalog: psycopg.Connection[tuple[Any, ...]]) -> None:
        pid = self._lost_walsender
        try:
            state = cat.slot_state(catalog, self._slot)
            if pid is not None and state is not None and state.active_pid == pid:
                log.info("%s: ending WAL sender %d, left by the lost replication connection", self._name, pid)
                catalog.execute("select pg_terminate_backend(%s)", (pid,))
                self._lost_walsender = None
        except psycopg.Error as exc:  # a help only: the retry waits for wal_sender_timeout otherwise
            log.warning("%s: cannot end WAL sender %s of the lost connection: %s", self._name, pid, exc)
