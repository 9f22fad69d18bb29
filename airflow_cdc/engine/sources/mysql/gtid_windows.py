"""Read-only incremental snapshots on MySQL and MariaDB (``read.only``; Debezium's
``MySqlReadOnlyIncrementalSnapshotChangeEventSource`` / ``MariaDbReadOnly...``): a window is
bounded by the server's executed GTID set instead of watermark rows, so nothing is written to
the database.

For each chunk the reader takes the **low watermark** (``@@gtid_binlog_pos`` on MariaDB,
``@@gtid_executed`` on MySQL) before the read and the **high watermark** after it. The stream
then closes the window (emits the chunk's surviving rows):

* before the first event of a transaction outside the high watermark - the read did not see
  it, so its changes must follow the chunk (Debezium's ``updateWindowState``);
* or at a position where the stream has reached the high watermark less the low one (the
  transactions committed during the read) - or, if none committed, the low watermark: "at
  once" once the stream stands where the read stood (Debezium's ``reachedHighWatermark`` on a
  heartbeat or commit). An idle stream is checked at its current position each poll.

"Reached" compares, per source (MySQL: server uuid and tag; MariaDB: replication domain), the
newest transaction number, as Debezium does - not set containment, which a gap the stream never
sees (a manually set ``gtid_purged``) would keep from ever closing the window.

Which streamed changes drop a chunk row is the coordinator's rule (:mod:`...snapshots.windows`):
every change since the window was queued (the queueing precedes the low watermark), or, on
MariaDB, exactly the transactions the read did not see (:class:`GtidVisibility`, from the read's
consistent-snapshot binlog point).

Sans-IO: the chunk source hands windows in (:meth:`GtidWindows.add`, reader thread) and the
coordinator runs each poll's records through :meth:`GtidWindows.place` (task thread).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from airflow_cdc.engine.records import Offset, Partition, PositionMarker, SourceRecord
from airflow_cdc.engine.snapshots.events import CLOSE, Watermark
from airflow_cdc.engine.sources.mysql.positions import GtidSet, MariaDbGtidSet, MySqlGtidSet, parse_gtid_set

log = logging.getLogger(__name__)

__all__ = ["GtidVisibility", "GtidWindow", "GtidWindows", "contains", "high_watermark", "reached"]


# -- GTID sets -------------------------------------------------------------------------------------


def _mysql_gtid(gtid: str) -> tuple[tuple[str, str], int] | None:
    """``uuid:n`` / ``uuid:tag:n`` as ((uuid, tag), n); None if it is no MySQL GTID."""
    uuid, *rest = gtid.strip().lower().split(":")
    if not rest or len(rest) > 2 or not rest[-1].isdigit():
        return None
    return (uuid, rest[0] if len(rest) == 2 else ""), int(rest[-1])


def _mariadb_gtid(gtid: str) -> tuple[int, int] | None:
    """``domain-server-sequence`` as (domain, sequence); None if it is no MariaDB GTID."""
    parts = gtid.strip().split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[2])


def contains(gtids: GtidSet, gtid: str) -> bool:
    """Transaction ``gtid`` is in the set. MariaDB's sets are positions (each domain's last
    transaction), so a transaction is in one if its domain's sequence number is not past it."""
    if isinstance(gtids, MariaDbGtidSet):
        found = _mariadb_gtid(gtid)
        return found is not None and found[0] in gtids.domains and found[1] <= gtids.domains[found[0]][1]
    mysql = _mysql_gtid(gtid)
    if mysql is None:
        return False
    key, number = mysql
    return any(start <= number <= end for start, end in gtids.sets.get(key, ()))


def reached(stream: GtidSet, target: GtidSet) -> bool:
    """The stream's executed set has reached every source's newest transaction in ``target``."""
    if target.empty:
        return True
    if isinstance(target, MariaDbGtidSet):
        if not isinstance(stream, MariaDbGtidSet):
            return False
        return all(d in stream.domains and stream.domains[d][1] >= seq for d, (_, seq) in target.domains.items())
    if not isinstance(stream, MySqlGtidSet):
        return False
    return all(key in stream.sets and stream.sets[key][-1][1] >= ends[-1][1] for key, ends in target.sets.items())


def high_watermark(low: GtidSet, high: GtidSet) -> GtidSet:
    """Debezium's high watermark: the executed set after the read less the one before it (the
    transactions that committed while the chunk was read)."""
    if isinstance(high, MariaDbGtidSet):
        before = low.domains if isinstance(low, MariaDbGtidSet) else {}
        return MariaDbGtidSet({d: (s, n) for d, (s, n) in high.domains.items() if d not in before or before[d][1] < n})
    assert isinstance(high, MySqlGtidSet)
    theirs = low.sets if isinstance(low, MySqlGtidSet) else {}
    left = {key: _subtract(intervals, theirs.get(key, ())) for key, intervals in high.sets.items()}
    return MySqlGtidSet({key: intervals for key, intervals in left.items() if intervals})


