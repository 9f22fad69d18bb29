"""The logical replication stream over a psycopg 3 ``replication="database"`` connection.

psycopg 3.3 runs ``START_REPLICATION`` and leaves the connection in COPY BOTH; this module reads
the CopyData through the low-level ``pgconn`` (XLogData and keepalives, decoded by the sans-IO
:mod:`pgoutput` module) and writes standby status updates. The LSN it reports as flushed is
only ever what the engine committed after the sink acknowledged it.
"""

from __future__ import annotations

import logging
import select
import time

import psycopg
from psycopg import pq

from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.sources.postgres import connect_errors, pgoutput
from airflow_cdc.engine.sources.postgres.pgoutput import Keepalive, XLogData

log = logging.getLogger(__name__)

#: Send a status update at least this often, well inside the server's wal_sender_timeout.
STATUS_INTERVAL_S = 10.0


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class ReplicationStream:
    """One replication connection streaming one slot."""

    def __init__(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        self._conn = conn
        self._pgconn = conn.pgconn
        self.flushed_lsn = 0
        self.received_lsn = 0
        self._last_status = 0.0
        self._streaming = False

    @classmethod
    def connect(cls, conninfo: str) -> ReplicationStream:
        """A new replication connection: RetriableError while the server cannot take it (down,
        starting, full), CdcError naming the fix when it refuses it for good."""
        return cls(connect_errors.connect(conninfo, replication="database"))

    @property
    def streaming(self) -> bool:
        return self._streaming

    @property
    def connection(self) -> psycopg.Connection[tuple[object, ...]]:
        return self._conn

    @property
    def backend_pid(self) -> int:
        """The PID of the server's WAL sender serving this connection."""
        return self._pgconn.backend_pid

    def create_slot(self, slot: str, *, export_snapshot: bool, temporary: bool = False) -> tuple[int, str | None]:
        """CREATE_REPLICATION_SLOT ... pgoutput: the consistent point, and the exported snapshot
        name (valid until this connection runs its next command). A temporary slot is dropped
        by the server when this connection ends."""
        action = "EXPORT_SNAPSHOT" if export_snapshot else "NOEXPORT_SNAPSHOT"
        kind = "TEMPORARY LOGICAL" if temporary else "LOGICAL"
        row = self._conn.execute(f"CREATE_REPLICATION_SLOT {_quote_ident(slot)} {kind} pgoutput {action}").fetchone()
        assert row is not None
        return pgoutput.parse_lsn(str(row[1])), (str(row[2]) if row[2] else None)

    def start(self, slot: str, publication: str, start_lsn: int) -> None:
        options = f"proto_version '1', publication_names '{publication.replace(chr(39), chr(39) * 2)}', messages 'true'"
        command = f"START_REPLICATION SLOT {_quote_ident(slot)} LOGICAL {pgoutput.format_lsn(start_lsn)} ({options})"
        try:
            self._pgconn.send_query(command.encode())
            while self._pgconn.is_busy():
                self._wait(1.0)
                self._pgconn.consume_input()
            result = self._pgconn.get_result()
        except psycopg.OperationalError as exc:  # the connection died since it was opened
            raise RetriableError(f"replication connection lost before START_REPLICATION: {exc}") from exc
        if result is None or result.status != pq.ExecStatus.COPY_BOTH:
            raise _refusal(result, "START_REPLICATION failed", slot)
        self._streaming = True
        self.flushed_lsn = max(self.flushed_lsn, start_lsn)
        self.received_lsn = max(self.received_lsn, start_lsn)

    def _wait(self, timeout: float) -> None:
        readable, _, _ = select.select([self._pgconn.socket], [], [], timeout)
        del readable

    def read(self, timeout: float) -> XLogData | Keepalive | None:
        """The next message, or None after ``timeout`` seconds without one."""
        deadline = time.monotonic() + timeout
        pulled = False
        while True:
            try:
                size, data = self._pgconn.get_copy_data(1)
            except psycopg.OperationalError as exc:
                raise RetriableError(f"replication connection lost: {exc}") from exc
            if size > 0:
                message = pgoutput.decode_copy_data(data)
                if isinstance(message, XLogData):
                    self.received_lsn = max(self.received_lsn, message.wal_end, message.start_lsn)
                elif message.reply_requested:
                    self.send_status(reply=False)
                self._maybe_send_status()
                return message
            if size == -1:
                raise _refusal(self._pgconn.get_result(), "the server ended the replication stream")
            if size < -1:
                raise RetriableError(f"replication stream error: {self._pgconn.error_message.decode(errors='replace')}")
            if not pulled:
                # libpq's buffer is empty: first take what the socket already holds, without
                # blocking. Skipping this (with a zero timeout) ends a poll after one socket read's
                # worth of messages, about 150: measured, 340 polls for 50k changes.
                pulled = True
                self._consume()
                continue
            self._maybe_send_status()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._wait(min(remaining, 1.0))
            self._consume()

    def _consume(self) -> None:
        try:
            self._pgconn.consume_input()
        except psycopg.OperationalError as exc:
            raise RetriableError(f"replication connection lost: {exc}") from exc

    def read_many(self, limit: int, timeout: float) -> list[XLogData | Keepalive]:
        """Up to ``limit`` messages: whatever is buffered at once, else wait up to ``timeout``
        for the first. Draining the buffer in one call keeps the per-message cost down."""
        first = self.read(timeout)
        if first is None:
            return []
        messages = [first]
        get, decode = self._pgconn.get_copy_data, pgoutput.decode_copy_data
        pulled_more = False
        while len(messages) < limit:
            try:
                size, data = get(1)
            except psycopg.OperationalError as exc:
                raise RetriableError(f"replication connection lost: {exc}") from exc
            if size == 0 and not pulled_more:
                pulled_more = True  # libpq's buffer is empty: take what the socket holds, once
                self._consume()
                continue
            if size <= 0:
                break  # nothing more at hand (or the end of the stream: read() reports it next time)
            pulled_more = False
            message = decode(data)
            if isinstance(message, XLogData):
                if message.wal_end > self.received_lsn:
                    self.received_lsn = message.wal_end
            elif message.reply_requested:
                self.send_status()
            messages.append(message)
        self._maybe_send_status()
        return messages

    def confirm(self, flushed_lsn: int) -> None:
        """The engine durably committed everything up to ``flushed_lsn``: tell the server."""
        if flushed_lsn > self.flushed_lsn:
            self.flushed_lsn = flushed_lsn
            self.send_status()

    def send_status(self, reply: bool = False) -> None:
        if not self._streaming:
            return
        written = max(self.received_lsn, self.flushed_lsn)
        message = pgoutput.standby_status_update(
            written, self.flushed_lsn, self.flushed_lsn, time.time_ns() // 1000, reply
        )
        try:
            self._pgconn.put_copy_data(message)
            self._pgconn.flush()
        except psycopg.OperationalError as exc:
            raise RetriableError(
                f"replication connection lost while confirming {pgoutput.format_lsn(self.flushed_lsn)}: {exc}"
            ) from exc
        self._last_status = time.monotonic()

    def _maybe_send_status(self) -> None:
        if time.monotonic() - self._last_status >= STATUS_INTERVAL_S:
            self.send_status()

    def keep_alive(self) -> None:
        """While the stream is not read (a blocking snapshot), still tell the server we live."""
        self._maybe_send_status()

    def close(self) -> None:
        """Close the connection: the slot becomes inactive at once."""
        self._streaming = False
        try:
            self._conn.close()
        except Exception as exc:  # closing a broken connection must not hide the real error
            log.debug("closing the replication connection: %s", exc)


class SlotActiveError(RetriableError):
    """The slot is used by another connection (maybe a previous run not yet noticed dead)."""


#: SQLSTATEs that end streaming for good, beyond the connection refusals (connect_errors), and
#: the fix: 42704 undefined_object (the slot, or the publication dropped while streaming),
#: 55000 object_not_in_prerequisite_state (a slot invalidated by max_slot_wal_keep_size, made in
#: another database, or wal_level below logical).
_STREAM_REFUSALS = {
    "42704": "create it, or let the connector create it (publication.autocreate.mode; for the slot remove "
    "the stored offsets, or use snapshot.mode=when_needed)",
    "55000": "the slot cannot serve this stream: drop it and let the connector create it again "
    "(snapshot.mode=when_needed re-reads the tables), or fix the server's wal_level",
}


def _refusal(result: pq.abc.PGresult | None, what: str, slot: str = "") -> CdcError:
    """The error a failed replication command (or stream) ends with, told by its SQLSTATE."""
    message = result.error_message.decode(errors="replace").strip() if result is not None else ""
    raw = result.error_field(pq.DiagnosticField.SQLSTATE) if result is not None else None
    return stream_error(raw.decode() if raw else None, f"{what}: {message or 'no reason given'}", slot)


def stream_error(state: str | None, detail: str, slot: str = "") -> CdcError:
    """55006 object_in_use (the slot still held, e.g. by our own WAL sender the server has not
    reaped yet) is retried as SlotActiveError; a refusal no retry mends is fatal, naming the
    fix; anything else (57P01 terminated, a crash, class 08, no code at all) is retriable."""
    if state:
        detail = f"{detail} (SQLSTATE {state})"
    if state == "55006":
        return SlotActiveError(
            f"replication slot {slot!r} is in use: {detail}. Stop the other consumer, or set a different "
            "slot.name; a crashed previous run frees it within wal_sender_timeout"
        )
    fix = connect_errors.state_fix(state) or _STREAM_REFUSALS.get(state or "")
    if fix is not None:
        return CdcError(f"{detail}: {fix}")
    return RetriableError(detail)
