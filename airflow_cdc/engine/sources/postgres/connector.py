"""Debezium's PostgreSQL connector, in Python: one task per database, each with its own slot,
offsets and replication connection."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from airflow_cdc.engine.config import Config
from airflow_cdc.engine.connect_schema import SchemaSettings
from airflow_cdc.engine.connector import SourceConnector, SourceTask, TaskContext
from airflow_cdc.engine.errors import CdcError, ConfigProblem, RetriableError
from airflow_cdc.engine.notifications import InitialSnapshotNotifications
from airflow_cdc.engine.positions import Phase, SourcePosition
from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.snapshots.coordinator import SnapshotCoordinator
from airflow_cdc.engine.sources.lifecycle import Beginning, SnapshotRun, SourceLifecycle
from airflow_cdc.engine.sources.postgres import catalog as cat
from airflow_cdc.engine.sources.postgres import connect_errors, pgoutput
from airflow_cdc.engine.sources.postgres.changes import (
    HEARTBEAT_PREFIX,
    TableSchema,
    plan_table,
)
from airflow_cdc.engine.sources.postgres.config import POSTGRES_CONFIG
from airflow_cdc.engine.sources.postgres.incremental import PostgresChunkSource
from airflow_cdc.engine.sources.postgres.link import ReplicationLink
from airflow_cdc.engine.sources.postgres.positions import POSTGRES_POSITIONS, lsn_offset
from airflow_cdc.engine.sources.postgres.publication import ensure_publication
from airflow_cdc.engine.sources.postgres.snapshot import SnapshotReader
from airflow_cdc.engine.sources.postgres.stream import ReplicationStream, SlotActiveError
from airflow_cdc.engine.sources.postgres.task_config import TASK_DATABASE, TASK_SEVERAL, PostgresTaskConfig
from airflow_cdc.engine.sources.postgres.transactions import change_builder

log = logging.getLogger(__name__)

#: Most records per poll. A poll's records are all built before any is serialized, and past a
#: few dozen the CPU cache misses cost more than bigger batches save. Measured (quick benches,
#: 2 cores): stream 65-72k changes/s at 64 records per poll, 59k at 2048; snapshot 70k rows/s at
#: 256 rows, 48k at 2048.
POLL_BATCH = 64
SNAPSHOT_BATCH = 256
#: How often an idle stream turns a server keepalive into a flush position.
KEEPALIVE_MARKER_S = 1.0


class PostgresConnector(SourceConnector):
    config_def = POSTGRES_CONFIG
    positions = POSTGRES_POSITIONS

    def validate(self, config: Config) -> list[ConfigProblem]:
        values, problems = self.config_def.check(config)
        if not problems and not values["database.dbname"] and not values["database.names"]:
            problems.append(
                ConfigProblem(
                    "database.dbname",
                    "is required (or database.names for several)",
                    "set database.dbname=<database to capture>",
                )
            )
        return problems

    def task_class(self) -> type[SourceTask]:
        return PostgresTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        values = self.config_def.validate(self.config)
        databases = values["database.names"] or [values["database.dbname"]]
        if max_tasks < len(databases):
            raise CdcError(
                f"tasks.max={max_tasks} but database.names lists {len(databases)} databases: "
                f"set tasks.max to at least {len(databases)} (one task per database)"
            )
        several = len(databases) > 1
        return [self.config.with_(**{TASK_DATABASE: db, TASK_SEVERAL: several}) for db in databases]


class PostgresTask(SourceTask):
    """A PostgreSQL task: the :class:`SourceParts` of its :class:`SourceLifecycle`, which runs
    the phases (initial snapshot, streaming, blocking snapshots)."""

    def start(self, context: TaskContext) -> None:
        try:
            self._start(context)
        except BaseException:
            # A failed start is retried (a slot still held by a dead client, a server restarting):
            # close what this attempt opened, or every retry leaks connections.
            self.stop()
            raise

    def _start(self, context: TaskContext) -> None:
        self.lifecycle: SourceLifecycle | None = None  # a retried start: not the failed attempt's
        task = PostgresTaskConfig.from_context(context)  # names, filters and modes: no I/O
        s = self.settings = task.settings
        prefix, self.database, self.partition, self.slot = task.prefix, task.database, task.partition, task.slot
        self.publication, self.conninfo, self.topic = s["publication.name"], task.conninfo, task.topic
        self.link: ReplicationLink | None = None
        self.snapshot: SnapshotReader | None = None
        self.initial_snapshot = InitialSnapshotNotifications(context.notifications, prefix)
        self.catalog_conn = connect_errors.connect(self.conninfo)
        cat.check_server(self.catalog_conn)
        cat.check_include_list(self.catalog_conn, s["table.include.list"], self.database)
        self.signal_table, self.filters = task.signal_table, task.table_filter()
        tables = cat.captured_tables(self.catalog_conn, self.filters)
        ensure_publication(self.catalog_conn, self.publication, s["publication.autocreate.mode"], tables)
        self.catalog = cat.Catalog(self.catalog_conn)
        self.modes = modes = task.modes
        self.schema_settings = SchemaSettings.from_settings(s)
        offset = context.offset(self.partition)
        self.builder = change_builder(
            task.transaction_topic,
            server=prefix,
            database=self.database,
            partition=self.partition,
            topic=task.topic,
            catalog=self.catalog,
            modes=modes,
            filters=self.filters,
            tombstones=s["tombstones.on.delete"],
            skipped=task.skipped,
            resume=offset,
            messages=task.message_filter(),
            schemas=self.schema_settings,
        )
        self.plans = self._plans(tables)
        self.signalling = SnapshotCoordinator.for_task(
            context,
            settings=s,
            source=PostgresChunkSource(
                lambda: self.catalog_conn,
                {t.qualified: (t, plan) for t, plan in self.plans},
                server=prefix,
                database=self.database,
                partition=self.partition,
                signal_table=self.signal_table,
                strategy=s["incremental.snapshot.watermarking.strategy"],
                read_only=s["read.only"],
                conninfo=self.conninfo,
                threads=s["incremental.snapshot.max.threads"],
                batch=SNAPSHOT_BATCH,
                modes=self.modes,
                lookup=self.catalog.type,
                replan=self._replan_named,
            ),
            partition=self.partition,
            position=self._stream_position,
            signal_topic=task.topic(*self.signal_table) if self.signal_table else None,
            qualifier=self.database if task.several else None,  # signals may name db.schema.table
        )
        self.lifecycle = SourceLifecycle(
            f"postgres {self.database}",
            self,
            coordinator=self.signalling,
            initial_snapshot=self.initial_snapshot,
            poll_interval_s=s["poll.interval.ms"] / 1000,
        )
        self.link = ReplicationLink(f"postgres {self.database}", self.conninfo, self.slot, self.publication, offset)
        self.link.connect()
        self._last_activity = time.monotonic()
        self._last_keepalive_marker = 0.0
        self.lifecycle.begin(self._beginning(offset, tables))

    @property
    def stream(self) -> ReplicationStream | None:
        """The open replication connection (None while a lost one is not reopened yet)."""
        link = getattr(self, "link", None)
        return link.stream if link is not None else None

    def _stream_position(self) -> Offset:
        # The end of the last transaction streamed completely: committing it loses nothing.
        return {**self.builder.offset(self.builder.last_completed), "txId": None}

    # -- where to begin -------------------------------------------------------------------------
    def _beginning(self, offset: Offset | None, tables: list[cat.TableColumns]) -> Beginning:
        """Decide where to begin: snapshot or not, and from which LSN to stream."""
        assert self.stream is not None  # the link's first connection
        mode = self.settings["snapshot.mode"]
        streams = mode != "initial_only"
        state = cat.slot_state(self.catalog_conn, self.slot)
        if state is not None and state.active:
            raise SlotActiveError(
                f"replication slot {self.slot!r} is active for PID {state.active_pid}: stop the "
                "other consumer or set a different slot.name"
            )
        unfinished = offset is not None and bool(offset.get("snapshot"))
        wants_snapshot = mode == "always" or (
            mode in ("initial", "initial_only", "when_needed") and (offset is None or unfinished)
        )
        if state is None:
            if mode == "initial_only" and offset is not None and not unfinished:
                return Beginning(None, stream=False)  # done before; there is nothing to stream
            if offset is not None and not unfinished and mode not in ("when_needed", "always"):
                since = pgoutput.format_lsn(int(offset.get("lsn_commit") or 0))
                raise CdcError(
                    f"replication slot {self.slot!r} no longer exists but offsets were stored: changes since "
                    f"{since} are lost. Use snapshot.mode=when_needed to re-snapshot, or reset the offsets"
                )
            export = wants_snapshot or mode == "when_needed"
            # initial_only never streams: a temporary slot (gone with the connection) exports
            # the snapshot, so no slot is left behind holding WAL.
            consistent, snapshot_name = self.stream.create_slot(
                self.slot, export_snapshot=export, temporary=mode == "initial_only"
            )
            self.builder.last_completed = consistent
            if export:
                return Beginning(self._initial_snapshot(tables, snapshot_name, consistent), streams)
        elif wants_snapshot:
            # The slot survives (a crash mid-snapshot, or snapshot.mode=always): its position is
            # still the point the earlier snapshot was taken at, because nothing is confirmed
            # while a snapshot runs. Read the tables again in a fresh transaction - newer than
            # that point - and then stream from it. Replaying those changes over the newer
            # snapshot converges on the source, deletes included; dropping the slot for a new
            # exported snapshot would instead leave rows deleted in between in the target.
            resume = int(offset["lsn_commit"]) if offset and offset.get("lsn_commit") else _lsn(state)  # type: ignore[arg-type]
            self.builder.last_completed = resume
            return Beginning(self._initial_snapshot(tables, None, resume), streams)
        return Beginning(None, streams)

    def _initial_snapshot(
        self, tables: list[cat.TableColumns], snapshot_name: str | None, resume_lsn: int
    ) -> SnapshotRun:
        log.info(
            "postgres %s: snapshot of %d table(s), then streaming from %s",
            self.database,
            len(tables),
            pgoutput.format_lsn(resume_lsn),
        )
        self.snapshot = snapshot = SnapshotReader(
            self.conninfo, snapshot_name, resume_lsn, self.builder, modes=self.modes, lookup=self.catalog.type
        )
        plans = [(t, p) for t, p in self.plans if t.oid in {c.oid for c in tables}]
        self.initial_snapshot.started([t.qualified for t, _ in plans])
        # Small batches: a snapshot batch is materialized whole before it is serialized, and
        # past a few hundred wide rows the CPU cache misses cost more than the batch saves
        # (measured: 70k rows/s at 256 rows per batch, 48k at 2048).
        batch = min(self.settings["max.batch.size"], SNAPSHOT_BATCH)
        batches = snapshot.batches(
            plans, batch, self.settings["snapshot.fetch.size"], progress=self.initial_snapshot, replan=self._replan
        )
        return SnapshotRun(batches, lambda: snapshot.rows, self._close_snapshot)

    def _close_snapshot(self) -> None:
        snapshot, self.snapshot = self.snapshot, None
        if snapshot is not None:
            snapshot.close()

    def _plans(self, tables: list[cat.TableColumns]) -> list[tuple[cat.TableColumns, TableSchema]]:
        return [
            (
                t,
                plan_table(
                    t.schema,
                    t.name,
                    self.topic(t.schema, t.name),
                    list(t.columns),
                    self.catalog.primary_key(t.oid),
                    catalog=self.catalog,
                    modes=self.modes,
                    filters=self.filters,
                    relation_oid=t.oid,
                    schemas=dataclasses.replace(self.schema_settings, snapshot=True),
                ),
            )
            for t in tables
        ]

    def _replan(self, oid: int) -> tuple[cat.TableColumns, TableSchema] | None:
        """A table's plan from the catalog as committed now (a DDL since it was planned)."""
        found = [t for t in cat.captured_tables(self.catalog_conn, self.filters) if t.oid == oid]
        return self._plans(found)[0] if found else None

    def _replan_named(self, qualified: str) -> tuple[cat.TableColumns, TableSchema] | None:
        found = [t for t in cat.captured_tables(self.catalog_conn, self.filters) if t.qualified == qualified]
        return self._plans(found)[0] if found else None

    # -- the lifecycle's source parts -------------------------------------------------------------
    def start_streaming(self) -> None:
        assert self.link is not None
        self.link.start(self.builder.last_completed)
        log.info(
            "postgres %s: streaming slot %s from %s",
            self.database,
            self.slot,
            pgoutput.format_lsn(self.builder.last_completed),
        )

    def blocking_snapshot(self, tables: Sequence[str]) -> SnapshotRun:
        """A blocking snapshot (Debezium's ``type: blocking``): stop reading the stream, read the
        tables in a fresh transaction, then stream on. The rows are newer than the stream's
        position, and the changes streamed afterwards are applied over them: the target
        converges, as after an interrupted initial snapshot (ADR 0004)."""
        log.info("postgres %s: blocking snapshot of %s", self.database, ", ".join(tables))
        plans = [(t, p) for t, p in self.plans if t.qualified in tables]
        self.snapshot = snapshot = SnapshotReader(
            self.conninfo, None, self.builder.last_completed, self.builder, modes=self.modes, lookup=self.catalog.type
        )
        batch = min(self.settings["max.batch.size"], SNAPSHOT_BATCH)
        batches = snapshot.batches(plans, batch, self.settings["snapshot.fetch.size"], replan=self._replan)
        return SnapshotRun(batches, lambda: snapshot.rows, self._close_snapshot)

    def read_changes(self) -> list[SourceRecord]:
        assert self.link is not None
        stream = self.link.stream or self._reopen()
        records: list[SourceRecord] = []
        deadline = time.monotonic() + self.settings["poll.interval.ms"] / 1000
        limit = min(self.settings["max.batch.size"], POLL_BATCH)
        decode, handle = pgoutput.decode, self.builder.handle
        try:
            while len(records) < limit:
                wait = 0 if records else max(0.0, deadline - time.monotonic())
                messages = stream.read_many(limit - len(records), wait)
                if not messages:
                    break
                for message in messages:
                    if type(message) is pgoutput.XLogData:
                        records.extend(handle(decode(message.payload), message.start_lsn))
                    elif self._keepalive_may_advance(message.wal_end):
                        records.append(self.builder.marker(message.wal_end))
        except (RetriableError, psycopg.OperationalError) as exc:
            # The replication connection (or the catalog connection a new table's plan is read
            # from) is lost. This poll's records are dropped: the connection is reopened at the
            # next poll from the last committed offset, and the server sends them again.
            self.link.lost(exc)
            if isinstance(exc, RetriableError):
                raise
            raise RetriableError(f"postgres {self.database}: connection lost while streaming: {exc}") from exc
        if any(r.topic for r in records):
            self._last_activity = time.monotonic()
        self._maybe_heartbeat()
        return records

    def _keepalive_may_advance(self, wal_end: int) -> bool:
        # Between transactions, the server's WAL end is a safe flush position: whatever is still
        # uncommitted will commit later, at a higher LSN, and be streamed then.
        now = time.monotonic()
        if self.builder.in_transaction or wal_end <= self.builder.last_completed:
            return False
        if now - self._last_keepalive_marker < KEEPALIVE_MARKER_S:
            return False
        self._last_keepalive_marker = now
        return True

    def _maybe_heartbeat(self) -> None:
        interval = self.settings["heartbeat.interval.ms"] / 1000
        if not interval or time.monotonic() - self._last_activity < interval:
            return
        self._last_activity = time.monotonic()
        try:
            # A WAL record in this database, so the slot's position moves even when it sees
            # nothing else (other databases writing WAL, or every change filtered out).
            conn = self._live_catalog()
            conn.execute("select pg_logical_emit_message(false, %s, '')", (HEARTBEAT_PREFIX,))
            if self.settings["heartbeat.action.query"]:
                conn.execute(self.settings["heartbeat.action.query"])
        except (RetriableError, psycopg.OperationalError) as exc:
            # Not raised: this poll's records were taken from the stream already. The next
            # heartbeat connects again.
            log.warning("postgres %s: heartbeat failed, the server is not reachable: %s", self.database, exc)

    # -- a lost connection ------------------------------------------------------------------------
    def _reopen(self) -> ReplicationStream:
        """The replication connection again, after it was lost: streaming from the last
        committed offset, the change builder rewound to it (see ``link.py``)."""
        assert self.link is not None
        stream, resume = self.link.reopen(self._live_catalog())
        self.builder.rewind(resume)
        return stream

    def _live_catalog(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The catalog connection, opened again if the server lost it (a restart): plans of the
        tables the stream announces again are read from it."""
        conn = self.catalog_conn
        try:
            if not conn.closed and not conn.broken and conn.execute("select 1").fetchone():
                return conn
        except psycopg.OperationalError:
            pass
        conn.close()
        self.catalog_conn = conn = connect_errors.connect(self.conninfo)
        self.catalog.rebind(conn)
        return conn

    def keep_alive(self) -> None:
        # The WAL sender cuts a connection that sent no standby status update for
        # wal_sender_timeout, read or not: while the stream waits, still tell it we live.
        if self.link is not None:
            self.link.keep_alive()

    def confirm(self, offset: Offset) -> None:
        if isinstance(offset.get("lsn_commit"), int) and self.link is not None:
            self.link.confirm(offset)

    def newest_position(self) -> Offset | None:
        stream = self.stream
        if stream is None:
            return None
        # The newest WAL position the server reported (it may lie in other databases).
        return lsn_offset(max(stream.received_lsn, stream.flushed_lsn))

    def close(self) -> None:
        link = getattr(self, "link", None)
        walsender = link.close() if link is not None else None  # first: the WAL sender lets go of the slot
        self._close_snapshot()
        conn = getattr(self, "catalog_conn", None)  # closing twice is harmless
        if conn is not None:
            try:
                if self.settings["slot.drop.on.stop"] and not conn.closed:
                    cat.drop_slot(conn, self.slot, own_pid=walsender)
            finally:
                conn.close()

    # -- the engine's task contract ---------------------------------------------------------------
    def poll(self) -> list[SourceRecord]:
        assert self.lifecycle is not None
        return self.lifecycle.poll()

    def commit(self, offsets: Mapping[str, Offset]) -> None:
        if self.lifecycle is not None:
            self.lifecycle.commit(offsets)

    def drain(self) -> list[SourceRecord]:
        return self.lifecycle.drain() if self.lifecycle is not None else []

    def idle(self) -> None:
        if self.lifecycle is not None:
            self.lifecycle.idle()

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        stream = getattr(self, "stream", None)
        if stream is not None and stream.streaming:
            # received: the newest WAL position the server reported; flushed: what we confirmed
            # (a commit's end LSN, which can lie past the last message's start).
            flushed = stream.flushed_lsn
            received = max(stream.received_lsn, flushed)
            out.update(received_lsn=received, flushed_lsn=flushed, lag_bytes=received - flushed)
        link = getattr(self, "link", None)
        if link is not None:
            # Debezium's Connected, and how often the connection was lost (and reopened).
            out.update(connected=float(stream is not None and stream.streaming), connection_losses=link.losses)
        lifecycle = getattr(self, "lifecycle", None)
        if lifecycle is not None:
            out.update(lifecycle.metrics())
        return out

    def position(self) -> SourcePosition:
        partition = getattr(self, "partition", None)
        lifecycle: SourceLifecycle | None = getattr(self, "lifecycle", None)
        if lifecycle is None:
            return SourcePosition(Phase.STARTING, partition)
        return lifecycle.position(partition)

    def stop(self) -> None:
        lifecycle = getattr(self, "lifecycle", None)
        if lifecycle is not None:
            lifecycle.stop()  # the notifications and the coordinator, then close()
        else:
            self.close()


def _lsn(state: cat.SlotState) -> int:
    return pgoutput.parse_lsn(state.confirmed_flush_lsn) if state.confirmed_flush_lsn else 0
