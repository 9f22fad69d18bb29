"""The initial snapshot: every captured table read inside the snapshot that the replication
slot exported when it was created, so the rows read and the changes streamed afterwards meet
exactly at the slot's consistent point - no gap, no overlap.

Rows are read with one query per table, streamed in chunks (libpq's chunked-rows mode,
``snapshot.fetch.size`` rows per chunk): the server keeps producing rows on its own core while
the engine builds records, and memory stays flat whatever the table size. Where the result is
provably the same, the query itself computes Debezium's values and psycopg loads them in C
(``snapshot_columns``); the remaining columns arrive as the same text the stream delivers and go
through the same converters. Records are built ``batch_size`` rows at a time.

A table altered after the snapshot's point and before it is read: PostgreSQL's rewriting DDL
(``ALTER COLUMN ... TYPE``, ``TRUNCATE``) is not MVCC-safe - the exported snapshot would see the
table empty, every row silently missing - and a dropped column fails the read. So before a table
is read it is locked ``ACCESS SHARE`` (what the read takes anyway, held to the transaction's end:
no DDL comes between the check and the read) and its catalog entry as the snapshot sees it is
compared with the committed one; if they differ, that table and the rest are read in a fresh
transaction with the table's definition now. Those rows are newer than the slot's point, and the
changes streamed from the point converge on them, deletes included (as after an interrupted
snapshot, ADR 0004). Debezium's lockless snapshot reads such a table empty.

Measured here (``bench/pg_snapshot.py --quick``, 20 columns, 2 cores): the server-side cursor
(a round trip per 2000 rows, the server idle while the engine works and the other way round)
with every value converted in Python ran at 0.11 of ``psql COPY``; psycopg's row-by-row
``copy.rows()`` was slower still (each COPY row is its own protocol message).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

from airflow_cdc.engine.envelope import source_info
from airflow_cdc.engine.notifications import InitialSnapshotNotifications
from airflow_cdc.engine.records import Offset, Partition, PositionMarker, SourceRecord
from airflow_cdc.engine.sources.postgres.catalog import TableColumns
from airflow_cdc.engine.sources.postgres.changes import CONNECTOR, ChangeBuilder, TableSchema
from airflow_cdc.engine.sources.postgres.snapshot_columns import plan_columns
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes

#: libpq 17 added chunked-rows mode (``stream(size=...)``); older ones read through a cursor.
CHUNKED_ROWS = psycopg.pq.version() >= 170000

Plan = tuple[TableColumns, TableSchema]
#: A table's plan from the catalog as committed now; None: the table is gone.
Replan = Callable[[int], Plan | None]
#: A table's storage and columns, as one snapshot of the catalog sees them.
_CATALOG_ENTRY = """
    select c.relfilenode, array_agg(array[a.attname::text, a.atttypid::text, a.atttypmod::text] order by a.attnum)
    from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where c.oid = %s group by c.relfilenode
