"""Where the binlog reader stands, per event and per transaction, as Debezium's offsets.

Sans-IO: the reader (``binlog.py``) tells the tracker what it read, the tracker computes the
offsets. The offset of a record says how to resume right after it (``positions.py``):
``gtids`` the transactions delivered completely, ``file``/``pos`` the start of the transaction
being delivered (the end of the last one between transactions), and inside a transaction
``event`` events of it delivered completely, then ``row`` rows of the next. A restart resumes
at the transaction (by GTID, or at ``file``/``pos``) and skips what the offset says was
delivered: nothing lost, nothing repeated.

What counts as an event: every event the reader yields after the transaction's first one (the
GTID event, or ``BEGIN`` without GTIDs) - table maps, row events, queries - whatever table it
concerns. Counting does not depend on the table filters, so a restart with other filters still
skips the right events. (Debezium counts the events of its own client library, which yields a
few kinds more; an offset moved to Debezium *inside* a transaction may skip differently; one
between transactions - no ``event`` - means the same to both.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.records import Offset
from airflow_cdc.engine.sources.mysql.positions import (
    GtidSet,
    MariaDbGtidSet,
    MySqlGtidSet,
    offset_of,
    parse_gtid_set,
)


@dataclass(frozen=True)
class StartPoint:
    """Where to (re)start reading: a GTID set (the transactions delivered completely) and/or a
    binlog file/pos, and how much of the first transaction to skip."""

    gtids: GtidSet | None
    file: str
    pos: int
    skip_events: int = 0
    skip_rows: int = 0

    @classmethod
    def from_offset(cls, offset: Offset) -> StartPoint:
        text = offset.get("gtids")
        return cls(
            parse_gtid_set(str(text)) if text is not None else None,
            str(offset.get("file") or ""),
            int(offset.get("pos") or 0),
            int(offset.get("event") or 0),
            int(offset.get("row") or 0),
        )


@dataclass(frozen=True, slots=True)
class EventPoint:
    """Where one event stands in its transaction: its rows' offsets, computed when they are
    decoded (after the reader has moved on)."""

    file: str
    pos: int
    gtids: str | None
    events: int
    ts_sec: int | None
    server_id: int

    def offset(self, row: int = 0) -> dict[str, Any]:
        return offset_of(
            file=self.file,
            pos=self.pos,
            gtids=self.gtids,
            event=self.events,
            row=row,
            ts_sec=self.ts_sec,
            server_id=self.server_id,
        )

    def row_offset(self, index: int, total: int) -> dict[str, Any]:
        """The offset after row ``index`` of ``total`` in the event (Debezium's
        ``setRowNumber``: the next row to skip; after the last, all of them)."""
        return self.offset(row=index + 1 if index < total - 1 else total)


class PositionTracker:
    """The reader's place in the binlog, turned into offsets."""

    def __init__(self, start: StartPoint, *, server_id: int = 0) -> None:
        self.completed: GtidSet | None = start.gtids
        self.file, self.restart_pos = start.file, start.pos
        self.in_transaction = False
        self.gtid: str | None = None
        #: Events of the current transaction seen completely (Debezium's ``event``).
        self.events = 0
        self.ts_sec: int | None = None
        self.server_id = server_id
        # What the stored offset says was delivered of the first transaction read.
        self._skip_events, self._skip_rows = start.skip_events, start.skip_rows
        self._skipping = bool(start.skip_events or start.skip_rows)

    # -- what the reader saw ---------------------------------------------------------------------
    def rotate(self, file: str, pos: int) -> None:
        self.file = file
        if not self.in_transaction:
            self.restart_pos = pos

    def begin(self, gtid: str | None, event_start: int, ts_sec: int, server_id: int) -> None:
        """A transaction starts with the event at ``event_start`` (its GTID event or BEGIN)."""
        if self.in_transaction:
            # No transaction starts inside another: the reader reconnected inside this one and
            # reads it again from its start. Skip what was seen of it.
            self._skip_events, self._skip_rows, self._skipping = self.events, 0, True
        self.in_transaction, self.gtid, self.events = True, gtid, 0
        self.restart_pos, self.ts_sec, self.server_id = event_start, ts_sec, server_id

    def event_done(self) -> None:
        if self.in_transaction:
            self.events += 1

    def commit(self, event_end: int, ts_sec: int | None = None) -> dict[str, Any]:
        """The transaction ended with the event ending at ``event_end``: its offset."""
        if self.gtid is not None:
            base = self.completed
            if base is None or base.empty:  # the first GTID seen decides the set's form
                base = MySqlGtidSet() if ":" in self.gtid else MariaDbGtidSet()
            self.completed = base.with_gtid(self.gtid)
        self.in_transaction, self.gtid, self.events = False, None, 0
        self.restart_pos = event_end
        self._skipping = False
        if ts_sec is not None:
            self.ts_sec = ts_sec
        return self.offset()

    def advance(self, event_end: int) -> None:
        """An event outside any transaction (a heartbeat, a format description) ended here."""
        if not self.in_transaction and event_end:
            self.restart_pos = event_end

    # -- offsets ---------------------------------------------------------------------------------
    def offset(self) -> dict[str, Any]:
        return self.point().offset()

    def point(self) -> EventPoint:
        """The current event's place (its rows' offsets)."""
        completed = None if self.completed is None else str(self.completed)
        return EventPoint(self.file, self.restart_pos, completed, self.events, self.ts_sec, self.server_id)

    def row_offset(self, index: int, total: int) -> dict[str, Any]:
        """The offset after row ``index`` of ``total`` in the current event."""
        return self.point().row_offset(index, total)

    def rows_to_skip(self) -> int:
        """How many rows of the current event were delivered already (all: skip it whole).
        Call once per event inside a transaction, before ``event_done``."""
        if not self._skipping:
            return 0
        if self.events < self._skip_events:
            return -1  # the whole event
        self._skipping = False
        return self._skip_rows

    @property
    def skipping(self) -> bool:
        return self._skipping
