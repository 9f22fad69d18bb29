"""Debezium's MySQL and MariaDB connectors, in Python: one task reading the server's binlog,
with an initial snapshot, offsets by GTID and binlog position, and a schema history."""

from __future__ import annotations

import itertools
import logging
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.config import Config
from airflow_cdc.engine.connect_schema import SchemaSettings
from airflow_cdc.engine.connector import SourceConnector, SourceTask, TaskContext
from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.failures import FailureHandling
from airflow_cdc.engine.notifications import InitialSnapshotNotifications
from airflow_cdc.engine.positions import Phase, SourcePosition
from airflow_cdc.engine.records import Offset, SourceRecord
from airflow_cdc.engine.signals.signal import SignalError
from airflow_cdc.engine.snapshots.coordinator import SnapshotCoordinator
from airflow_cdc.engine.sources.lifecycle import Beginning, SnapshotRun, SourceLifecycle
from airflow_cdc.engine.sources.mysql import connect_errors
from airflow_cdc.engine.sources.mysql.binlog import BinlogPurgedError, BinlogReader
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder
from airflow_cdc.engine.sources.mysql.config import MYSQL_CONFIG
from airflow_cdc.engine.sources.mysql.connect_schema import schema_change_schemas, table_schemas
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.filters import TableFilter
from airflow_cdc.engine.sources.mysql.gtid_windows import GtidWindows
from airflow_cdc.engine.sources.mysql.include_lists import check_include_lists
from airflow_cdc.engine.sources.mysql.incremental import MySqlChunkSource
from airflow_cdc.engine.sources.mysql.positions import MYSQL_POSITIONS, offset_of
from airflow_cdc.engine.sources.mysql.schema import SchemaHistory, read_tables, row_shape
from airflow_cdc.engine.sources.mysql.schema_events import SchemaChangeEvents
from airflow_cdc.engine.sources.mysql.server import check_available, check_server, current_position
from airflow_cdc.engine.sources.mysql.snapshot import ConsistentSnapshot, TableChangedError
from airflow_cdc.engine.sources.mysql.snapshot_records import SnapshotRecords
from airflow_cdc.engine.sources.mysql.stream_records import BinlogRecords
from airflow_cdc.engine.sources.mysql.tracking import StartPoint
from airflow_cdc.engine.sources.mysql.transactions import binlog_transactions
from airflow_cdc.engine.sources.mysql.types import ValueModes

log = logging.getLogger(__name__)

POLL_BATCH = 256
SNAPSHOT_BATCH = 256
#: Times tables changed under the initial snapshot (each read anew) before it gives up.
MAX_SNAPSHOT_REOPENS = 100
TableKey = tuple[str, str]


class MySqlConnector(SourceConnector):
    config_def = MYSQL_CONFIG
    positions = MYSQL_POSITIONS
    #: ``source.connector`` of the events.
    name: ClassVar[str] = "mysql"

    def task_class(self) -> type[SourceTask]:
        return MySqlTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return [self.config]  # one binlog, one reader


class MariaDbConnector(MySqlConnector):
    name = "mariadb"

    def task_class(self) -> type[SourceTask]:
        return MariaDbTask


def server_id_for(settings: dict[str, Any]) -> int:
    """``database.server.id``, or one derived from ``topic.prefix``: stable across restarts and,
    unlike Debezium's random default, the same for the same instance (a second connection with
    the same id makes the server drop the first)."""
    configured = int(settings["database.server.id"])
    return configured or 100_000 + zlib.crc32(str(settings["topic.prefix"]).encode()) % 2_000_000_000