"""

log = logging.getLogger(__name__)


class SnapshotReader:
    def __init__(
        self,
        conninfo: str,
        snapshot_name: str | None,
        consistent_lsn: int,
        builder: ChangeBuilder,
        *,
        modes: ValueModes | None = None,
        lookup: Callable[[int], TypeInfo] | None = None,
    ) -> None:
        """``snapshot_name``: the slot's exported snapshot (rows exactly at ``consistent_lsn``),
        or None for a fresh transaction newer than ``consistent_lsn`` (see the connector).
        ``modes`` and ``lookup`` (pg_type) let the server compute values; without them every
        value is read as text and converted in Python."""
        self.consistent_lsn = consistent_lsn
        self._builder = builder
        self._modes, self._lookup = modes, lookup
        self._conninfo = conninfo
        self._conn = psycopg.connect(conninfo, autocommit=False)
        self._latest: psycopg.Connection[Any] | None = None  # the committed catalog, for the checks
        self._conn.execute("begin isolation level repeatable read read only")
        if snapshot_name is not None:
            self._conn.execute(sql.SQL("set transaction snapshot {}").format(sql.Literal(snapshot_name)))
        settings = self._conn.execute("select current_setting('DateStyle'), current_setting('TimeZone')").fetchone()
        #: Debezium's snapshot events carry the snapshot transaction's id.
        self.txid = self._transaction_id()
        # The temporal expressions rely on the session settings the text converters rely on.
        self._iso_utc = settings is not None and settings[0].startswith("ISO") and settings[1] == "UTC"
        self._started_ns = time.time_ns()
        self.rows = 0

    def batches(
        self,
        tables: list[Plan],
        batch_size: int,
        fetch_size: int = 2000,
        progress: InitialSnapshotNotifications | None = None,
        replan: Replan | None = None,
    ) -> Iterator[list[SourceRecord]]:
        """Batches of ``op=r`` records, table after table; the last batch ends with the marker
        that says the snapshot is complete. ``progress`` hears of each table's start and end;
        ``replan`` gives a table's plan as committed now, for one altered since it was planned."""
        batch: list[SourceRecord] = []
        for index, planned in enumerate(tables):
            if progress is not None:
                progress.table_started(planned[0].qualified)
            rows_before = self.rows
            current = self._guard(planned, replan)
            if current is None:  # dropped since it was planned: no rows
                if progress is not None:
                    progress.table_completed(planned[0].qualified, 0)
                continue
            table, schema = current
            chunks = self._table_records(table, schema, batch_size, fetch_size)
            for records in marked(chunks, first_table=index == 0, last_table=index == len(tables) - 1):
                batch += records
                while len(batch) > batch_size:
                    yield batch[:batch_size]
                    del batch[:batch_size]
            if progress is not None:
                progress.table_completed(table.qualified, self.rows - rows_before)
        if batch and batch[-1].value["source"]["snapshot"] == "last":
            held = batch[-1]
            batch[-1] = held.replace(offset={**held.offset, "last_snapshot_record": True})
        self._conn.rollback()
        marker = self._builder.marker(self.consistent_lsn)
        batch.append(PositionMarker.at(marker.partition, {**marker.offset, "snapshot_completed": True}))
        yield batch

    def _table_records(
        self, table: TableColumns, schema: TableSchema, chunk_size: int, fetch_size: int
    ) -> Iterator[list[SourceRecord]]:
        # Everything but the row is the same for every row of a table: built once, shared.
        source = source_info(
            connector=CONNECTOR,
            name=self._builder.server,
            ts_ns=self._started_ns,
            db=self._builder.database,
            snapshot="true",
            sequence=f'[null,"{self.consistent_lsn}"]',
            schema=schema.schema,
            table=schema.name,
            txId=self.txid,
            lsn=self.consistent_lsn,
            xmin=None,
            origin=None,
            origin_lsn=None,
        )
        offset = {
            "lsn": self.consistent_lsn,
            "lsn_proc": self.consistent_lsn,
            "event": 0,
            "lsn_commit": self.consistent_lsn,
            "txId": None,
            "ts_usec": self._started_ns // 1000,
            "snapshot": True,
            "last_snapshot_record": False,
        }
        topic, partition, ts_ms = schema.topic, self._builder.partition, self._started_ns // 1_000_000
        columns = plan_columns(table, schema, self._modes, self._lookup, temporal_text=self._iso_utc)
        after_of, key_of = columns.row_builder(schema), key_function(schema.key)
        rows = self._rows(table.oid, columns.query(table), columns.text_oids, fetch_size)
        while chunk := list(islice(rows, chunk_size)):
            records = read_records(chunk, after_of, key_of, topic, source, partition, offset, ts_ms, schema.connect)
            self.rows += len(records)
            yield records

    def _guard(self, planned: Plan, replan: Replan | None) -> Plan | None:
        """Lock the table for the read and check that the snapshot can serve it with its plan
        (see the module's docstring); the plan to read it with, None for a table gone."""
        table = planned[0]
        ident = sql.Identifier(table.schema, table.name)
        try:
            self._conn.execute(sql.SQL("lock table {} in access share mode").format(ident))
        except psycopg.errors.UndefinedTable:
            return None
        seen = self._conn.execute(_CATALOG_ENTRY, (table.oid,)).fetchone()
        now = self._latest_catalog().execute(_CATALOG_ENTRY, (table.oid,)).fetchone()
        if seen != now:
            log.warning(
                "%s was altered after the snapshot's point (a rewrite or a column change, which an older snapshot "
                "cannot read): reading it, and the tables after it, in a new transaction",
                table.qualified,
            )
            self._conn.rollback()
            self._conn.execute("begin isolation level repeatable read read only")
            self._conn.execute(sql.SQL("lock table {} in access share mode").format(ident))
            seen = self._conn.execute(_CATALOG_ENTRY, (table.oid,)).fetchone()
        if seen is None:
            return None
        planned_columns = [[name, str(oid), str(mod)] for name, oid, mod in table.columns]
        if list(seen[1]) == planned_columns or replan is None:
            return planned
        return replan(table.oid)  # planned before a DDL: the plan of the definition read now

    def _latest_catalog(self) -> psycopg.Connection[Any]:
        if self._latest is None:
            self._latest = psycopg.connect(self._conninfo, autocommit=True)
        return self._latest

    def _transaction_id(self) -> int | None:
        """``source.txId`` of snapshot events. Debezium calls ``txid_current()``, which assigns the
        snapshot transaction an id; a transaction holding an id makes every replication slot
        created on the server meanwhile wait for it to end (another task's, another engine's),
        so we read the id it would have got instead: the snapshot's xmax, the first unassigned."""
        row = self._conn.execute("select txid_snapshot_xmax(txid_current_snapshot())").fetchone()
        return int(row[0]) if row else None

    def _rows(self, oid: int, query: sql.Composed, text_oids: set[int], fetch_size: int) -> Iterator[tuple[Any, ...]]:
        if CHUNKED_ROWS:
            cursor = self._conn.cursor()
            for type_oid in text_oids:
                cursor.adapters.register_loader(type_oid, TextLoader)  # text, as the stream sends it
            yield from cursor.stream(query, size=fetch_size)
            return
        named = self._conn.cursor(name=f"airflow_cdc_snapshot_{oid}")
        for type_oid in text_oids:
            named.adapters.register_loader(type_oid, TextLoader)
        try:
            named.execute(query)
            while rows := named.fetchmany(fetch_size):
                yield from rows
        finally:
            named.close()

    def close(self) -> None:
        for conn in (self._conn, self._latest):
            if conn is not None:
                with contextlib.suppress(Exception):  # closing after an error must not mask it
                    conn.close()


