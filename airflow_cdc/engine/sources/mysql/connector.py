"""Debezium's MySQL and MariaDB connectors, in Python: one task reading the server's binlog,
with an initial snapshot, offsets by GTID and binlog position, and a schema history."""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.config import Config
from airflow_cdc.engine.connector import SourceConnector, SourceTask, TaskContext
from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.failures import FailureHandling
from airflow_cdc.engine.notifications import InitialSnapshotNotifications
from airflow_cdc.engine.positions import Phase, SourcePosition
from airflow_cdc.engine.records import PositionMarker, SourceRecord
from airflow_cdc.engine.signals.signal import SignalError
from airflow_cdc.engine.snapshots.coordinator import SnapshotCoordinator
from airflow_cdc.engine.snapshots.handover import HandOver
from airflow_cdc.engine.sources.mysql.binlog import BinlogPurgedError, BinlogReader
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder, plan
from airflow_cdc.engine.sources.mysql.config import MYSQL_CONFIG
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.gtid_windows import GtidWindows
from airflow_cdc.engine.sources.mysql.incremental import MySqlChunkSource
from airflow_cdc.engine.sources.mysql.positions import MYSQL_POSITIONS, offset_of
from airflow_cdc.engine.sources.mysql.schema import SchemaHistory, read_tables
from airflow_cdc.engine.sources.mysql.schema_events import SchemaChangeEvents
from airflow_cdc.engine.sources.mysql.server import check_available, check_server, current_position
from airflow_cdc.engine.sources.mysql.snapshot import ConsistentSnapshot
from airflow_cdc.engine.sources.mysql.stream_records import BinlogRecords
from airflow_cdc.engine.sources.mysql.tracking import StartPoint
from airflow_cdc.engine.sources.mysql.types import ValueModes

log = logging.getLogger(__name__)

POLL_BATCH = 256
SNAPSHOT_BATCH = 256
_SYSTEM = frozenset(("mysql", "information_schema", "performance_schema", "sys"))


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


