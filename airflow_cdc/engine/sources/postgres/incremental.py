"""PostgreSQL's side of incremental snapshots (a :class:`ChunkSource`): key-ordered chunks in
read-only transactions, watermarks in the signal table (or WAL messages in read-only mode), and
which transactions a chunk's read saw (its snapshot). The SQL is composed in
:mod:`.chunk_queries`; a chunk's rows wait in :mod:`.chunk_rows` until they are released.

psycopg's errors stay here: a lost connection leaves as RetriableError (the window is read
again, on a new connection: :mod:`.chunk_connections`), any other refused query as
TableReadError (the snapshot fails the table and goes on).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.records import Partition, SourceRecord
from airflow_cdc.engine.signals import watermark
from airflow_cdc.engine.signals.signal import SignalError
from airflow_cdc.engine.snapshots.chunks import (
    NO_PRIMARY_KEY,
    UNKNOWN_SCHEMA,
    Chunk,
    TablePlan,
    TableReadError,
)
from airflow_cdc.engine.snapshots.filter_check import FilterSyntax, Quote, Reading, check_single_predicate
from airflow_cdc.engine.sources.postgres import blocking
from airflow_cdc.engine.sources.postgres import chunk_queries as queries
from airflow_cdc.engine.sources.postgres.catalog import TableColumns
from airflow_cdc.engine.sources.postgres.changes import TableSchema
from airflow_cdc.engine.sources.postgres.chunk_connections import ChunkConnections
from airflow_cdc.engine.sources.postgres.chunk_queries import ChunkKey
from airflow_cdc.engine.sources.postgres.chunk_rows import ChunkRows, record_maker
from airflow_cdc.engine.sources.postgres.snapshot_columns import SnapshotColumns, plan_columns
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes
from airflow_cdc.engine.sources.postgres.visibility import KEEP_SNAPSHOT, KEPT_SNAPSHOT, READ, ReadSnapshot

#: How PostgreSQL's lexer quotes, for the filter check: '...' takes backslash escapes only with
#: standard_conforming_strings off, E'...' always, B'...' and X'...' never; "..." is an identifier;
#: $tag$...$tag$ quotes anything.
FILTER_SYNTAX = FilterSyntax(
    "PostgreSQL",
    quotes=(Quote("'", "string"), Quote('"', "identifier")),
    comments=("--", "/*"),
    readings=(
        Reading("standard_conforming_strings on", backslash_in=""),
        Reading("standard_conforming_strings off", backslash_in="'"),
    ),
    escape_prefixes="eE",
    plain_prefixes="bBxX",
    dollar_quotes=True,
)
P = ParamSpec("P")
R = TypeVar("R")


def _engine_errors(method: Callable[P, R]) -> Callable[P, R]:
    """psycopg's errors as the engine's: RetriableError for a lost connection (or a cancelled
    query), TableReadError for a query the server refused."""

    @functools.wraps(method)
    def mapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except psycopg.OperationalError as exc:
            raise RetriableError(f"incremental snapshot: the database went away: {exc}") from exc
        except psycopg.Error as exc:
            raise TableReadError(str(exc).strip()) from exc

    return mapped


class PostgresChunkSource:
    def __init__(
        self,
        catalog_conn: Callable[[], psycopg.Connection[tuple[Any, ...]]],
        tables: dict[str, tuple[TableColumns, TableSchema]],
        *,
        server: str,
        database: str,
        partition: Partition,
        signal_table: tuple[str, str] | None,
        strategy: str,
        read_only: bool,
        conninfo: str,
        threads: int = 1,
        batch: int = 256,
        modes: ValueModes | None = None,
        lookup: Callable[[int], TypeInfo] | None = None,
        replan: Callable[[str], tuple[TableColumns, TableSchema] | None] | None = None,
    ) -> None:
        self._modes, self._lookup = modes, lookup
        self._replan = replan
        self._columns: dict[str, SnapshotColumns] = {}
        self._iso_utc: bool | None = None
        self._threads, self._batch = threads, batch
        self._connections = ChunkConnections(conninfo)
        self._executor: ThreadPoolExecutor | None = None
        # Asked for at each use: the task replaces its catalog connection when the server was
        # restarted, and a connection kept here would stay the dead one.
        self._catalog_conn = catalog_conn
        self._tables = tables
        self._server, self._database, self._partition = server, database, partition
        self._signal = signal_table
        self._strategy = strategy
        self._read_only = read_only
        self._chunking: dict[tuple[str, str | None], ChunkKey] = {}
        self._surrogates: dict[str, str] = {}

    # -- tables ----------------------------------------------------------------------------------
    def snapshot_tables(self) -> list[str]:
        signal = ".".join(self._signal) if self._signal else None
        return sorted(name for name in self._tables if name != signal)

    def topic_of(self, table: str) -> str:
        return self._tables[table][1].topic

    @_engine_errors
    def check_table(self, plan: TablePlan) -> str | None:
        if plan.name not in self._tables:
            self._refresh(plan.name)  # created since the task started
        if plan.name not in self._tables:
            return UNKNOWN_SCHEMA
        try:
            self._key(plan)
        except LookupError:
            return NO_PRIMARY_KEY
        return None

    def _key(self, plan: TablePlan) -> ChunkKey:
        cached = self._chunking.get((plan.name, plan.surrogate_key))
        if cached is not None:
            return cached
        table, schema = self._tables[plan.name]
        if plan.surrogate_key:
            columns = [plan.surrogate_key]
            if plan.surrogate_key not in {name for name, _, _ in table.columns}:
                raise LookupError(f"{plan.name} has no column {plan.surrogate_key!r}")
            if not schema.key:
                self._surrogates[schema.topic] = plan.surrogate_key
        else:
            columns = list(schema.key)
        if not columns:
            raise LookupError(f"{plan.name} has no primary key")
        rows = self._conn.execute(
            """
            select a.attname, format_type(a.atttypid, a.atttypmod) from pg_attribute a
            where a.attrelid = %s and a.attname = any(%s)
            """,
            (table.oid, columns),
        ).fetchall()
        types = dict(rows)
        chunking = ChunkKey(tuple(columns), tuple(types[c] for c in columns))
        self._chunking[(plan.name, plan.surrogate_key)] = chunking
        return chunking

    @_engine_errors
    def check_filter(self, table: str, predicate: str) -> None:
        check_single_predicate(table, predicate, FILTER_SYNTAX)
        if table not in self._tables:
            return  # reported as UNKNOWN_SCHEMA when its turn comes
        query = sql.SQL("select 1 from {} where ({}) limit 0").format(self._ident(table), sql.SQL(predicate))
        try:
            with self._read_only_txn() as conn:
                conn.execute(query)
        except psycopg.Error as exc:
            raise SignalError(f"filter {predicate!r} for {table} is refused by the server: {exc}".strip()) from None

    @_engine_errors
    def estimate_rows(self, table: str) -> int:
        if table not in self._tables:
            return 0
        row = self._conn.execute("select reltuples::bigint from pg_class where oid = %s", (self._tables[table][0].oid,))
        found = row.fetchone()
        return max(0, int(found[0])) if found else 0

    # -- reading ----------------------------------------------------------------------------------
    def _refresh(self, table: str) -> None:
        """The table's plan from the catalog as it is now, as Debezium's ``refreshTableSchema``
        does when a table's scan starts: a column added, dropped or renamed since the plan was
        made (the stream learns of it only at the table's next change) would otherwise be read by
        the old one - a renamed column's old name fails the chunk query."""
        fresh = self._replan(table) if self._replan is not None else None
        if fresh is None:
            return
        self._tables[table] = fresh
        self._columns.pop(table, None)
        for cached in [k for k in self._chunking if k[0] == table]:
            del self._chunking[cached]

    @_engine_errors
    def max_key(self, plan: TablePlan) -> tuple[str, ...] | None:
        self._refresh(plan.name)  # the scan of this table starts
        key = self._key(plan)
        query = queries.max_key_query(self._ident(plan.name), key, queries.where(plan, key))
        with self._read_only_txn() as conn:
            row = conn.execute(query).fetchone()
        return None if row is None else tuple(row)

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
        """The open watermark, the chunk's read-only transaction and the close watermark commit
        in turn, so the chunk's snapshot is taken after the open watermark is in the log and the
        close watermark comes after it. Two round trips (:mod:`.blocking` says why that counts):
        the open watermark with the read, then the read's commit with the close watermark (and
        the read's snapshot). The rows stay in libpq's results until the stream reaches the close
        and releases them."""
        try:
            return self._read_window(window_id, plan, after, upto, limit, correlation_id)
        except psycopg.OperationalError:
            self._connections.window_lost()  # the next window is read on a new connection
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
        _, schema = self._tables[plan.name]
        conn = self._connections.window()
        opened = time.time_ns()
        opening = self._watermark(window_id, "open", watermark.metadata(opened, None, correlation_id, plan.name))
        try:
            if self._threads > 1 and limit >= 2 * self._threads:
                parts, complete = self._read_parallel(conn, opening, plan, after, upto, limit)
            else:
                query = self._range_query(plan, after, upto, limit)
                read = sql.SQL("; ").join([opening, READ, KEEP_SNAPSHOT, query])
                parts = [blocking.Rows(self._chunk_cursor(conn, plan.name), blocking.execute(conn, read))]
                complete = len(parts[0]) < limit
            columns = self._select_list(plan.name)
            last = next((part for part in reversed(parts) if len(part)), None)
            last_key = None if last is None else tuple(last.load(len(last) - 1)[0][len(columns.expressions) :])
        except BaseException:
            blocking.rollback(conn)  # e.g. a parallel reader failed: the next window needs a clean connection
            raise
        closing = watermark.metadata(opened, time.time_ns(), correlation_id, plan.name)
        close = sql.SQL("; ").join([sql.SQL("commit"), self._watermark(window_id, "close", closing), KEPT_SNAPSHOT])
        seen = ReadSnapshot.parse(blocking.execute(conn, close).get_value(0, 0).decode())  # type: ignore[union-attr]
        make = record_maker(schema, columns, server=self._server, database=self._database, partition=self._partition)
        rows = ChunkRows(parts, make, self._batch)
        return Chunk(rows, last_key, complete, seen)

    def _range_query(
        self, plan: TablePlan, after: tuple[str, ...] | None, upto: tuple[str, ...], limit: int | None
    ) -> sql.Composed:
        """Rows with after < key <= upto in key order (at most ``limit``), each followed by its
        key's text."""
        columns = self._select_list(plan.name)
        key = self._key(plan)
        where = queries.where(plan, key, after, upto)
        return queries.range_query(self._ident(plan.name), columns.expressions, key, where, limit)

    def _chunk_cursor(self, conn: psycopg.Connection[tuple[Any, ...]], table: str) -> psycopg.Cursor[tuple[Any, ...]]:
        """A cursor whose loaders read the columns that arrive as text as the stream's text
        (one set of converters for both)."""
        cursor = conn.cursor()
        for type_oid in self._select_list(table).text_oids:
            cursor.adapters.register_loader(type_oid, TextLoader)
        return cursor

    def _select_list(self, table: str) -> SnapshotColumns:
        """The initial snapshot's column plan: values the server computes exactly as the text
        converters would, the rest as text (snapshot_columns.py)."""
        columns = self._columns.get(table)
        if columns is None:
            if self._iso_utc is None:
                row = (
                    self._connections.window()
                    .execute("select current_setting('DateStyle'), current_setting('TimeZone')")
                    .fetchone()
                )
                self._iso_utc = row is not None and row[0].startswith("ISO") and row[1] == "UTC"
            described, schema = self._tables[table]
            columns = plan_columns(described, schema, self._modes, self._lookup, temporal_text=self._iso_utc)
            self._columns[table] = columns
        return columns

    def _read_parallel(
        self,
        conn: psycopg.Connection[tuple[Any, ...]],
        opening: sql.Composable,
        plan: TablePlan,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        limit: int,
    ) -> tuple[list[blocking.Rows], bool]:
        """``incremental.snapshot.max.threads``: split the window's rows into key ranges (one
        index scan for the boundaries, after the open watermark) and read the ranges on several
        connections at once. All reads still happen between the window's watermarks, so the
        dedup rule holds. ``conn`` is left in the boundaries' read-only transaction, whose
        snapshot - older than the ranges' - stands for the window's (what it saw, they saw)."""
        key = self._key(plan)
        per_reader = -(-limit // self._threads)
        where = queries.where(plan, key, after, upto)
        boundaries = queries.boundaries_query(self._ident(plan.name), key, where, limit, per_reader)
        read = sql.SQL("; ").join([opening, READ, KEEP_SNAPSHOT, boundaries])
        bounds = [tuple(row[:-1]) for row in blocking.Rows(conn.cursor(), blocking.execute(conn, read)).load()]
        # Ranges between boundaries are read whole (rows inserted there meanwhile included: no
        # gap); only the last range is limited, and where it stops the next window begins.
        inner = bounds[: self._threads - 1]
        starts: list[tuple[str, ...] | None] = [after, *inner]
        ends: list[tuple[str, ...]] = [*inner, upto]
        jobs = [
            (start, end, None if i < len(inner) else per_reader)
            for i, (start, end) in enumerate(zip(starts, ends, strict=True))
        ]
        futures = [self._pool().submit(self._read_on_own_connection, plan, *job) for job in jobs]
        parts = [future.result() for future in futures]
        return parts, len(parts[-1]) < per_reader

    def _read_on_own_connection(
        self, plan: TablePlan, after: tuple[str, ...] | None, upto: tuple[str, ...], limit: int | None
    ) -> blocking.Rows:
        conn = self._connections.reader()
        lost = False
        try:
            read = sql.SQL("begin read only; ") + self._range_query(plan, after, upto, limit)
            rows = blocking.Rows(self._chunk_cursor(conn, plan.name), blocking.execute(conn, read))
            blocking.execute(conn, sql.SQL("commit"))
            return rows
        except psycopg.OperationalError:
            lost = True
            raise
        except BaseException:
            blocking.rollback(conn)
            raise
        finally:
            self._connections.give_back(conn, lost=lost)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="cdc-chunk-reader")
        return self._executor

    def interrupt(self) -> None:
        """Cancel a query the window reader may be running (the stop must not wait on it)."""
        self._connections.interrupt()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._connections.close()

    @property
    def _conn(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The task's catalog connection (max keys, estimates, horizons, filters)."""
        return self._catalog_conn()

    def transaction(self, record: SourceRecord) -> Hashable:
        return record.offset.get("txId")

    @_engine_errors
    def horizon(self) -> ReadSnapshot:
        row = self._conn.execute("select txid_current_snapshot()::text").fetchone()
        assert row is not None
        return ReadSnapshot.parse(row[0])

    def dedup_key(self, record: SourceRecord) -> Hashable:
        if record.key:
            return tuple(record.key.values())
        column = self._surrogates.get(record.topic)
        value = record.value or {}
        row = value.get("after") or value.get("before") or {}
        return ("surrogate", row.get(column)) if column else None

    # -- watermarks -------------------------------------------------------------------------------
    def _watermark(self, window_id: str, kind: str, data: str) -> sql.Composed:
        return queries.watermark_statements(
            window_id, kind, data, signal=self._signal, strategy=self._strategy, read_only=self._read_only
        )

    # -- helpers ----------------------------------------------------------------------------------
    def _ident(self, table: str) -> sql.Composable:
        columns, _ = self._tables[table]
        return sql.Identifier(columns.schema, columns.name)

    @contextlib.contextmanager
    def _read_only_txn(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """On the task thread's connection: filters run read-only (they can read, never write)."""
        conn = self._conn
        with conn.transaction():
            conn.execute("set transaction read only")
            yield conn
