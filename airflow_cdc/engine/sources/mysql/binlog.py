"""A small adapter over mysql-replication's ``BinLogStreamReader``: the rest of the engine sees
row changes, schema changes (DDL) and positions, never the library's events.

Why it is more than a loop over the reader:

- **Where it starts.** With ``is_mariadb=True`` mysql-replication 1.0.x ignores ``log_file`` /
  ``log_pos`` and asks for the first binlog (an empty file name at position 4): a "resume" would
  replay everything the server still has. MariaDB is therefore always resumed by GTID
  (``auto_position``: the server streams what follows the given state); a file/pos alone is
  first turned into a GTID state by the server (``BINLOG_GTID_POS``). MySQL resumes by GTID
  when it has GTIDs (``gtid_mode=ON``), else at file/pos (``resume_stream``: otherwise the
  library asks for position 4 of the file).
- **Reconnects.** On a lost connection the library silently reconnects with the position it
  was *created* with (for MariaDB, the first GTID state), so it would replay. The adapter hands
  it a connection factory that refuses a second stream connection; the read fails with a
  RetriableError and the next read opens a new reader at the tracked position.
- **Returning in time.** A blocking binlog read waits for the next event; the server sends a
  heartbeat every ``HEARTBEAT_S`` when idle, so a read returns within about that.
- **Counting.** Every event is counted toward the offsets whatever its table
  (``tracking.py``): filtered tables' rows are simply never decoded (the library decodes rows
  lazily), instead of being filtered by the library, which would change the counts.
- **Decoding.** Rows are decoded by ``row_decoder.py`` with the schema history's definitions,
  never by the library (which needs ``binlog_row_metadata=FULL`` to read them right), and only
  when the connector converts the event: the history has then taken in every DDL before it, even
  one read in the same batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pymysql

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.errors import CdcError, MissingDependencyError, RetriableError
from airflow_cdc.engine.sources.mysql.binlog_items import (
    Begin,
    BinlogItem,
    EventSource,
    Position,
    RowChange,
    RowEvent,
    SchemaChange,
    TableFilter,
)
from airflow_cdc.engine.sources.mysql.positions import (
    MariaDbGtidSet,
    MySqlGtidSet,
    parse_gtid_set,
)
from airflow_cdc.engine.sources.mysql.server import ServerInfo
from airflow_cdc.engine.sources.mysql.tracking import PositionTracker, StartPoint

__all__ = [
    "Begin",
    "BinlogItem",
    "BinlogPurgedError",
    "BinlogReader",
    "EventSource",
    "Position",
    "RowChange",
    "RowEvent",
    "SchemaChange",
    "TableFilter",
]

log = logging.getLogger(__name__)

#: Seconds between the server's heartbeats on an idle stream: a read returns within about this.
HEARTBEAT_S = 0.5
#: A stream silent this long (no event, no heartbeat) is taken for dead.
READ_TIMEOUT_S = 30
#: MariaDB's GTID event flag: a transaction of one statement (DDL), with no COMMIT/XID.
_FL_STANDALONE = 1
#: The server cannot serve the requested position (ER_MASTER_FATAL_ERROR_READING_BINLOG).
_ER_BINLOG_READ = 1236


class BinlogPurgedError(CdcError):
    """The binlog the offsets point into is gone: changes since are lost to this engine."""


#: mysql-replication's ``BINLOG.PARTIAL_UPDATE_ROWS_EVENT`` (MySQL 8's partial JSON updates).
_PARTIAL_UPDATE_ROWS_EVENT = 0x27


class _StreamLost(Exception):
    """The library tried to reconnect its stream on its own (see the module's docstring)."""


def _library() -> Any:
    try:
        import pymysqlreplication
    except ImportError as exc:
        raise MissingDependencyError("pymysqlreplication", "mysql") from exc
    logging.getLogger("pymysqlreplication").addFilter(_no_metadata_advice)
    return pymysqlreplication


def _no_metadata_advice(record: logging.LogRecord) -> bool:
    """Drops the library's advice to set ``binlog_row_metadata=FULL`` at every connect: rows are
    decoded here with the schema history's definitions, which need no optional metadata."""
    return "BINLOG_ROW_METADATA" not in str(record.msg)


class BinlogReader:
    """Reads the binlog from a start point, one bounded batch at a time (``read``)."""

    def __init__(
        self,
        connection: dict[str, Any],
        *,
        server_id: int,
        start: StartPoint,
        server: ServerInfo,
        tables: TableFilter,
        begins: bool = False,
    ) -> None:
        self._connection, self._server_id, self._server, self._tables = connection, server_id, server, tables
        #: Also hand over a :class:`Begin` where Debezium starts a transaction (its metadata).
        self._begins = begins
        #: The time of the last event with one (not a heartbeat): Debezium's BEGIN and END times.
        self._last_ts: int | None = None
        self.tracker = PositionTracker(start)
        self._reader: Any = None
        self._standalone = False  # the current MariaDB transaction is one statement
        self._begun = False  # the current transaction had a BEGIN (MySQL)
        self._thread: int | None = None
        self._failure: CdcError | None = None  # to raise at the next read (see ``read``)
        lib = _library()
        self._event = lib.event
        self._rows = lib.row_event
        self._handlers: dict[type, Callable[[Any, list[BinlogItem]], None]] = {
            lib.event.RotateEvent: self._rotate,
            lib.event.MariadbGtidEvent: self._mariadb_gtid,
            lib.event.GtidEvent: self._mysql_gtid,
            lib.event.QueryEvent: self._query,
            lib.event.XidEvent: self._xid,
            lib.event.HeartbeatLogEvent: self._heartbeat,
            lib.row_event.WriteRowsEvent: self._row_event,
            lib.row_event.UpdateRowsEvent: self._row_event,
            lib.row_event.DeleteRowsEvent: self._row_event,
        }
        self._ops = {
            lib.row_event.WriteRowsEvent: "c",
            lib.row_event.UpdateRowsEvent: "u",
            lib.row_event.DeleteRowsEvent: "d",
        }
        #: Counted like any event of a transaction, nothing more.
        self._counted = (lib.row_event.TableMapEvent, lib.event.RowsQueryLogEvent, lib.event.XAPrepareEvent)

    # -- opening -------------------------------------------------------------------------------
    def _open(self) -> Any:
        lib = _library()
        t = self.tracker
        kwargs: dict[str, Any] = {}
        gtids = t.completed
        if self._server.mariadb:
            if gtids is None and t.file:
                gtids = self._mariadb_gtids_at(t.file, t.restart_pos)
            # Always by GTID: given a file/pos, mysql-replication reads MariaDB from the first binlog.
            kwargs["auto_position"] = str(gtids) if gtids is not None and not gtids.empty else None
            if kwargs["auto_position"] is None:
                raise CdcError("no GTID position to resume MariaDB from; this is a bug (a fresh start reads one)")
        elif isinstance(gtids, MySqlGtidSet) and not gtids.empty and self._server.gtid_mode:
            kwargs["auto_position"] = str(gtids)
        else:
            kwargs.update(log_file=t.file, log_pos=t.restart_pos, resume_stream=True)
        stream_connections = 0

        def connect(**settings: Any) -> pymysql.connections.Connection:
            nonlocal stream_connections
            if settings.get("db") != "information_schema":
                stream_connections += 1
                if stream_connections > 1:
                    raise _StreamLost
            return mysql_client.connect(**settings)

        events = self._event
        # Transaction metadata takes its times from the event before (Begin.ts_sec): every event
        # that has a time is read, those the stream needs nothing else of too.
        timed = (
            [events.FormatDescriptionEvent, events.MariadbGtidListEvent, events.MariadbBinLogCheckPointEvent,
             events.MariadbAnnotateRowsEvent, events.PreviousGtidsEvent]
            if self._begins
            else []
        )  # fmt: skip
        return lib.BinLogStreamReader(
            connection_settings={**self._connection, "read_timeout": READ_TIMEOUT_S},
            server_id=self._server_id,
            blocking=True,
            is_mariadb=self._server.mariadb,
            slave_heartbeat=HEARTBEAT_S,
            pymysql_wrapper=connect,
            enable_logging=False,
            only_events=[
                events.RotateEvent,
                events.MariadbGtidEvent,
                events.GtidEvent,
                events.QueryEvent,
                events.XidEvent,
                events.HeartbeatLogEvent,
                events.RowsQueryLogEvent,
                events.XAPrepareEvent,
                self._rows.TableMapEvent,
                self._rows.WriteRowsEvent,
                self._rows.UpdateRowsEvent,
                self._rows.DeleteRowsEvent,
                *timed,
            ],
            report_slave="airflow-cdc",
            **kwargs,
        )

    def _mariadb_gtids_at(self, file: str, pos: int) -> MariaDbGtidSet:
        with mysql_client.connect(**self._connection) as conn, conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            found = cur.fetchone()
        if found is None or found[0] is None:
            raise BinlogPurgedError(
                f"MariaDB has no binlog position {file}:{pos} (purged, or not an event's start): "
                "take a new snapshot (snapshot.mode=when_needed) or reset the offsets"
            )
        text = found[0].decode() if isinstance(found[0], bytes) else str(found[0])
        state = parse_gtid_set(text)
        return state if isinstance(state, MariaDbGtidSet) else MariaDbGtidSet()

    # -- reading -------------------------------------------------------------------------------
    def read(self, max_items: int, timeout: float) -> list[BinlogItem]:
        """Items in binlog order: up to about ``max_items`` (whole events), waiting at most about
        ``timeout`` seconds (plus one heartbeat) for the first.

        A stream lost after some items were read hands those items over and fails at the next
        read: the tracker already stands after them, so raising at once would lose them (a
        server restart under load did), and the read after the failure reopens right after them.
        """
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        out: list[BinlogItem] = []
        try:
            if self._reader is None:
                self._reader = self._open()
            self._read_into(out, max_items, time.monotonic() + timeout)
        except (_StreamLost, pymysql.Error, ConnectionError, OSError) as exc:
            self.close()
            failure = self._failure_of(exc)
            if not out:
                raise failure from (None if isinstance(exc, _StreamLost) else exc)
            failure.__cause__ = None if isinstance(exc, _StreamLost) else exc
            self._failure = failure
        return out

    def _read_into(self, out: list[BinlogItem], max_items: int, deadline: float) -> None:
        reader = self._reader
        while len(out) < max_items:
            event = reader.fetchone()
            if event is None:  # the server ended the stream (it is shutting down)
                raise ConnectionError("the MySQL server ended the binlog stream")
            self._handle(event, out)
            if time.monotonic() >= deadline and (out or type(event) is self._event.HeartbeatLogEvent):
                break

    def _failure_of(self, exc: BaseException) -> CdcError:
        if isinstance(exc, _StreamLost):
            return RetriableError("lost the binlog connection; reconnecting at the last position read")
        if isinstance(exc, pymysql.OperationalError) and exc.args and exc.args[0] == _ER_BINLOG_READ:
            return self._purged(str(exc))
        if isinstance(exc, pymysql.Error) and not isinstance(exc, (pymysql.OperationalError, pymysql.InterfaceError)):
            return CdcError(f"binlog stream: {exc}")
        return RetriableError(f"binlog stream: {exc}")

    def _purged(self, message: str) -> CdcError:
        where = self.tracker.offset()
        if any(s in message.lower() for s in ("purged", "could not find", "not find first log")):
            return BinlogPurgedError(
                f"the server no longer has the binlog after {where} ({message}): the changes since are lost; "
                "take a new snapshot (snapshot.mode=when_needed, or reset the offsets)"
            )
        return CdcError(f"the server refused to stream the binlog from {where}: {message}")

    def _handle(self, event: Any, out: list[BinlogItem]) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event, out)
        elif isinstance(event, self._counted):
            self.tracker.event_done()
        if self._begins and event.timestamp and type(event) is not self._event.HeartbeatLogEvent:
            self._last_ts = event.timestamp

    def _rotate(self, event: Any, out: list[BinlogItem]) -> None:
        self.tracker.rotate(event.next_binlog, event.position)

    def _mariadb_gtid(self, event: Any, out: list[BinlogItem]) -> None:
        self._standalone = bool(event.flags & _FL_STANDALONE)
        self._begun = not self._standalone
        self.tracker.begin(event.gtid, _start(event), event.timestamp, event.packet.server_id)
        if self._begins:  # Debezium's MariaDB source begins at every GTID event, DDL's too
            out.append(Begin(event.gtid, self._last_ts or event.timestamp, self.tracker.offset()))

    def _mysql_gtid(self, event: Any, out: list[BinlogItem]) -> None:
        self._standalone, self._begun = False, False
        self.tracker.begin(event.gtid, _start(event), event.timestamp, event.packet.server_id)

    def _query(self, event: Any, out: list[BinlogItem]) -> None:
        t, query = self.tracker, event.query.strip()
        keyword = query[:8].upper()
        if keyword == "BEGIN":
            self._thread = event.slave_proxy_id
            if not t.in_transaction:  # no GTIDs: BEGIN starts the transaction
                t.begin(None, _start(event), event.timestamp, event.packet.server_id)
            else:
                self._begun = True
                t.event_done()
            if self._begins:  # where Debezium's binlog source begins (MySQL; MariaDB did at its GTID)
                tx_id = t.gtid or f"file={t.file},pos={t.restart_pos}"
                out.append(Begin(tx_id, self._last_ts or event.timestamp, t.offset()))
            return
        if keyword == "COMMIT":  # a non-transactional engine's commit
            out.append(Position(t.commit(event.packet.log_pos, event.timestamp), "commit", self._last_ts))
            return
        if t.in_transaction and self._begun:
            t.event_done()  # a statement inside a transaction (a SAVEPOINT, say): nothing to read
            return
        # DDL: a transaction of its own (GTID + query), or a lone event without GTIDs.
        source = self._source(event, t.gtid)
        offset = t.commit(event.packet.log_pos, event.timestamp)
        database = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
        out.append(SchemaChange(database, query, offset, source))

    def _xid(self, event: Any, out: list[BinlogItem]) -> None:
        out.append(Position(self.tracker.commit(event.packet.log_pos, event.timestamp), "commit", self._last_ts))

    def _heartbeat(self, event: Any, out: list[BinlogItem]) -> None:
        if not self.tracker.in_transaction:
            out.append(Position(self.tracker.offset(), "heartbeat"))

    def _row_event(self, event: Any, out: list[BinlogItem]) -> None:
        t = self.tracker
        skip = t.rows_to_skip()
        if skip >= 0 and self._tables(event.schema, event.table):
            op = self._ops[type(event)]
            bitmaps: tuple[bytes, ...] = (event.columns_present_bitmap,)
            if op == "u":
                bitmaps += (event.columns_present_bitmap2,)
            data, unreadable = _rest_of_event(event), ""
            if event.event_type == _PARTIAL_UPDATE_ROWS_EVENT:
                data, unreadable = None, "a partial JSON update: set binlog_row_value_options='' on the server"
            elif data is None:
                unreadable = "the library left the event's rows unreadable (its bytes were read already)"
            source = self._source(event, t.gtid)
            out.append(
                RowEvent(
                    event.schema, event.table, op, event.columns, bitmaps, data, skip, t.point(), source, unreadable
                )
            )
        t.event_done()

    def _source(self, event: Any, gtid: str | None) -> EventSource:
        return EventSource(
            self.tracker.file, _start(event), gtid, event.packet.server_id, event.timestamp, self._thread
        )

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            try:
                reader.close()
            except Exception as exc:  # closing a broken connection may fail: it is gone either way
                log.debug("closing the binlog reader: %s", exc)


def _start(event: Any) -> int:
    """Where an event starts: its end (``log_pos``) minus its size, header included."""
    return int(event.packet.log_pos) - int(event.packet.event_size)


def _rest_of_event(event: Any) -> bytes | None:
    """The event's bytes after its column bitmaps: ``event_size - packet.read_bytes`` of them
    (the bound of the library's own row loop), read without consuming them."""
    wrapper = event.packet  # the library's BinLogPacketWrapper over PyMySQL's packet
    if getattr(wrapper, "_BinLogPacketWrapper__data_buffer", b"?"):  # bytes pushed back: not plain
        return None
    packet = wrapper.packet
    data, start = getattr(packet, "_data", None), getattr(packet, "_position", None)
    if not isinstance(data, bytes) or not isinstance(start, int):
        return None
    size = event.event_size - wrapper.read_bytes
    rest = data[start : start + size]
    return rest if len(rest) == size else None