class MySqlTask(SourceTask):
    kind: ClassVar[str] = "mysql"

    def start(self, context: TaskContext) -> None:
        try:
            self._start(context)
        except BaseException:
            self.stop()
            raise

    def _start(self, context: TaskContext) -> None:
        self.lifecycle: SourceLifecycle | None = None  # a retried start: not the failed attempt's
        s = self.settings = MYSQL_CONFIG.validate(context.config)
        self.prefix = str(s["topic.prefix"])
        self.partition = {"server": self.prefix}
        self.connection = {
            "host": s["database.hostname"],
            "port": s["database.port"],
            "user": s["database.user"],
            # A detached instance started by Airflow gets the connection's password in MYSQL_PWD
            # (the MySQL client's variable, as libpq's PGPASSWORD), never in a file; PyMySQL
            # does not read it itself.
            "password": s["database.password"] or os.environ.get("MYSQL_PWD", ""),
            "charset": "utf8mb4",
            # database.ssl.*: every connection below (binlog, snapshots, signals) is made from this.
            **mysql_client.tls_params(s),
        }
        self.reader: BinlogReader | None = None
        self.snapshot: ConsistentSnapshot | None = None
        self._snapshot_restarts = 0
        self.initial_snapshot = InitialSnapshotNotifications(context.notifications, self.prefix)
        self.filter = TableFilter(s)
        self.modes = ValueModes.from_config(s)
        self.conn = _connect(self.connection)
        self.server = check_server(self.conn)
        check_include_lists(self.conn, s)  # a list matching nothing would capture nothing, silently
        self.history = SchemaHistory(_history_path(context.config, self.prefix), self.filter)
        self.builder = ChangeBuilder(
            connector=self.kind,
            server=self.prefix,
            partition=self.partition,
            tombstones=s["tombstones.on.delete"],
            skipped=frozenset(op for op in s["skipped.operations"] if op != "none"),
            extra_offset=self._schema_offset,
            failures=FailureHandling(s["event.processing.failure.handling.mode"]),
            schemas=table_schemas(self.kind, self.modes, SchemaSettings.from_settings(s)),
        )
        self.records = BinlogRecords(
            conn=self.conn,
            history=self.history,
            builder=self.builder,
            partition=self.partition,
            modes=self.modes,
            topic=self._topic,
            schema_events=self._schema_change_events,
            heartbeat_s=s["heartbeat.interval.ms"] / 1000,
            transactions=binlog_transactions(s, self.prefix, self.partition, context.offset(self.partition)),
            captured=self.filter,
        )
        self.signalling = self._coordinator(context)
        self.lifecycle = SourceLifecycle(
            self.prefix,
            self,
            coordinator=self.signalling,
            initial_snapshot=self.initial_snapshot,
            poll_interval_s=s["poll.interval.ms"] / 1000,
        )
        self.lifecycle.begin(self._beginning(context.offset(self.partition)))

    def _coordinator(self, context: TaskContext) -> SnapshotCoordinator:
        """Signals and incremental snapshots: the signal table's rows come from the binlog like
        any captured table's, the watermarks are rows of it too - or, with ``read.only``, points
        of the stream found by GTID (``gtid_windows.py``), and nothing is written."""
        s = self.settings
        signal = str(s["signal.data.collection"])
        signal_table = _split_table(signal) if signal else None
        windows = GtidWindows(self.partition, self._stream_position) if s["read.only"] else None
        source = MySqlChunkSource(
            self.conn,
            lambda: _connect({**self.connection, "init_command": "SET time_zone='+00:00'"}),
            lambda: self.history.tables,
            captured=self.filter,
            topic=self._topic,
            builder=self.builder,
            modes=self.modes,
            signal_table=signal_table,
            strategy=s["incremental.snapshot.watermarking.strategy"],
            batch=SNAPSHOT_BATCH,
            gtid_windows=windows,
            server=self.server,
        )
        return SnapshotCoordinator.for_task(
            context,
            settings=s,
            source=source,
            partition=self.partition,
            position=self._stream_position,
            signal_topic=self._topic(*signal_table) if signal_table else None,
            watermarks=windows.place if windows is not None else None,
        )

    def _stream_position(self) -> dict[str, Any]:
        assert self.reader is not None  # the coordinator is fed only while streaming
        return {**self.reader.tracker.offset(), **self._schema_offset()}

    def _schema_offset(self) -> dict[str, Any]:
        return {"schema_version": self.history.version} if self.history.version else {}

    # -- where to begin ----------------------------------------------------------------------
    def _beginning(self, offset: Any) -> Beginning:
        mode = self.settings["snapshot.mode"]
        streams = mode != "initial_only"
        unfinished = offset is not None and bool(offset.get("snapshot"))
        if offset is not None and not unfinished:
            start = StartPoint.from_offset(offset)
            try:
                check_available(self.conn, self.server, start)
            except BinlogPurgedError:
                if mode != "when_needed":
                    raise
                log.warning("%s: the binlog after the offsets is purged: taking a new snapshot", self.prefix)
                return Beginning(self._initial_snapshot(None), streams)
            self.history.recover(self.conn, int(offset.get("schema_version") or 0))
            self._stream_start = start
            return Beginning(None, streams)
        if mode == "no_data":
            self._stream_start = start = current_position(self.conn, self.server)
            self.history.start_fresh(self.conn, self._offset(start))
            return Beginning(None, stream=True)
        # An unfinished snapshot is read again in a newer transaction, but streaming starts where
        # the first attempt stood: the changes in between replayed over newer rows converge on
        # the source, deletes included (ADR 0004's reasoning for PostgreSQL).
        return Beginning(self._initial_snapshot(StartPoint.from_offset(offset) if unfinished else None), streams)

    def _offset(self, start: StartPoint) -> dict[str, Any]:
        return offset_of(
            file=start.file, pos=start.pos, gtids=None if start.gtids is None else str(start.gtids), event=0
        )

    def _initial_snapshot(self, resume: StartPoint | None) -> SnapshotRun:
        """The initial snapshot, read with the definitions at its own point. ``resume``: an
        earlier attempt's point, where streaming goes on with the definitions there (version 0
        of the schema history's file)."""
        self.snapshot = snap = ConsistentSnapshot(self.connection, self.server, self.history.captured_tables)
        start = resume or snap.position
        if resume is None:
            self.history.start_with(snap.tables, self._offset(start))
        elif not self.history.recover(snap.conn, 0):
            log.warning(
                "%s: no schema history of the interrupted snapshot; the stream from %s is read with today's "
                "definitions (a DDL since would stop it, naming the table)",
                self.prefix,
                start,
            )
        self._stream_start = start
        tables = sorted(snap.tables)
        self.initial_snapshot.started([f"{d}.{t}" for d, t in tables])
        offset = {**self._offset(start), "snapshot": True}
        # Debezium's schema change events come first; read in the snapshot's transaction, beside
        # the history's read of the same tables.
        schema_events = self._schema_change_events()
        schema = schema_events.snapshot(snap.conn, tables, offset) if schema_events is not None else []
        size = self._snapshot_batch()
        batches = itertools.chain(
            (schema[first : first + size] for first in range(0, len(schema), size)),
            self._snapshot_batches(tables, snap.tables, offset),
        )
        return SnapshotRun(batches, self._snapshot_rows, self._close_snapshot)

    def _snapshot_batch(self) -> int:
        # max.batch.size bounds every poll's records, a snapshot's too (as PostgreSQL's).
        return min(int(self.settings["max.batch.size"]), SNAPSHOT_BATCH)

    def _snapshot_rows(self) -> int:
        records: SnapshotRecords | None = getattr(self, "_snapshot_records", None)
        return records.rows if records is not None else 0

    def _close_snapshot(self) -> None:
        snapshot, self.snapshot = self.snapshot, None
        if snapshot is not None:
            snapshot.close()

    def _reopen_snapshot(self, error: TableChangedError) -> tuple[ConsistentSnapshot, dict[TableKey, Table]]:
        """A table changed under the initial snapshot in a way its read cannot serve: it, and the
        tables after it, are read from a new snapshot (SnapshotRecords)."""
        self._snapshot_restarts += 1
        if self._snapshot_restarts > MAX_SNAPSHOT_REOPENS:
            raise CdcError(f"{error}; DDL changed tables under the initial snapshot {MAX_SNAPSHOT_REOPENS} times")
        log.warning("%s: %s: reading it, and the tables after it, in a new snapshot", self.prefix, error)
        assert self.snapshot is not None
        self.snapshot.close()
        self.snapshot = ConsistentSnapshot(self.connection, self.server, self.history.captured_tables)
        return self.snapshot, self.snapshot.tables

    def _schema_change_events(self) -> SchemaChangeEvents | None:
        """Debezium's schema change topic (``include.schema.changes``), made at first use."""
        if not self.settings["include.schema.changes"]:
            return None
        events: SchemaChangeEvents | None = getattr(self, "_schema_events", None)
        if events is None:
            events = self._schema_events = SchemaChangeEvents(
                builder=self.builder,
                topic=self.prefix,
                partition=self.partition,
                captured=self.filter,
                database_captured=self.filter.database,
                schemas=schema_change_schemas(self.kind) if self.builder.schemas is not None else None,
            )
        return events

    def _snapshot_batches(
        self,
        tables: list[tuple[str, str]],
        definitions: dict[tuple[str, str], Table],
        offset: dict[str, Any],
        *,
        at: dict[str, Any] | None = None,
        initial: bool = True,
    ) -> Iterator[list[SourceRecord]]:
        """The snapshot's records, then a marker at the stream's start (``offset``). ``initial``:
        the initial snapshot's notifications; ``at``: the point the rows were read at if it is
        not the offset's."""
        assert self.snapshot is not None
        self._snapshot_records = records = SnapshotRecords(
            self.snapshot,
            self.builder,
            topic=self._topic,
            modes=self.modes,
            fetch=self.settings["snapshot.fetch.size"],
            batch=self._snapshot_batch(),
            reopen=self._reopen_snapshot if initial else None,
        )
        end = self._offset(self._stream_start) if initial else offset
        notify = self.initial_snapshot if initial else None
        return records.batches(
            tables,
            definitions,
            offset,
            self.partition,
            end,
            at=at,
            table_started=notify.table_started if notify else lambda _name: None,
            table_completed=notify.table_completed if notify else lambda _name, _rows: None,
        )

    def _topic(self, database: str, table: str) -> str:
        return f"{self.prefix}.{database}.{table}"

    # -- the lifecycle's source parts ----------------------------------------------------------
    def start_streaming(self) -> None:
        start = self._stream_start
        log.info("%s: streaming the binlog from %s", self.prefix, start)
        self.reader = BinlogReader(
            self.connection,
            server_id=server_id_for(self.settings),
            start=start,
            server=self.server,
            tables=self.filter,
            begins=self.records.transactions is not None,
        )

    def read_changes(self) -> list[SourceRecord]:
        assert self.reader is not None
        limit = min(self.settings["max.batch.size"], POLL_BATCH)
        return self.records.read(self.reader, limit, self.settings["poll.interval.ms"] / 1000)

    def blocking_snapshot(self, tables: Sequence[str]) -> SnapshotRun:
        """A blocking snapshot (Debezium's ``type: blocking``): stop reading the binlog, read the
        tables in a consistent snapshot, then stream on from where the binlog stood. The rows
        name the newer point they were read at (``source.file``/``pos``) and carry the stream's
        offset: the changes streamed afterwards are applied over them and the target converges,
        as after an interrupted initial snapshot. A restart during it streams on without it
        (the offsets never left the stream's position), as Debezium does."""
        wanted = set(tables)
        keys = [key for key in sorted(self.history.tables) if f"{key[0]}.{key[1]}" in wanted]
        snap = ConsistentSnapshot(self.connection, self.server, lambda conn: read_tables(conn, keys))
        # The rows are read with the stream's definitions: a DDL between the stream's position
        # and the snapshot would give rows of another shape.
        now = snap.tables
        changed = [f"{d}.{t}" for d, t in keys if row_shape(now.get((d, t))) != row_shape(self.history.tables[(d, t)])]
        if changed:
            snap.close()
            raise SignalError(
                f"the schema of {', '.join(changed)} changed after the binlog position the stream stands at: "
                "send the blocking snapshot again once the stream has passed the DDL"
            )
        log.info("%s: blocking snapshot of %s", self.prefix, ", ".join(tables))
        self.snapshot = snap
        batches = self._snapshot_batches(
            keys, self.history.tables, self._stream_position(), at=self._offset(snap.position), initial=False
        )
        return SnapshotRun(_answerable(batches), self._snapshot_rows, self._close_snapshot)

    def keep_alive(self) -> None:
        """Nothing to send, unlike PostgreSQL's standby status updates: once the binlog dump has
        begun the server takes no packets from the client on that connection, and its own
        heartbeats (``HEARTBEAT_S``) show the reader the connection lives when it reads again.
        Should the server give up on a connection that is not read (``net_write_timeout``, once
        a write load fills the socket's buffers), the next read finds it lost and opens the
        binlog again at the tracked position (BinlogReader, the poll retried): nothing is lost."""

    def confirm(self, offset: Offset) -> None:
        """Nothing to release: the server keeps its binlog by its own retention, not by ours."""

    def newest_position(self) -> Offset | None:
        reader = self.reader
        return reader.tracker.offset() if reader is not None else None

    def close(self) -> None:
        for name in ("reader", "snapshot", "conn"):
            thing = getattr(self, name, None)
            setattr(self, name, None)
            if thing is not None:
                try:
                    thing.close()
                except Exception as exc:
                    log.debug("closing %s: %s", name, exc)

    # -- the engine's task contract ------------------------------------------------------------
    def poll(self) -> list[SourceRecord]:
        assert self.lifecycle is not None
        return self.lifecycle.poll()

    def commit(self, offsets: Any) -> None:
        if self.lifecycle is not None:
            self.lifecycle.commit(offsets)

    def drain(self) -> list[SourceRecord]:
        return self.lifecycle.drain() if self.lifecycle is not None else []

    def idle(self) -> None:
        if self.lifecycle is not None:
            self.lifecycle.idle()

    def position(self) -> SourcePosition:
        partition = getattr(self, "partition", None)
        lifecycle: SourceLifecycle | None = getattr(self, "lifecycle", None)
        if lifecycle is None:
            return SourcePosition(Phase.STARTING, partition)
        return lifecycle.position(partition)

    def metrics(self) -> dict[str, float]:
        lifecycle: SourceLifecycle | None = getattr(self, "lifecycle", None)
        return lifecycle.metrics() if lifecycle is not None else {}

    def stop(self) -> None:
        lifecycle = getattr(self, "lifecycle", None)
        if lifecycle is not None:
            lifecycle.stop()  # the notifications and the coordinator, then close()
        else:
            self.close()


