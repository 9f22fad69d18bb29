"""The incremental snapshot's own connections to PostgreSQL: the window reader's (watermarks and
chunks, on the reader thread) and the chunk readers' (``incremental.snapshot.max.threads``).

Each is opened when first needed and opened again once lost: a backend terminated by an
administrator (``pg_terminate_backend``), a failover or a proxy's idle timeout fails the read
that was using it (RetriableError: the engine retries the poll, the window is read again), and
the next read gets a new connection - a lost one is never used again.

They carry names of their own in ``pg_stat_activity`` (``application_name``: the task's, then
what the connection is for), as Debezium names its JDBC connections by purpose ("Debezium
General", "Debezium Streaming"): an administrator can tell the snapshot's reader from the
stream's connection before terminating one.
"""

from __future__ import annotations

import contextlib
import queue
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

WINDOW_PURPOSE = "incremental snapshot"
READER_PURPOSE = "incremental snapshot reader"
#: What the server keeps of an application_name (NAMEDATALEN - 1 bytes; the rest is cut).
_NAME_BYTES = 63

Connection = psycopg.Connection[tuple[Any, ...]]


def application_name(conninfo: str, purpose: str) -> str:
    """The task's application_name with ``purpose`` after it, cut so that the purpose survives
    the server's limit."""
    base = str(conninfo_to_dict(conninfo).get("application_name") or "airflow-cdc")
    room = _NAME_BYTES - len(purpose.encode()) - 1
    return f"{base.encode()[:room].decode(errors='ignore')} {purpose}"


class ChunkConnections:
    """The window reader's connection (one thread uses it) and a pool of chunk readers'."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._window: Connection | None = None
        self._readers: queue.Queue[Connection] = queue.Queue()

    def window(self) -> Connection:
        """The window reader's connection, opened again if it was lost (its own: the task
        thread's catalog connection is never used from two threads)."""
        conn = self._window
        if conn is None or conn.closed:
            self._window = conn = self._connect(WINDOW_PURPOSE)
        return conn

    def window_lost(self) -> None:
        """A read on the window's connection failed for the connection (psycopg's
        OperationalError): close it, and the next read opens another. libpq may not have marked
        it closed yet (a terminated backend's last message read, its socket not yet seen shut)."""
        conn, self._window = self._window, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def reader(self) -> Connection:
        """A chunk reader's connection: an idle one of the pool, or a new one."""
        while True:
            try:
                conn = self._readers.get_nowait()
            except queue.Empty:
                return self._connect(READER_PURPOSE)
            if not conn.closed:
                return conn

    def give_back(self, conn: Connection, *, lost: bool = False) -> None:
        """A chunk reader is done with ``conn``; ``lost``: its read failed for the connection."""
        if lost or conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.close()
            return
        self._readers.put(conn)

    def interrupt(self) -> None:
        """Cancel a query the window reader may be running (the stop must not wait on it)."""
        conn = self._window
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.cancel_safe(timeout=5)

    def close(self) -> None:
        conn, self._window = self._window, None
        if conn is not None:
            conn.close()
        while True:
            try:
                self._readers.get_nowait().close()
            except queue.Empty:
                return

    def _connect(self, purpose: str) -> Connection:
        # Autocommit: every transaction on it is explicit (``BEGIN [READ ONLY]; ...; COMMIT``).
        return psycopg.connect(
            self._conninfo, autocommit=True, application_name=application_name(self._conninfo, purpose)
        )