class TableFilter:
    """Debezium's include/exclude lists (regexes on ``db`` and ``db.table``, whole-name
    matches); the signal table is captured whatever they say."""

    def __init__(self, settings: dict[str, Any]) -> None:
        def compile_all(key: str) -> list[re.Pattern[str]]:
            return [re.compile(p, re.I) for p in settings[key]]

        self.db_in, self.db_out = compile_all("database.include.list"), compile_all("database.exclude.list")
        self.t_in, self.t_out = compile_all("table.include.list"), compile_all("table.exclude.list")
        self.signal = str(settings["signal.data.collection"]).lower()

    def database(self, database: str) -> bool:
        """Whether the database's tables may be captured (its schema changes are)."""
        if database in _SYSTEM:
            return False
        return (not self.db_in or any(p.fullmatch(database) for p in self.db_in)) and not any(
            p.fullmatch(database) for p in self.db_out
        )

    def __call__(self, database: str, table: str) -> bool:
        if database in _SYSTEM:
            return False
        name = f"{database}.{table}"
        if self.signal and name.lower() == self.signal:
            return True
        if self.db_in and not any(p.fullmatch(database) for p in self.db_in):
            return False
        if any(p.fullmatch(database) for p in self.db_out):
            return False
        if self.t_in and not any(p.fullmatch(name) for p in self.t_in):
            return False
        return not any(p.fullmatch(name) for p in self.t_out)


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
        }
        self.reader: BinlogReader | None = None
        self.snapshot: ConsistentSnapshot | None = None
        self._blocking: str | None = None  # the signal id of a running blocking snapshot
        self._snapshot_rows = 0
        self._batches: Iterator[list[SourceRecord]] | None = None
        self.initial_snapshot = InitialSnapshotNotifications(context.notifications, self.prefix)
        self.filter = TableFilter(s)
        self.modes = ValueModes.from_config(s)
        self.conn = _connect(self.connection)
        self.server = check_server(self.conn)
        self.history = SchemaHistory(_history_path(context.config, self.prefix), self.filter)
        self.builder = ChangeBuilder(
            connector=self.kind,
            server=self.prefix,
            partition=self.partition,
            tombstones=s["tombstones.on.delete"],
            skipped=frozenset(op for op in s["skipped.operations"] if op != "none"),
            extra_offset=self._schema_offset,
            failures=FailureHandling(s["event.processing.failure.handling.mode"]),
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
        )
        self.signalling = self._coordinator(context)
        self._handover = HandOver()  # polled but not yet handed over (a released chunk)
        self._begin(context.offset(self.partition))

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
    def _begin(self, offset: Any) -> None:
        mode = self.settings["snapshot.mode"]
        unfinished = offset is not None and bool(offset.get("snapshot"))
        if offset is not None and not unfinished:
            start = StartPoint.from_offset(offset)
            try:
                check_available(self.conn, self.server, start)
            except BinlogPurgedError:
                if mode != "when_needed":
                    raise
                log.warning("%s: the binlog after the offsets is purged: taking a new snapshot", self.prefix)
                self._snapshot_then_stream(None)
                return
            self.history.recover(self.conn, int(offset.get("schema_version") or 0))
            self.initial_snapshot.skipped()
            if mode != "initial_only":
                self._stream_from(start)
            return
        if mode == "no_data":
            start = current_position(self.conn, self.server)
            self.history.start_fresh(self.conn, self._offset(start))
            self.initial_snapshot.skipped()
            self._stream_from(start)
            return
        # An unfinished snapshot is read again in a newer transaction, but streaming starts where
        # the first attempt stood: the changes in between replayed over newer rows converge on
        # the source, deletes included (ADR 0004's reasoning for PostgreSQL).
        self._snapshot_then_stream(StartPoint.from_offset(offset) if unfinished else None)

    def _offset(self, start: StartPoint) -> dict[str, Any]:
        return offset_of(
            file=start.file, pos=start.pos, gtids=None if start.gtids is None else str(start.gtids), event=0
        )

    def _snapshot_then_stream(self, resume: StartPoint | None) -> None:
        self.snapshot = snap = ConsistentSnapshot(self.connection, self.server)
        start = resume or snap.position
        self.history.start_fresh(snap.conn, self._offset(start))
        self._stream_start = start
        tables = sorted(self.history.tables)
        self.initial_snapshot.started([f"{d}.{t}" for d, t in tables])
        offset = {**self._offset(start), "snapshot": True}
        # Debezium's schema change events come first; read in the snapshot's transaction, beside
        # the history's read of the same tables.
        schema_events = self._schema_change_events()
        schema = schema_events.snapshot(snap.conn, tables, offset) if schema_events is not None else []
        self._batches = itertools.chain(
            (schema[first : first + SNAPSHOT_BATCH] for first in range(0, len(schema), SNAPSHOT_BATCH)),
            self._snapshot_batches(tables, offset),
        )

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
            )
        return events

    def _snapshot_batches(
        self,
        tables: list[tuple[str, str]],
        offset: dict[str, Any],
        *,
        at: dict[str, Any] | None = None,
        initial: bool = True,
    ) -> Iterator[list[SourceRecord]]:
        """The snapshot's records, then a marker at the stream's start (``offset``). ``initial``:
        the initial snapshot's notifications; ``at``: the point the rows were read at if it is
        not the offset's."""
        assert self.snapshot is not None
        batch: list[SourceRecord] = []
        self._snapshot_rows = 0
        for index, key in enumerate(tables):
            rows = plan(self.history.tables[key], self._topic(*key), self.modes, snapshot=True)
            if initial:
                self.initial_snapshot.table_started(f"{key[0]}.{key[1]}")
            first_table, last_table = index == 0, index == len(tables) - 1
            count = 0
            held: Sequence[Any] | None = None  # a row is labelled once it is known whether another follows
            for values in self.snapshot.rows(*key, self.settings["snapshot.fetch.size"]):
                if held is not None:
                    marker = snapshot_marker(first_table, last_table, first_row=count == 1, last_row=False)
                    self._append(batch, self.builder.snapshot_record(rows, held, offset, marker, at))
                    if len(batch) >= SNAPSHOT_BATCH:
                        yield batch
                        batch = []
                held, count = values, count + 1
            if held is not None:
                marker = snapshot_marker(first_table, last_table, first_row=count == 1, last_row=True)
                self._append(batch, self.builder.snapshot_record(rows, held, offset, marker, at))
            self._snapshot_rows += count
            if initial:
                self.initial_snapshot.table_completed(f"{key[0]}.{key[1]}", count)
        # The snapshot's end: everything before the stream's start is delivered.
        end = self._offset(self._stream_start) if initial else offset
        batch.append(PositionMarker.at(self.partition, end))
        yield batch

    @staticmethod
    def _append(batch: list[SourceRecord], record: SourceRecord | None) -> None:
        if record is not None:  # None: left out by event.processing.failure.handling.mode
            batch.append(record)

    def _stream_from(self, start: StartPoint) -> None:
        log.info("%s: streaming the binlog from %s", self.prefix, start)
        self.reader = BinlogReader(
            self.connection,
            server_id=server_id_for(self.settings),
            start=start,
            server=self.server,
            tables=self.filter,
        )

    def _topic(self, database: str, table: str) -> str:
        return f"{self.prefix}.{database}.{table}"

    # -- polling -----------------------------------------------------------------------------
    def poll(self) -> list[SourceRecord]:
        if self._batches is not None:
            batch = next(self._batches, None)
            if batch is None:
                if self._blocking is not None:
                    self._blocking_done()
                else:
                    self._snapshot_done()
                return []
            return batch
        if self.reader is None:
            time.sleep(self.settings["poll.interval.ms"] / 1000)  # initial_only: nothing more
            return []
        return self._poll_stream()

    def _snapshot_done(self) -> None:
        assert self.snapshot is not None
        self.snapshot.close()
        self.snapshot, self._batches = None, None
        self.initial_snapshot.read()
        if self.settings["snapshot.mode"] != "initial_only":
            self._stream_from(self._stream_start)

    def _poll_stream(self) -> list[SourceRecord]:
        if self._handover.pending:
            self.signalling.kick()  # the next window is read while these rows are delivered
            return self._handover.next()
        assert self.reader is not None
        limit = min(self.settings["max.batch.size"], POLL_BATCH)
        records = self.records.read(self.reader, limit, self.settings["poll.interval.ms"] / 1000)
        signalling = self.signalling
        segments = signalling.watch(records)
        tail = signalling.after_poll()
        blocking = signalling.take_blocking()
        if blocking is not None:
            self._begin_blocking_snapshot(blocking.signal_id, list(blocking.tables))
        return self._handover.first(segments, tail)

    def _begin_blocking_snapshot(self, signal_id: str, tables: list[str]) -> None:
        """A blocking snapshot (Debezium's ``type: blocking``): stop reading the binlog, read the
        tables in a consistent snapshot, then stream on from where the binlog stood. The rows
        name the newer point they were read at (``source.file``/``pos``) and carry the stream's
        offset: the changes streamed afterwards are applied over them and the target converges,
        as after an interrupted initial snapshot. A restart during it streams on without it
        (the offsets never left the stream's position), as Debezium does."""
        wanted = set(tables)
        keys = [key for key in sorted(self.history.tables) if f"{key[0]}.{key[1]}" in wanted]
        snap = ConsistentSnapshot(self.connection, self.server)
        # The rows are read with the stream's definitions: a DDL between the stream's position
        # and the snapshot would give rows of another shape.
        now = read_tables(snap.conn, keys)
        changed = [f"{d}.{t}" for d, t in keys if _shape(now.get((d, t))) != _shape(self.history.tables[(d, t)])]
        if changed:
            snap.close()
            self.signalling.reject(
                SignalError(
                    f"the schema of {', '.join(changed)} changed after the binlog position the stream stands at: "
                    "send the blocking snapshot again once the stream has passed the DDL"
                ),
                signal_id,
                "execute-snapshot",
            )
            return
        log.info("%s: blocking snapshot of %s", self.prefix, ", ".join(tables))
        self.snapshot, self._blocking = snap, signal_id
        self._batches = self._snapshot_batches(
            keys, self._stream_position(), at=self._offset(snap.position), initial=False
        )

    def _blocking_done(self) -> None:
        assert self.snapshot is not None and self._blocking is not None
        self.snapshot.close()
        self.signalling.blocking_done(self._blocking, self._snapshot_rows)
        log.info("%s: blocking snapshot done, %d rows", self.prefix, self._snapshot_rows)
        self.snapshot, self._batches, self._blocking = None, None, None  # streaming goes on

    def commit(self, offsets: Any) -> None:
        for offset in offsets.values():
            if not offset.get("snapshot"):
                self.initial_snapshot.committed()

    def position(self) -> SourcePosition:
        partition = getattr(self, "partition", None)
        if getattr(self, "_batches", None) is not None:
            return SourcePosition(Phase.SNAPSHOTTING, partition)
        reader = getattr(self, "reader", None)
        if reader is not None:
            return SourcePosition(Phase.STREAMING, partition, reader.tracker.offset())
        if partition is not None and self.settings["snapshot.mode"] == "initial_only":
            return SourcePosition(Phase.FINISHED, partition)
        return SourcePosition(Phase.STARTING, partition)

    def metrics(self) -> dict[str, float]:
        signalling = getattr(self, "signalling", None)
        return signalling.metrics() if signalling is not None else {}

    def stop(self) -> None:
        notifications = getattr(self, "initial_snapshot", None)
        if notifications is not None:
            notifications.stopped()
        signalling = getattr(self, "signalling", None)
        if signalling is not None:
            signalling.close()
        for name in ("reader", "snapshot", "conn"):
            thing = getattr(self, name, None)
            setattr(self, name, None)
            if thing is not None:
                try:
                    thing.close()
                except Exception as exc:
                    log.debug("closing %s: %s", name, exc)


