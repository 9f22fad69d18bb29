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
- **Decoding.** The rows of tables whose columns are all of common types (integers, decimal,
  float, char/varchar, date, datetime, timestamp) are decoded by ``row_decoder.py``: the
  library's values, three to four times faster; the library decodes every other row.
- **latin1.** The library decodes a latin1 column as Python's cp1252, strictly: the five bytes
  cp1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D), which the server stores and converts
  to U+0081, U+008D, ..., raised UnicodeDecodeError and stopped the stream. latin1 columns are
  decoded with the server's own latin1 table instead (``MYSQL_LATIN1``).
"""

from __future__ import annotations

import codecs
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import pymysql

from airflow_cdc.engine.errors import CdcError, MissingDependencyError, RetriableError
from airflow_cdc.engine.sources.mysql.positions import (
    MariaDbGtidSet,
    MySqlGtidSet,
    parse_gtid_set,
)
from airflow_cdc.engine.sources.mysql.server import ServerInfo
from airflow_cdc.engine.sources.mysql.tracking import PositionTracker, StartPoint

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


@dataclass(frozen=True, slots=True)
class EventSource:
    """Where an event came from, for Debezium's ``source`` block."""

    file: str
    pos: int  # the event's start
    gtid: str | None
    server_id: int
    ts_sec: int
    thread: int | None = None


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row of a row event; values as mysql-replication decodes them, in column order."""

    database: str
    table: str
    op: str  # "c", "u" or "d"
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None
    #: Column names as the binlog's row metadata gives them (``UNKNOWN_COL<n>`` without it).
    columns: tuple[str, ...]
    row: int
    offset: dict[str, Any]
    source: EventSource
    #: Why a value is None where it is not a NULL (mysql-replication's ``none_sources``, by
    #: column name: "empty set", "out of date..."); None when every None is a NULL.
    odd_nulls_before: dict[str, str] | None = None
    odd_nulls_after: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """A statement that is no row change (DDL), with the offset after it."""

    database: str
    ddl: str
    offset: dict[str, Any]
    source: EventSource


@dataclass(frozen=True, slots=True)
class Position:
    """Nothing to deliver, but the stream stands here: a commit or an idle heartbeat."""

    offset: dict[str, Any]
    kind: str  # "commit" or "heartbeat"


BinlogItem: TypeAlias = RowChange | SchemaChange | Position
TableFilter: TypeAlias = Callable[[str, str], bool]


class _StreamLost(Exception):
    """The library tried to reconnect its stream on its own (see the module's docstring)."""


#: The codec of MySQL's and MariaDB's latin1: cp1252, with its five undefined bytes mapped to the
#: C1 controls of the same number, as the server converts them (``SELECT CONVERT(x'81' USING
#: utf8mb4)`` is U+0081), so that the stream reads what a SELECT reads.
MYSQL_LATIN1 = "airflow_cdc_mysql_latin1"


def _latin1_table() -> str:
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(byte))
    return "".join(chars)


_LATIN1_DECODING = _latin1_table()
_LATIN1_ENCODING = codecs.charmap_build(_LATIN1_DECODING)


def _find_latin1(name: str) -> codecs.CodecInfo | None:
    if name != MYSQL_LATIN1:
        return None
    return codecs.CodecInfo(
        name=MYSQL_LATIN1,
        encode=lambda text, errors="strict": codecs.charmap_encode(text, errors, _LATIN1_ENCODING),
        decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, _LATIN1_DECODING),
    )


codecs.register(_find_latin1)


def _library() -> Any:
    try:
        import pymysqlreplication
    except ImportError as exc:
        raise MissingDependencyError("pymysqlreplication", "mysql") from exc
    _decode_latin1_as_the_server(pymysqlreplication.row_event.RowsEvent)
    return pymysqlreplication