def _subtract(
    intervals: tuple[tuple[int, int], ...], minus: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for start, end in intervals:
        for s, e in minus:  # merged and sorted: cut each piece in turn
            if e < start or s > end:
                continue
            if s > start:
                out.append((start, s - 1))
            start = e + 1
            if start > end:
                break
        if start <= end:
            out.append((start, end))
    return tuple(out)


@dataclass(frozen=True)
class GtidVisibility:
    """Which transactions a chunk's read saw: those in the GTID state of its consistent
    snapshot (MariaDB's ``binlog_snapshot_file``/``_position`` through ``BINLOG_GTID_POS``).
    Transactions are named by their GTID (the records' ``source.gtid``)."""

    seen: GtidSet

    def sees(self, transaction: Hashable) -> bool:
        return isinstance(transaction, str) and contains(self.seen, transaction)


# -- windows ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GtidWindow:
    """A window whose chunk was read between the executed sets ``low`` and ``high``."""

    id: str
    low: GtidSet
    high: GtidSet

    @property
    def target(self) -> GtidSet:
        """Where the stream must stand to close the window if no transaction outside ``high``
        closes it first: past what committed during the read, or, if nothing did, at ``low``."""
        during = high_watermark(self.low, self.high)
        return self.low if during.empty else during


class GtidWindows:
    """The windows read and not yet closed, in read order, and where their closes fall in the
    stream. ``position``: the stream's offset now (for an idle poll)."""

    def __init__(self, partition: Partition, position: Callable[[], Offset]) -> None:
        self._partition, self._position = partition, position
        self._lock = threading.Lock()
        self._pending: deque[tuple[GtidWindow, GtidSet]] = deque()  # each with its target
        self._last: Offset | None = None  # the offset of the last record placed
        self._parsed: tuple[str, GtidSet] | None = None

    def add(self, window: GtidWindow) -> None:
        """A window's chunk was read (the reader thread, in window order)."""
        with self._lock:
            self._pending.append((window, window.target))

    @property
    def pending(self) -> int:
        return len(self._pending)

    def place(self, records: Sequence[SourceRecord]) -> Sequence[SourceRecord]:
        """The polled records with a close :class:`Watermark` wherever a window closes."""
        if not self._pending:  # the usual poll: no window waits
            if records:
                self._last = records[-1].offset
            elif self._last is None:
                self._last = self._position()
            return records
        out: list[SourceRecord] = []
        last = self._last if self._last is not None else self._position()
        for record in records:
            gtid = _gtid_of(record)
            if gtid is not None:
                while (first := self._first()) is not None and not contains(first[0].high, gtid):
                    out.append(self._close(first[0], last, f"transaction {gtid} is past its high watermark"))
            out.append(record)
            last = record.offset
            if type(record) is PositionMarker and not last.get("event"):  # between transactions
                self._close_reached(out, last)
        if not records:
            last = self._position()
            if not last.get("event"):
                self._close_reached(out, last)
        self._last = last
        return out

    def _close_reached(self, out: list[SourceRecord], offset: Offset) -> None:
        text = offset.get("gtids")
        if text is None:
            return
        stream = self._stream_set(str(text))
        while (first := self._first()) is not None and reached(stream, first[1]):
            out.append(self._close(first[0], offset, f"the stream reached {first[1]}"))

    def _stream_set(self, text: str) -> GtidSet:
        parsed = self._parsed
        if parsed is None or parsed[0] != text:
            parsed = self._parsed = (text, parse_gtid_set(text))
        return parsed[1]

    def _first(self) -> tuple[GtidWindow, GtidSet] | None:
        with self._lock:
            return self._pending[0] if self._pending else None

    def _close(self, window: GtidWindow, offset: Offset, why: str) -> Watermark:
        with self._lock:
            self._pending.popleft()
        log.debug("window %s closes: %s (low %s, high %s)", window.id, why, window.low, window.high)
        return Watermark.of(self._partition, offset, window.id, CLOSE)

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()


def _gtid_of(record: SourceRecord) -> str | None:
    """The transaction of a change record (its Debezium ``source.gtid``)."""
    value = record.value
    if type(value) is not dict:
        return None
    source = value.get("source")
    gtid = source.get("gtid") if type(source) is dict else None
    return gtid if isinstance(gtid, str) else None