class MariaDbTask(MySqlTask):
    kind = "mariadb"


def snapshot_marker(first_table: bool, last_table: bool, *, first_row: bool, last_row: bool) -> str:
    """Debezium's ``source.snapshot`` of a snapshot record (RelationalSnapshotChangeEventSource's
    ``setSnapshotMarker``): ``last`` on the last row of the last table, ``first`` on the first of
    the first, ``last_in_data_collection`` / ``first_in_data_collection`` on every other table's
    last / first row (in this order of precedence), ``true`` elsewhere. The first and last tables
    are the first and last in snapshot order, rows or not (an empty last table: no ``last``)."""
    if last_row and last_table:
        return "last"
    if first_row and first_table:
        return "first"
    if last_row:
        return "last_in_data_collection"
    if first_row:
        return "first_in_data_collection"
    return "true"


def _shape(table: Table | None) -> tuple[tuple[str, str], ...] | None:
    """What a row read from the table looks like: its columns' names and types (the history's
    definitions from DDL and information_schema's differ in details a row does not show)."""
    return None if table is None else tuple((c.name, c.data_type) for c in table.columns)


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
        code = exc.args[0] if exc.args else 0
        if code in (1044, 1045, 1049):  # access denied, unknown database: retrying cannot help
            raise CdcError(f"MySQL refused the connection: {exc}; fix database.user / database.password") from exc
        raise RetriableError(f"cannot connect to MySQL: {exc}") from exc