def _decode_latin1_as_the_server(rows_event: Any) -> None:
    """Make the library decode latin1 columns with ``MYSQL_LATIN1`` (see the module's
    docstring): its ``RowsEvent.charset_to_encoding`` names the codec of a column's charset;
    its other charsets keep its own mapping. Idempotent."""
    original = rows_event.charset_to_encoding
    if getattr(original, "_airflow_cdc", False):
        return

    # Cached: the library asks once per text value (a charset lookup each time was about 5% of
    # the stream's decoding); the answer for a name never changes.
    @functools.lru_cache(maxsize=256)
    def charset_to_encoding(name: str) -> str:
        # The table map names a latin1 column's charset by the library's codec for it, cp1252
        # (no other MySQL charset is cp1252); "latin1" in case a version passes the charset.
        return MYSQL_LATIN1 if str(name).lower() in ("latin1", "cp1252") else original(name)

    charset_to_encoding._airflow_cdc = True  # type: ignore[attr-defined]
    rows_event.charset_to_encoding = staticmethod(charset_to_encoding)


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
    ) -> None:
        self._connection, self._server_id, self._server, self._tables = connection, server_id, server, tables
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
        from airflow_cdc.engine.sources.mysql.row_decoder import EventRows  # imports the library

        self._fast = EventRows(lib.row_event)
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
            return pymysql.connect(**settings)

        events = self._event
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
            ],
            report_slave="airflow-cdc",
            **kwargs,
        )

    def _mariadb_gtids_at(self, file: str, pos: int) -> MariaDbGtidSet:
        with pymysql.connect(**self._connection) as conn, conn.cursor() as cur:
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

    def _rotate(self, event: Any, out: list[BinlogItem]) -> None:
        self.tracker.rotate(event.next_binlog, event.position)

    def _mariadb_gtid(self, event: Any, out: list[BinlogItem]) -> None:
        self._standalone = bool(event.flags & _FL_STANDALONE)
        self._begun = not self._standalone
        self.tracker.begin(event.gtid, _start(event), event.timestamp, event.packet.server_id)

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
            return
        if keyword == "COMMIT":  # a non-transactional engine's commit
            out.append(Position(t.commit(event.packet.log_pos, event.timestamp), "commit"))
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
        out.append(Position(self.tracker.commit(event.packet.log_pos, event.timestamp), "commit"))

    def _heartbeat(self, event: Any, out: list[BinlogItem]) -> None:
        if not self.tracker.in_transaction:
            out.append(Position(self.tracker.offset(), "heartbeat"))

    def _row_event(self, event: Any, out: list[BinlogItem]) -> None:
        t = self.tracker
        skip = t.rows_to_skip()
        if skip >= 0 and self._tables(event.schema, event.table):
            source = self._source(event, t.gtid)
            decoded = self._fast.rows(event)  # decoded only here: other tables' rows never are
            if decoded is not None:
                self._fast_changes(event, decoded, skip, source, out)
            else:
                rows = event.rows  # the library decodes what row_decoder.py leaves to it
                for index in range(skip, len(rows)):
                    out.append(self._change(event, rows[index], index, len(rows), source))
        t.event_done()

    def _fast_changes(
        self,
        event: Any,
        decoded: tuple[tuple[str, ...], list[tuple[tuple[Any, ...], ...]]],
        skip: int,
        source: EventSource,
        out: list[BinlogItem],
    ) -> None:
        """RowChanges from row_decoder.py's rows: the library's values, every None a NULL."""
        names, rows = decoded
        kind, total, row_offset = type(event), len(rows), self.tracker.row_offset
        schema, table = event.schema, event.table
        for index in range(skip, total):
            images = rows[index]
            if kind is self._rows.UpdateRowsEvent:
                op, before, after = "u", images[0], images[1]
            elif kind is self._rows.WriteRowsEvent:
                op, before, after = "c", None, images[0]
            else:
                op, before, after = "d", images[0], None
            out.append(RowChange(schema, table, op, before, after, names, index, row_offset(index, total), source))

    def _change(self, event: Any, row: dict[str, Any], index: int, total: int, source: EventSource) -> RowChange:
        odd_before = odd_after = None
        if type(event) is self._rows.UpdateRowsEvent:
            before, after = row["before_values"], row["after_values"]
            op, names = "u", tuple(after)
            values_before, values_after = tuple(before.values()), tuple(after.values())
            odd_before, odd_after = _odd(row.get("before_none_sources")), _odd(row.get("after_none_sources"))
        elif type(event) is self._rows.WriteRowsEvent:
            op, names, values_before, values_after = "c", tuple(row["values"]), None, tuple(row["values"].values())
            odd_after = _odd(row.get("none_sources"))
        else:
            op, names, values_before, values_after = "d", tuple(row["values"]), tuple(row["values"].values()), None
            odd_before = _odd(row.get("none_sources"))
        offset = self.tracker.row_offset(index, total)
        return RowChange(
            event.schema,
            event.table,
            op,
            values_before,
            values_after,
            names,
            index,
            offset,
            source,
            odd_before,
            odd_after,
        )

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


def _odd(none_sources: dict[str, str] | None) -> dict[str, str] | None:
    if not none_sources:
        return None
    odd = {name: why for name, why in none_sources.items() if why != "null"}
    return odd or None


def _start(event: Any) -> int:
    """Where an event starts: its end (``log_pos``) minus its size, header included."""
    return int(event.packet.log_pos) - int(event.packet.event_size)
