"""Statements sent with libpq's blocking ``PQexec``, the GIL released for the whole round trip.

The incremental snapshot reads chunks on a thread of its own while the task thread delivers
the rows before them, and both need the GIL. psycopg's regular execute waits for the server in
small steps (every time the socket runs dry, until the result is complete), and each step hands
the GIL back: while the other thread is busy, every hand-back costs up to the switch interval
(5 ms). Measured here, a 1024-row chunk beside a busy thread: 270 ms through ``cursor.execute``,
32 ms through one ``PQexec``. So the window reader sends each group of statements as one simple
query (``BEGIN; ...; COMMIT; ...``, bound on our side) and waits once.

``PQexec`` returns the last statement's result, so a group that reads ends with its SELECT.
The rows are loaded by psycopg's own loaders (those registered on the cursor), when asked for.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg
from psycopg import errors, pq, sql
from psycopg.adapt import Transformer


def execute(conn: psycopg.Connection[Any], statements: sql.Composable) -> pq.abc.PGresult:
    """Run ``statements`` (several, ``;``-separated, parameters already bound as literals) and
    return the last one's result; raise psycopg's error for a failed one. After a failure the
    connection is rolled back to idle, so it is usable again."""
    result = conn.pgconn.exec_(statements.as_bytes(conn))
    if result.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
        return result
    if conn.pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError(
            f"the connection was lost: {conn.pgconn.error_message.decode(errors='replace').strip()}"
        )
    error = errors.error_from_result(result, encoding=conn.info.encoding)
    rollback(conn)  # a failed explicit transaction
    raise error


def rollback(conn: psycopg.Connection[Any]) -> None:
    """End whatever transaction a failed group of statements left open (nothing if idle)."""
    if not conn.closed and conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        with contextlib.suppress(psycopg.Error):
            conn.pgconn.exec_(b"rollback")


class Rows:
    """A result's rows, loaded by the cursor's loaders (text format) a slice at a time: until
    then they stay in libpq's memory, no Python object per row."""

    def __init__(self, cursor: psycopg.Cursor[Any], result: pq.abc.PGresult) -> None:
        self._result = result
        self._transformer = Transformer(cursor)
        self._transformer.set_pgresult(result)

    def __len__(self) -> int:
        return self._result.ntuples

    def load(self, start: int = 0, stop: int | None = None) -> list[tuple[Any, ...]]:
        return self._transformer.load_rows(start, len(self) if stop is None else stop, tuple)

    def clear(self) -> None:
        """Free the result now (not whenever it is collected)."""
        self._result.clear()
