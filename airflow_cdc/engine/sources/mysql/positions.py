"""MySQL and MariaDB positions: GTID sets, binlog ``file:pos``, and the source's offsets.

Two GTID forms:

- **MySQL**: ``uuid:1-5:7-9,uuid2:1-3`` - for each source server, the intervals of transaction
  numbers executed; MySQL 8.3+ adds tags (``uuid:1-5:tag:1-3``, the intervals after a tag are
  that tag's). A set covers another if it contains it, so two sets may be unordered.
- **MariaDB**: ``0-1-42,1-2-7`` - per replication domain, the last transaction (domain, server,
  sequence number). Sequence numbers grow within a domain, whatever server wrote them, so a
  state covers another if every domain's sequence number is at least the other's.

Offsets have Debezium's keys (``MySqlOffsetContext``): ``gtids`` the GTID set of the
transactions delivered completely; ``file``/``pos`` where to restart in the binlog - the start
of the transaction being delivered, or the end of the last one; inside a transaction, ``event``
events of it and then ``row`` rows of the next event were delivered already; ``ts_sec`` the
event's time, ``server_id`` the server that wrote it; ``snapshot: true`` while the initial
snapshot is unfinished. Zero ``event``/``row`` are left out, as Debezium does.

Pure (no driver): the CLI and a sensor compare positions without a database.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.positions import PositionCodec
from airflow_cdc.engine.records import Offset

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TAG = re.compile(r"[a-z_][a-z0-9_]{0,31}")
_INTERVAL = re.compile(r"(\d+)(?:-(\d+))?")
_MARIADB_GTID = re.compile(r"(\d+)-(\d+)-(\d+)")
_BINLOG_POSITION = re.compile(r"(?P<file>[^\s:]+):(?P<pos>\d+)")


def _order(a_covers_b: bool, b_covers_a: bool) -> int | None:
    if a_covers_b and b_covers_a:
        return 0
    if a_covers_b:
        return 1
    if b_covers_a:
        return -1
    return None


# -- MariaDB --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MariaDbGtidSet:
    """A MariaDB GTID position: per domain, the (server id, sequence number) of its last
    transaction (``@@gtid_binlog_pos``, ``@@gtid_current_pos``, a replica's connect state)."""

    domains: Mapping[int, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> MariaDbGtidSet:
        domains: dict[int, tuple[int, int]] = {}
        for part in _parts(text):
            match = _MARIADB_GTID.fullmatch(part)
            if match is None:
                raise ValueError(f"{part!r} is not a MariaDB GTID (domain-server-sequence)")
            domain, server, seq = (int(g) for g in match.groups())
            # @@gtid_binlog_state lists every server of a domain: the newest sequence stands.
            if domain not in domains or domains[domain][1] < seq:
                domains[domain] = (server, seq)
        return cls(domains)

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(self.domains.items()))

    def with_gtid(self, gtid: str) -> MariaDbGtidSet:
        """The position after transaction ``gtid`` (``domain-server-sequence``)."""
        match = _MARIADB_GTID.fullmatch(gtid.strip())
        if match is None:
            raise ValueError(f"{gtid!r} is not a MariaDB GTID (domain-server-sequence)")
        domain, server, seq = (int(g) for g in match.groups())
        return MariaDbGtidSet({**self.domains, domain: (server, seq)})

    def covers(self, other: GtidSet) -> bool:
        if isinstance(other, MySqlGtidSet):
            return other.empty
        return all(
            domain in self.domains and self.domains[domain][1] >= seq for domain, (_, seq) in other.domains.items()
        )

    def transactions_after(self, other: MariaDbGtidSet) -> int:
        """How many transactions this position is ahead of ``other`` (sequence numbers)."""
        return sum(max(0, seq - other.domains.get(d, (0, 0))[1]) for d, (_, seq) in self.domains.items())

    @property
    def empty(self) -> bool:
        return not self.domains


# -- MySQL ----------------------------------------------------------------------------------------

Intervals: TypeAlias = tuple[tuple[int, int], ...]


def _merge(intervals: Iterable[tuple[int, int]]) -> Intervals:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def _contains(outer: Intervals, inner: Intervals) -> bool:
    return all(any(s <= start and end <= e for s, e in outer) for start, end in inner)


@dataclass(frozen=True)
class MySqlGtidSet:
    """A MySQL GTID set: per (source uuid, tag) the executed transaction numbers, as merged
    inclusive intervals. The untagged part of a uuid has the tag ``""``."""

    sets: Mapping[tuple[str, str], Intervals] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> MySqlGtidSet:
        found: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for part in _parts(text):
            uuid, *pieces = (p.strip().lower() for p in part.split(":"))
            if not _UUID.fullmatch(uuid) or not pieces:
                raise ValueError(f"{part!r} is not a MySQL GTID set element (uuid:interval[:interval...])")
            tag = ""
            for piece in pieces:
                interval = _INTERVAL.fullmatch(piece)
                if interval is not None:
                    start = int(interval.group(1))
                    end = int(interval.group(2) or start)
                    if start < 1 or end < start:
                        raise ValueError(f"{piece!r} in {part!r} is not an interval of transaction numbers")
                    found.setdefault((uuid, tag), []).append((start, end))
                elif _TAG.fullmatch(piece):
                    tag = piece
                else:
                    raise ValueError(f"{piece!r} in {part!r} is neither an interval nor a tag")
        return cls({key: _merge(intervals) for key, intervals in found.items()})

    def __str__(self) -> str:
        out: list[str] = []
        for uuid in sorted({u for u, _ in self.sets}):
            pieces = [uuid]
            for tag in sorted(t for u, t in self.sets if u == uuid):
                if tag:
                    pieces.append(tag)
                pieces.extend(f"{s}" if s == e else f"{s}-{e}" for s, e in self.sets[(uuid, tag)])
            out.append(":".join(pieces))
        return ",".join(out)

    def with_gtid(self, gtid: str) -> MySqlGtidSet:
        """The set with transaction ``gtid`` (``uuid:n`` or ``uuid:tag:n``) added."""
        uuid, *rest = gtid.strip().lower().split(":")
        if not rest or not rest[-1].isdigit() or len(rest) > 2:
            raise ValueError(f"{gtid!r} is not a MySQL GTID (uuid:number or uuid:tag:number)")
        key = (uuid, rest[0] if len(rest) == 2 else "")
        number = int(rest[-1])
        return MySqlGtidSet({**self.sets, key: _merge([*self.sets.get(key, ()), (number, number)])})

    def covers(self, other: GtidSet) -> bool:
        if isinstance(other, MariaDbGtidSet):
            return other.empty
        return all(_contains(self.sets.get(key, ()), intervals) for key, intervals in other.sets.items())

    def transactions_after(self, other: MySqlGtidSet) -> int:
        """How many transactions of this set ``other`` lacks."""
        missing = 0
        for key, intervals in self.sets.items():
            theirs = other.sets.get(key, ())  # merged: disjoint, so overlaps add up exactly
            for start, end in intervals:
                overlap = sum(max(0, min(end, e) - max(start, s) + 1) for s, e in theirs)
                missing += end - start + 1 - overlap
        return missing

    @property
    def empty(self) -> bool:
        return not self.sets


GtidSet: TypeAlias = MariaDbGtidSet | MySqlGtidSet


def _parts(text: str) -> list[str]:
    # SELECT @@gtid_executed puts a newline after each comma.
    return [p.strip() for p in text.replace("\n", "").replace("\r", "").split(",") if p.strip()]


def parse_gtid_set(text: str) -> GtidSet:
    """A GTID set of either form; ValueError if it is neither. The empty text is an empty
    (MySQL) set, which both forms cover."""
    if ":" in text:
        return MySqlGtidSet.parse(text)
    if not text.strip():
        return MySqlGtidSet()
    return MariaDbGtidSet.parse(text)


def compare_gtid_sets(a: GtidSet, b: GtidSet) -> int | None:
    """-1, 0, 1 when one covers the other; None when neither does."""
    return _order(a.covers(b), b.covers(a))


# -- binlog positions -----------------------------------------------------------------------------


def binlog_sequence(file: str) -> int:
    """The sequence number of a binlog file (``mysql-bin.000042`` -> 42); -1 if it has none."""
    _, dot, suffix = file.rpartition(".")
    return int(suffix) if dot and suffix.isdigit() else -1


def offset_of(
    *,
    file: str,
    pos: int,
    gtids: str | None = None,
    event: int = 0,
    row: int = 0,
    ts_sec: int | None = None,
    server_id: int | None = None,
) -> dict[str, Any]:
    """An offset with Debezium's keys (zero ``event``/``row`` and unknown fields left out)."""
    offset: dict[str, Any] = {"file": file, "pos": pos}
    if gtids is not None:
        offset["gtids"] = gtids
    if event:
        offset["event"] = event
    if row:
        offset["row"] = row
    if ts_sec is not None:
        offset["ts_sec"] = ts_sec
    if server_id:
        offset["server_id"] = server_id
    return offset


def _int(offset: Offset, key: str) -> int:
    value = offset.get(key)
    return 0 if value is None else int(value)


def _gtids(offset: Offset) -> GtidSet | None:
    text = offset.get("gtids")
    if text is None:
        return None
    try:
        return parse_gtid_set(str(text))
    except ValueError as exc:
        raise OffsetError(f"offset {dict(offset)!r} has a malformed gtids: {exc}") from None


def _inside(offset: Offset) -> tuple[int, int]:
    return (_int(offset, "event"), _int(offset, "row"))


class MySqlPositions(PositionCodec):
    example = (
        "a GTID set (MariaDB like 0-1-42,1-2-7; MySQL like 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5) "
        "or a binlog position like mysql-bin.000003:154"
    )
    lag_unit = "transactions"

    def parse(self, text: str) -> Offset:
        text = text.strip()
        position = _BINLOG_POSITION.fullmatch(text)
        if position is not None and not _UUID.match(text.lower()):  # uuid:5 is a GTID
            return offset_of(file=position.group("file"), pos=int(position.group("pos")))
        if not text:
            raise OffsetError(f"an empty position is not {self.example}")
        try:
            gtids = parse_gtid_set(text)
        except ValueError as exc:
            raise OffsetError(f"{text!r} is not {self.example}: {exc}") from None
        # Resumed by GTID; file/pos (which Debezium requires) name no place in particular.
        return offset_of(file="", pos=0, gtids=str(gtids))

    def format(self, offset: Offset) -> str:
        """The GTID set of the transactions delivered completely if there is one, else the
        binlog position to restart at."""
        if offset.get("gtids") is not None:
            return str(offset["gtids"])
        return f"{offset.get('file') or ''}:{_int(offset, 'pos')}"

    def compare(self, a: Offset, b: Offset) -> int | None:
        # An unfinished snapshot covers no position at all: before every streaming offset.
        snap_a, snap_b = bool(a.get("snapshot")), bool(b.get("snapshot"))
        if snap_a or snap_b:
            return int(snap_b) - int(snap_a)
        gtids_a, gtids_b = _gtids(a), _gtids(b)
        if gtids_a is not None and gtids_b is not None:
            order = compare_gtid_sets(gtids_a, gtids_b)
            if order != 0:
                return order
            inside_a, inside_b = _inside(a), _inside(b)
            return (inside_a > inside_b) - (inside_a < inside_b)
        if a.get("file") and b.get("file"):
            key_a = (binlog_sequence(str(a["file"])), _int(a, "pos"), *_inside(a))
            key_b = (binlog_sequence(str(b["file"])), _int(b, "pos"), *_inside(b))
            return (key_a > key_b) - (key_a < key_b)
        return None

    def lag(self, committed: Offset, current: Offset) -> int | None:
        """Transactions in the current GTID set that the committed one lacks (None without
        GTIDs, or during a snapshot)."""
        if committed.get("snapshot") or current.get("snapshot"):
            return None
        done, now = _gtids(committed), _gtids(current)
        if isinstance(done, MariaDbGtidSet) and isinstance(now, MariaDbGtidSet):
            return now.transactions_after(done)
        if isinstance(done, MySqlGtidSet) and isinstance(now, MySqlGtidSet):
            return now.transactions_after(done)
        return None


MYSQL_POSITIONS = MySqlPositions()
