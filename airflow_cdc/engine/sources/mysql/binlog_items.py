"""What the binlog reader (``binlog.py``) hands over: row events of captured tables (their rows
decoded later, with the schema history), schema changes (DDL) and positions, each with where it
came from. Plain data: nothing here sees mysql-replication's events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from airflow_cdc.engine.sources.mysql.row_decoder import RowDecodeError, RowDecoder
from airflow_cdc.engine.sources.mysql.tracking import EventPoint


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
    #: Column names, from the schema history's definition.
    columns: tuple[str, ...]
    row: int
    offset: dict[str, Any]
    source: EventSource


@dataclass(frozen=True, slots=True)
class RowEvent:
    """A row event of a captured table, its rows not decoded yet: the connector decodes them
    (:meth:`changes`) with the definition the schema history holds once it has taken in every
    item before this one."""

    database: str
    table: str
    op: str  # "c", "u" or "d"
    #: The table map's columns (mysql-replication's ``Column``: binlog type and its metadata).
    binlog_columns: Sequence[Any]
    #: The columns-present bitmap(s): one, two for an update.
    bitmaps: tuple[bytes, ...]
    #: The rows' bytes (after the bitmaps); None with ``unreadable`` saying why.
    data: bytes | None
    skip: int  # rows a restart had delivered already
    point: EventPoint
    source: EventSource
    unreadable: str = ""

    def changes(self, decoder: RowDecoder) -> list[RowChange]:
        """The event's rows (those not delivered before a restart); RowDecodeError when they
        cannot be read."""
        if self.data is None:
            raise RowDecodeError(None, self.unreadable)
        for bitmap in self.bitmaps:
            if bitmap != decoder.full_bitmap:
                raise RowDecodeError(
                    None,
                    f"the row image lacks {', '.join(decoder.missing(bitmap))}: the session that wrote it had "
                    "binlog_row_image other than FULL (set it FULL on the server and for every session)",
                )
        rows = decoder.decode(self.data, 2 if self.op == "u" else 1)
        total, point, names = len(rows), self.point, decoder.names
        out = []
        for index in range(self.skip, total):
            images = rows[index]
            before, after = (
                (images[0], images[1])
                if self.op == "u"
                else ((None, images[0]) if self.op == "c" else (images[0], None))
            )
            out.append(
                RowChange(
                    self.database, self.table, self.op, before, after, names, index,
                    point.row_offset(index, total), self.source,
                )
            )  # fmt: skip
        return out


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
    #: A commit's time as Debezium's transaction metadata has it (see ``Begin.ts_sec``).
    ts_sec: int | None = None


@dataclass(frozen=True, slots=True)
class Begin:
    """A transaction starts (read only with ``provide.transaction.metadata``): Debezium's id of
    it - the GTID, or ``file=<file>,pos=<pos>`` without GTIDs - and the offset at its start.
    ``ts_sec`` is the time of the binlog event *before* the one that began it: Debezium's binlog
    source handles an event before its other listener takes the event's time in."""

    id: str
    ts_sec: int
    offset: dict[str, Any]


BinlogItem: TypeAlias = RowEvent | SchemaChange | Position | Begin
TableFilter: TypeAlias = Callable[[str, str], bool]