def marked(
    chunks: Iterator[list[SourceRecord]], *, first_table: bool, last_table: bool
) -> Iterator[list[SourceRecord]]:
    """A table's record chunks with Debezium's ``source.snapshot`` markers: ``first`` on the first
    record of the first table, ``last`` on the last of the last table, ``first_in_data_collection``
    and ``last_in_data_collection`` on each table's first and last (last wins over first), ``true``
    elsewhere (RelationalSnapshotChangeEventSource.SnapshotMarkerResolver). The first and last
    tables are the first and last in snapshot order, rows or not, as there (so an empty last
    table means no record says ``last``). A chunk is held back until the next arrives, so its last
    record can be labelled."""
    held: list[SourceRecord] | None = None
    first = True
    for chunk in chunks:
        if first:
            chunk[0] = _with_marker(chunk[0], "first" if first_table else "first_in_data_collection")
            first = False
        if held is not None:
            yield held
        held = chunk
    if held is not None:
        held[-1] = _with_marker(held[-1], "last" if last_table else "last_in_data_collection")
        yield held


#: Which marker a record gets when it qualifies for several (SnapshotMarkerResolver's order).
_MARKER_RANK = {"last": 4, "first": 3, "last_in_data_collection": 2, "first_in_data_collection": 1, "true": 0}


def _with_marker(record: SourceRecord, marker: str) -> SourceRecord:
    value = record.value
    if _MARKER_RANK[value["source"]["snapshot"]] >= _MARKER_RANK[marker]:
        return record  # a table's only record: "first" stays over "last_in_data_collection"
    return record.replace(value={**value, "source": {**value["source"], "snapshot": marker}})


def read_records(
    rows: Iterable[tuple[Any, ...]],
    after_of: Callable[[tuple[Any, ...]], dict[str, Any]],
    key_of: Callable[[dict[str, Any]], dict[str, Any] | None],
    topic: str,
    source: dict[str, Any],
    partition: Partition,
    offset: Offset,
    ts_ms: int,
    schemas: Any = None,
) -> list[SourceRecord]:
    """``op=r`` records of rows read together (the initial snapshot's and the incremental
    snapshot's): the ``source`` block is shared, the clock read once for the lot. The envelope
    is :func:`change_value`'s, written out here (same keys, same order - a unit test compares
    them): the call per row cost 0.1 us of the 5.7 us the engine spends on a row."""
    now = time.time_ns()
    now_ms, now_us, record = now // 1_000_000, now // 1_000, SourceRecord
    return [
        record(
            topic,
            key_of(after),
            {
                "before": None,
                "after": after,
                "source": source,
                "transaction": None,
                "op": "r",
                "ts_ms": now_ms,
                "ts_us": now_us,
                "ts_ns": now,
            },
            partition,
            offset,
            ts_ms,
            (),
            schemas,
        )
        for after in map(after_of, rows)
    ]


def key_function(key: list[str]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """TableSchema.key_of for one table, without its per-call checks."""
    if not key:
        return lambda after: None
    if len(key) == 1:
        name = key[0]
        return lambda after: {name: after.get(name)}
    return lambda after: {name: after.get(name) for name in key}