class MariaDbTask(MySqlTask):
    kind = "mariadb"


def _history_path(config: Config, prefix: str) -> Path | None:
    explicit = config.get("schema.history.internal.file.filename")
    if explicit:
        return Path(str(explicit))
    offsets = config.get("offset.storage.file.filename")
    if offsets and str(config.get("offset.storage") or "file") == "file":
        return Path(str(offsets)).with_name(f"{Path(str(offsets)).name}.schema-history.{prefix}.jsonl")
    return None


def _split_table(name: str) -> tuple[str, str]:
    database, dot, table = name.partition(".")
    if not dot or not table:
        raise CdcError(f"signal.data.collection must be database.table, not {name!r}")
    return database, table


def _connect(connection: dict[str, Any]) -> Any:
    try:
        return mysql_client.connect(**connection, autocommit=True, connect_timeout=10)
    except pymysql.OperationalError as exc:
        # By error code, never by message: the server writes messages in its lc_messages.
        fix = connect_errors.refusal_fix(exc)
        if fix is not None:  # access denied, a locked account, ...: retrying cannot help
            raise CdcError(f"MySQL refused the connection: {exc}; {fix}") from exc
        code = connect_errors.error_code(exc)
        if code == connect_errors.TLS_FAILED or "certificate verify failed" in str(exc).lower():  # no retry mends it
            raise CdcError(
                f"MySQL's TLS connection failed: {exc}; fix database.ssl.mode, database.ssl.truststore "
                "(the CA of the server's certificate) or database.ssl.keystore"
            ) from exc
        raise RetriableError(f"cannot connect to MySQL: {exc}") from exc


def _answerable(batches: Iterator[list[SourceRecord]]) -> Iterator[list[SourceRecord]]:
    """A blocking snapshot's batches, a table changed under it (which the consistent read cannot
    serve) as a SignalError: the snapshot stops, streaming goes on (what it delivered converges
    like any replay), and the signal is answered with the reason."""
    try:
        yield from batches
    except TableChangedError as exc:
        raise SignalError(f"{exc}: send the blocking snapshot again") from exc
