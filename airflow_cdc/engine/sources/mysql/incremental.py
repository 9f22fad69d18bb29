"""MySQL's and MariaDB's side of incremental snapshots (a :class:`ChunkSource`): key-ordered
chunks read between watermark rows written into the signal table (Debezium's default for MySQL),
which the binlog then brings back in commit order.

Which changes drop a chunk row needs no read visibility here (``Chunk.visibility`` is None: every
change streamed since the window was queued drops its row). A transaction is in the binlog a
moment before InnoDB makes it visible, but both servers commit in binlog order
(``binlog_order_commits``, MariaDB's ordered group commit): once the open watermark's INSERT has
returned, every transaction before it in the binlog is visible, so the chunk read after it misses
none of them; those after it are streamed after the window was queued.

In read-only mode (``read.only``, :mod:`.gtid_windows`) nothing is written: each chunk is read
between two reads of the server's executed GTID set, and the stream closes the window by GTID.
On MariaDB the chunk is read in a consistent snapshot whose binlog point says exactly which
transactions it saw (``Chunk.visibility``); MySQL has no such point, and every change streamed
since the window was queued drops its row, as above.

Chunk keys travel as text (the JSON of the offsets' snapshot context) and are compared by the
server with the bound cast back to the column's type (``CAST('42' AS SIGNED)``), binary keys as
hex; composite keys are compared column by column (``k1 > a or (k1 = a and k2 > b)``, which the
optimizer turns into a range). pymysql's errors stay here (:mod:`.chunk_connection`): a lost
connection leaves as RetriableError - the window is read again on a new connection - any other
refused query as TableReadError.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import pymysql

from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.signals import watermark
from airflow_cdc.engine.signals.signal import WINDOW_CLOSE, WINDOW_OPEN, SignalError
from airflow_cdc.engine.snapshots.chunks import (
    NO_PRIMARY_KEY,
    UNKNOWN_SCHEMA,
    Chunk,
    TablePlan,
    TableReadError,
)
from airflow_cdc.engine.snapshots.filter_check import FilterSyntax, Quote, Reading, check_single_predicate
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder, RowPlan
from airflow_cdc.engine.sources.mysql.chunk_connection import WindowConnection
from airflow_cdc.engine.sources.mysql.chunk_connection import engine_errors as _engine_errors
from airflow_cdc.engine.sources.mysql.chunk_keys import compare, compare_args, key_text, quote
from airflow_cdc.engine.sources.mysql.chunk_rows import ChunkRows
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.gtid_windows import GtidVisibility, GtidWindow, GtidWindows
from airflow_cdc.engine.sources.mysql.positions import GtidSet, MariaDbGtidSet
from airflow_cdc.engine.sources.mysql.schema import read_tables, row_shape
from airflow_cdc.engine.sources.mysql.server import ServerInfo, ServerSetupError, executed_gtids
from airflow_cdc.engine.sources.mysql.types import MySqlColumn, ValueModes

#: How MySQL's lexer quotes, for the filter check: backslash escapes in both kinds of strings
#: unless sql_mode says otherwise, "..." an identifier under ANSI_QUOTES; ``#`` starts a comment.
FILTER_SYNTAX = FilterSyntax(
    "MySQL",
    quotes=(Quote("'", "string"), Quote('"', "string"), Quote("`", "identifier")),
    comments=("--", "/*", "#"),
    readings=(
        Reading("the default sql_mode", backslash_in="'\""),
        Reading("sql_mode ANSI_QUOTES", backslash_in="'"),
        Reading("sql_mode NO_BACKSLASH_ESCAPES", backslash_in=""),
    ),
)
TableKey = tuple[str, str]
#: Unknown column, table definition changed: a DDL between a chunk's definition and its rows.
_DEFINITION_CHANGED = frozenset((1054, 1412))
_READ_ATTEMPTS = 5


def check_read_only(server: ServerInfo) -> None:
    """ServerSetupError unless the server has the GTIDs read-only snapshots are bounded by
    (Debezium refuses such a connector at start: "Read only connection requires GTID_MODE to be ON")."""
    if server.mariadb:
        major = server.version.split(".", 1)[0]
        if major.isdigit() and int(major) < 10:
            raise ServerSetupError(
                f"read.only incremental snapshots need GTIDs, which MariaDB {server.version} lacks: "
                "upgrade to MariaDB 10.0 or later, or set read.only=false (watermarks in the signal table)"
            )
        return
    if not server.gtid_mode:
        raise ServerSetupError(
            "read.only incremental snapshots need GTIDs, but the server's gtid_mode is OFF (Debezium: "
            '"Read only connection requires GTID_MODE to be ON"): set gtid_mode=ON and '
            "enforce_gtid_consistency=ON, or set read.only=false (watermarks in the signal table)"
        )


class MySqlChunkSource:
    """``tables``: the schema history's definitions (read, never changed, from the reader
    thread); ``connect``: a new connection (the reader thread's). ``conn`` is the task thread's.
    ``gtid_windows``: read-only mode - windows bounded by the executed GTID sets of ``server``."""

    def __init__(
        self,
        conn: Any,
        connect: Callable[[], Any],
        tables: Callable[[], dict[TableKey, Table]],
        *,
        captured: Callable[[str, str], bool],
        topic: Callable[[str, str], str],
        builder: ChangeBuilder,
        modes: ValueModes,
        signal_table: TableKey | None,
        strategy: str,
        batch: int = 256,
        gtid_windows: GtidWindows | None = None,
        server: ServerInfo | None = None,
    ) -> None:
        self._conn, self._tables = conn, tables
        self._captured, self._topic, self._builder, self._modes = captured, topic, builder, modes
        self._signal, self._strategy, self._batch = signal_table, strategy, batch
        self._gtid_windows, self._server = gtid_windows, server
        if gtid_windows is not None:
            assert server is not None
            check_read_only(server)
        #: Reads see an exact binlog point (MariaDB's consistent snapshots): changes are followed
        #: by transaction.
        self._exact = gtid_windows is not None and server is not None and server.mariadb
        self._window = WindowConnection(connect)
        self._surrogates: dict[str, str] = {}

    # -- tables ----------------------------------------------------------------------------------
    def snapshot_tables(self) -> list[str]:
        return sorted(f"{d}.{t}" for d, t in list(self._tables()) if self._captured(d, t) and (d, t) != self._signal)

    def topic_of(self, table: str) -> str:
        return self._topic(*_split(table))

    def _table(self, name: str) -> Table | None:
        return self._tables().get(_split(name))

    def check_table(self, plan: TablePlan) -> str | None:
        table = self._table(plan.name)
        if table is None:
            return UNKNOWN_SCHEMA
        try:
            self._key(plan, table)
        except LookupError:
            return NO_PRIMARY_KEY
        return None

    def _key(self, plan: TablePlan, table: Table) -> tuple[MySqlColumn, ...]:
        names = [plan.surrogate_key] if plan.surrogate_key else list(table.key)
        if not names:
            raise LookupError(f"{plan.name} has no primary key")
        by_name = {c.name: c for c in table.columns}
        if any(n not in by_name for n in names):
            raise LookupError(f"{plan.name} has no column {plan.surrogate_key!r}")
        if plan.surrogate_key and not table.key:
            self._surrogates[self.topic_of(plan.name)] = plan.surrogate_key
        return tuple(by_name[n] for n in names)

    @_engine_errors
    def check_filter(self, table: str, predicate: str) -> None:
        check_single_predicate(table, predicate, FILTER_SYNTAX)
        if self._table(table) is None:
            return  # reported as UNKNOWN_SCHEMA when its turn comes
        try:
            with self._read_only(self._conn) as cur:
                cur.execute(f"select 1 from {self._ident(table)} where ({predicate}) limit 0")
        except pymysql.Error as exc:
            raise SignalError(f"filter {predicate!r} for {table} is refused by the server: {exc}") from None

    @_engine_errors
    def estimate_rows(self, table: str) -> int:
        with self._conn.cursor() as cur:
            cur.execute(
                "select table_rows from information_schema.tables where table_schema = %s and table_name = %s",
                _split(table),
            )
            found = cur.fetchone()
        return int(found[0] or 0) if found else 0

    # -- reading ----------------------------------------------------------------------------------
    @_engine_errors
    def max_key(self, plan: TablePlan) -> tuple[str, ...] | None:
        table = self._table(plan.name)
        assert table is not None
        key = self._key(plan, table)
        where, args = self._where(plan, key, None, None)
        order = ", ".join(f"{quote(c.name)} desc" for c in key)
        texts = ", ".join(key_text(c) for c in key)
        with self._read_only(self._conn) as cur:
            cur.execute(f"select {texts} from {self._ident(plan.name)}{where} order by {order} limit 1", args)
            row = cur.fetchone()
        return None if row is None else tuple(_text(v) for v in row)

    @_engine_errors
    def read_window(
        self,
        window_id: str,
        plan: TablePlan,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        limit: int,
        correlation_id: str | None = None,
    ) -> Chunk:
        """The open watermark, the chunk's read-only transaction and the close watermark, each
        committed before the next begins: the chunk's snapshot is taken after the open
        watermark is in the binlog, and the close watermark follows it. In read-only mode the
        executed GTID sets before and after the read take the watermarks' places."""
        try:
            return self._read_window(window_id, plan, after, upto, limit, correlation_id)
        except BaseException as exc:
            self._window.failed(exc)  # lost: the next window is read on a new connection
            raise

    def _read_window(
        self,
        window_id: str,
        plan: TablePlan,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        limit: int,
        correlation_id: str | None,
    ) -> Chunk:
        conn = self._window.get()
        visibility: GtidVisibility | None = None
        if self._gtid_windows is not None:
            low = self._executed(conn)
            seen: list[Any] = [None]

            def read(query: str, args: list[Any]) -> list[tuple[Any, ...]]:
                with self._consistent_snapshot(conn) as (cur, seen[0]):
                    cur.execute(query, args)
                    return list(cur.fetchall())

            table, rows = self._read_current(conn, plan, after, upto, limit, read)
            self._gtid_windows.add(GtidWindow(window_id, low, self._executed(conn)))
            visibility = None if seen[0] is None else GtidVisibility(seen[0])
        else:
            opened = time.time_ns()
            self._watermark(conn, window_id, "open", watermark.metadata(opened, None, correlation_id, plan.name))
            table, rows = self._read_current(conn, plan, after, upto, limit, lambda q, a: self._read(conn, q, a))
            closing = watermark.metadata(opened, time.time_ns(), correlation_id, plan.name)
            self._watermark(conn, window_id, "close", closing)
        width = len(table.columns)
        last_key = tuple(_text(v) for v in rows[-1][width:]) if rows else None
        shape, topic = row_shape(table), self.topic_of(plan.name)

        def streamed_plan() -> RowPlan:  # the stream's definition (the same shape), at release
            return self._builder.plan(self._table(plan.name) or table, topic, self._modes, snapshot=True)

        def current() -> bool:
            return row_shape(self._table(plan.name)) == shape

        chunk_rows = ChunkRows(rows, width, streamed_plan, self._builder, self._batch)
        return Chunk(chunk_rows, last_key, len(rows) < limit, visibility, current)

    def _read_current(
        self,
        conn: Any,
        plan: TablePlan,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        limit: int,
        read: Callable[[str, list[Any]], list[tuple[Any, ...]]],
    ) -> tuple[Table, list[tuple[Any, ...]]]:
        """The chunk's rows, each followed by its key's texts, read with the table's definition
        now, by name: they are emitted only if the stream gives the table that shape when it
        reaches the window's close (Chunk.current), so a DDL after the stream's position, or one
        inside the window, has the chunk read again. A DDL between reading the definition and
        the rows (a column gone, the table rebuilt) has both read again."""
        for attempt in range(_READ_ATTEMPTS):
            table = read_tables(conn, [_split(plan.name)]).get(_split(plan.name))
            if table is None:
                raise TableReadError(f"{plan.name} no longer exists")
            key = self._key(plan, table)
            where, args = self._where(plan, key, after, upto)
            columns = ", ".join(quote(c.name) for c in table.columns)
            order = ", ".join(quote(c.name) for c in key)
            texts = ", ".join(key_text(c) for c in key)
            query = (
                f"select {columns}, {texts} from {self._ident(plan.name)}{where} order by {order} limit {int(limit)}"
            )
            try:
                return table, read(query, args)
            except pymysql.MySQLError as exc:
                if not exc.args or exc.args[0] not in _DEFINITION_CHANGED or attempt == _READ_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _read(self, conn: Any, query: str, args: list[Any]) -> list[tuple[Any, ...]]:
        with self._read_only(conn) as cur:
            cur.execute(query, args)
            return list(cur.fetchall())

    def dedup_key(self, record: SourceRecord) -> Hashable:
        if record.key:
            return tuple(record.key.values())
        column = self._surrogates.get(record.topic)
        value = record.value or {}
        row = value.get("after") or value.get("before") or {}
        return ("surrogate", row.get(column)) if column else None

    def transaction(self, record: SourceRecord) -> Hashable:
        if not self._exact:
            return None  # no read visibility (see the module's docstring): transactions are not followed
        value = record.value
        source = value.get("source") if type(value) is dict else None
        return source.get("gtid") if type(source) is dict else None

    @_engine_errors
    def horizon(self) -> GtidVisibility | None:
        """What a read started now would see (MariaDB read-only mode only)."""
        if not self._exact:
            return None
        with self._consistent_snapshot(self._conn) as (_, seen):
            pass
        return None if seen is None else GtidVisibility(seen)

    def interrupt(self) -> None:
        """Kill a query the window reader may be running (the stop must not wait on it)."""
        self._window.interrupt()

    def close(self) -> None:
        self._window.close()

    # -- helpers ----------------------------------------------------------------------------------
    def _watermark(self, conn: Any, window_id: str, kind: str, data: str) -> None:
        """A watermark row, committed on its own (the connection is in autocommit)."""
        assert self._signal is not None
        with conn.cursor() as cur:
            if kind == "close" and self._strategy == "insert_delete":
                cur.execute(f"delete from {self._ident('.'.join(self._signal))} where id = %s", (f"{window_id}-open",))
            else:
                cur.execute(
                    f"insert into {self._ident('.'.join(self._signal))} (id, type, data) values (%s, %s, %s)",
                    (f"{window_id}-{kind}", WINDOW_OPEN if kind == "open" else WINDOW_CLOSE, data),
                )

    def _executed(self, conn: Any) -> GtidSet:
        """The server's executed GTID set (Debezium's watermarks: ``gtid_binlog_pos`` on
        MariaDB, ``gtid_executed`` - SHOW BINARY LOG STATUS' ``Executed_Gtid_Set`` - on MySQL)."""
        assert self._server is not None
        gtids = executed_gtids(conn, self._server)
        assert gtids is not None  # check_read_only: the server has GTIDs
        return gtids

    @contextlib.contextmanager
    def _consistent_snapshot(self, conn: Any) -> Iterator[tuple[Any, GtidSet | None]]:
        """A read-only consistent-snapshot transaction and, on MariaDB, the GTID state it sees:
        its binlog point (``binlog_snapshot_file``/``_position``, which the server keeps
        consistent with the snapshot) through ``BINLOG_GTID_POS``."""
        with conn.cursor() as cur:
            cur.execute("start transaction with consistent snapshot, read only")
            try:
                seen: GtidSet | None = None
                if self._exact:
                    cur.execute(
                        "show status where variable_name in ('binlog_snapshot_file', 'binlog_snapshot_position')"
                    )
                    status = {str(k).lower(): _text(v) for k, v in cur.fetchall()}
                    cur.execute(
                        "select binlog_gtid_pos(%s, %s)",
                        (status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])),
                    )
                    found = cur.fetchone()
                    if found is not None and found[0] is not None:  # else: no exact rule this once
                        seen = MariaDbGtidSet.parse(_text(found[0]))
                yield cur, seen
            finally:
                with contextlib.suppress(pymysql.Error):
                    cur.execute("commit")

    def _where(
        self, plan: TablePlan, key: Sequence[MySqlColumn], after: Sequence[str] | None, upto: Sequence[str] | None
    ) -> tuple[str, list[str]]:
        parts: list[str] = []
        args: list[str] = []
        for bound, operator in ((after, ">"), (upto, "<=")):
            if bound is not None:
                parts.append(compare(key, operator))
                args += compare_args(bound, operator)
        if plan.filter:
            # The placeholders are pymysql's: a literal % in the filter must not look like one.
            parts.append(f"({plan.filter.replace('%', '%%')})")
        return ("", args) if not parts else (" where " + " and ".join(parts), args)

    @contextlib.contextmanager
    def _read_only(self, conn: Any) -> Iterator[Any]:
        """A read-only transaction: a filter can read, never write."""
        with conn.cursor() as cur:
            cur.execute("start transaction read only")
            try:
                yield cur
            finally:
                with contextlib.suppress(pymysql.Error):
                    cur.execute("commit")

    def _ident(self, table: str) -> str:
        database, name = _split(table)
        return f"{quote(database)}.{quote(name)}"


def _split(table: str) -> TableKey:
    database, _, name = table.partition(".")
    return database, name


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
