"""The MySQL/MariaDB incremental snapshot's reader connection (watermarks and chunks, on the
reader thread), and which of PyMySQL's errors are the connection's rather than the query's.

A connection killed by an administrator (``KILL <id>``), a failover or ``wait_timeout`` fails
the read that was using it: RetriableError, the engine retries the poll and the window is read
again, on a new connection - a lost one is never used again. PyMySQL alone does not ensure that:
after the server's last word (MariaDB's 1927 "Connection was killed", MySQL's 1053) the
connection still says it is open, and the next read would fail on it once more.

By code, never by message (the server writes messages in its ``lc_messages``): a server error
code below 2000 is the server refusing the query (TableReadError: the snapshot fails the table
and goes on), except the codes of a connection going away and of an interrupted query (``KILL
QUERY`` of the reader: its window is read again). Anything else - a client error (2000 and up),
an error without a code (a packet out of sequence, read from a connection cut half-way), a
socket's OSError - leaves the connection in no state to be used again.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import pymysql

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.snapshots.chunks import TableReadError

P = ParamSpec("P")
R = TypeVar("R")
#: Errors of a connection, not of a query: the server went away, is shutting down, killed us.
CONNECTION_ERRORS = frozenset((1053, 1077, 1152, 1158, 1159, 1160, 1161, 1927))
#: ER_QUERY_INTERRUPTED: ``KILL QUERY`` of the reader's statement; the connection is fine.
QUERY_INTERRUPTED = 1317


def connection_lost(exc: BaseException) -> bool:
    """``exc`` leaves the connection unusable (see the module's docstring)."""
    if isinstance(exc, OSError):
        return True
    if not isinstance(exc, pymysql.Error):
        return False
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0  # 0: none
    return isinstance(exc, pymysql.InterfaceError) or not code or code >= 2000 or code in CONNECTION_ERRORS


def engine_errors(method: Callable[P, R]) -> Callable[P, R]:
    """PyMySQL's errors as the engine's: RetriableError for a lost connection or an interrupted
    query, TableReadError for a query the server refused."""

    @functools.wraps(method)
    def mapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except (pymysql.Error, OSError) as exc:
            if connection_lost(exc):
                raise RetriableError(f"incremental snapshot: the database went away: {exc}") from exc
            if exc.args and exc.args[0] == QUERY_INTERRUPTED:
                raise RetriableError(f"incremental snapshot: the chunk's read was interrupted: {exc}") from exc
            raise TableReadError(str(exc).strip()) from exc

    return mapped


class WindowConnection:
    """The reader thread's connection, opened when first needed and again once lost;
    ``connect``: a new autocommit connection."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._conn: Any = None

    def get(self) -> Any:
        conn = self._conn
        if conn is None or not conn.open:
            self._conn = conn = self._connect()
        return conn

    def failed(self, exc: BaseException) -> None:
        """A read on it failed with ``exc``: if that was the connection's end, close it, and the
        next read opens another."""
        if connection_lost(exc):
            self.close()

    def interrupt(self) -> None:
        """Kill a query the reader may be running (the stop must not wait on it)."""
        conn = self._conn
        if conn is None or not conn.open:
            return
        with contextlib.suppress(pymysql.Error, OSError), self._connect() as killer, killer.cursor() as cur:
            cur.execute(f"KILL QUERY {int(conn.thread_id())}")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.Error, OSError):
                conn.close()
