"""A sans-IO decoder of PostgreSQL's ``pgoutput`` logical replication protocol, version 1 (what
``stream.py`` requests, as Debezium does).

Pure functions over bytes, no sockets: :func:`decode` turns one message into a dataclass, and
:func:`decode_copy_data` unwraps the replication stream's CopyData (XLogData, keepalive). Any
malformed input raises :class:`~airflow_cdc.engine.errors.DecodeError` (a :class:`CdcError`,
importable from here too); nothing else escapes, and
nothing loops on input, so the decoder can neither crash the stream nor hang it.

Message layouts: PostgreSQL documentation, "Logical Replication Message Formats" and
"Streaming Replication Protocol".

Version 2's streaming of in-progress transactions (Stream Start/Stop/Commit/Abort, and a
transaction id in every data message) is not requested, so not decoded. It would only move where
a big transaction waits for its commit: change events are emitted in commit order and only for
committed transactions (Debezium's contract), so streamed changes would have to be buffered here,
in memory or on disk, until their Stream Commit - work the server already does, spilling to disk
past ``logical_decoding_work_mem`` - and discarded on Stream Abort.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import field
from typing import ClassVar, TypeAlias

# Re-exported ("as"): callers import the engine's DecodeError from the decoder that raises it.
from airflow_cdc.engine.errors import DecodeError as DecodeError
from airflow_cdc.engine.immutable import immutable

PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_PG_EPOCH_US = int(PG_EPOCH.timestamp()) * 1_000_000


def pg_time_to_unix_us(pg_us: int) -> int:
    """PostgreSQL timestamps count microseconds since 2000-01-01 UTC."""
    return pg_us + _PG_EPOCH_US


def unix_us_to_pg_time(unix_us: int) -> int:
    return unix_us - _PG_EPOCH_US


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, sep, low = text.partition("/")
    if not sep:
        raise ValueError(f"{text!r} is not an LSN like 16/B374D848")
    return (int(high, 16) << 32) | int(low, 16)


# -- tuple data ----------------------------------------------------------------------------


class _Unchanged:
    """An unchanged TOASTed value: the server did not send it (kind 'u')."""

    _instance: ClassVar[_Unchanged | None] = None  # ClassVar: mypyc compiles this module

    def __new__(cls) -> _Unchanged:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST = _Unchanged()

#: A column value as sent: None (SQL NULL), text bytes, or UNCHANGED_TOAST.
ColumnValue: TypeAlias = bytes | _Unchanged | None


@immutable
class Column:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool


@immutable
class Begin:
    final_lsn: int
    commit_time_us: int  # unix microseconds
    xid: int


@immutable
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time_us: int


@immutable
class Origin:
    commit_lsn: int
    name: str


@immutable
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d(efault), n(othing), f(ull), i(ndex)
    columns: tuple[Column, ...]


@immutable
class Type:
    oid: int
    namespace: str
    name: str


@immutable
class Insert:
    relation_oid: int
    new: tuple[ColumnValue, ...]


@immutable
class Update:
    relation_oid: int
    new: tuple[ColumnValue, ...]
    old: tuple[ColumnValue, ...] | None = None
    old_is_key_only: bool = False  # 'K': only the replica identity columns were sent


@immutable
class Delete:
    relation_oid: int
    old: tuple[ColumnValue, ...]
    old_is_key_only: bool


@immutable
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@immutable
class Message:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


PgOutputMessage: TypeAlias = Begin | Commit | Origin | Relation | Type | Insert | Update | Delete | Truncate | Message


# -- the reader ----------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise DecodeError(
                f"message truncated: needed {size} byte(s) at offset {self.pos}, have {len(self.data) - self.pos}"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def byte(self) -> int:
        return self._take(1)[0]

    def char(self) -> str:
        return chr(self.byte())

    def int16(self) -> int:
        return int(struct.unpack("!h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack("!i", self._take(4))[0])

    def uint32(self) -> int:
        return int(struct.unpack("!I", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack("!q", self._take(8))[0])

    def uint64(self) -> int:
        return int(struct.unpack("!Q", self._take(8))[0])

    def string(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise DecodeError(f"unterminated string at offset {self.pos}")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"string at offset {self.pos} is not UTF-8: {exc}") from None

    def rest(self) -> bytes:
        return self._take(len(self.data) - self.pos)

    def done(self, what: str) -> None:
        if self.pos != len(self.data):
            raise DecodeError(f"{len(self.data) - self.pos} unexpected trailing byte(s) after {what}")

    def tuple_data(self) -> tuple[ColumnValue, ...]:
        # The hot path of streaming (one call per row image): locals and unpack_from instead of
        # the reader's per-field methods, with the same bounds checks.
        data, pos, size = self.data, self.pos, len(self.data)
        if pos + 2 > size:
            raise DecodeError(f"message truncated: no column count at offset {pos}")
        count = _INT16.unpack_from(data, pos)[0]
        if count < 0:
            raise DecodeError(f"negative column count {count}")
        pos += 2
        values: list[ColumnValue] = []
        append = values.append
        for _ in range(count):
            if pos >= size:
                raise DecodeError(f"message truncated: column {len(values)} missing at offset {pos}")
            kind = data[pos]
            pos += 1
            if kind == 0x74 or kind == 0x62:  # 't' text, 'b' binary
                if pos + 4 > size:
                    raise DecodeError(f"message truncated: no value length at offset {pos}")
                length = _INT32.unpack_from(data, pos)[0]
                pos += 4
                end = pos + length
                if length < 0 or end > size:
                    raise DecodeError(
                        f"message truncated: value of {length} byte(s) at offset {pos}, have {size - pos}"
                    )
                append(data[pos:end])
                pos = end
            elif kind == 0x6E:  # 'n'
                append(None)
            elif kind == 0x75:  # 'u'
                append(UNCHANGED_TOAST)
            else:
                raise DecodeError(f"unknown tuple column kind {kind!r} at offset {pos - 1}")
        self.pos = pos
        return tuple(values)


_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")
_UINT32 = struct.Struct("!I")
_XLOG = struct.Struct("!QQq")
_KEEPALIVE = struct.Struct("!QqB")


# -- decoding --------------------------------------------------------------------------------


def _begin(r: _Reader) -> Begin:
    return Begin(r.uint64(), pg_time_to_unix_us(r.int64()), r.uint32())


def _commit(r: _Reader) -> Commit:
    return Commit(r.byte(), r.uint64(), r.uint64(), pg_time_to_unix_us(r.int64()))


def _origin(r: _Reader) -> Origin:
    return Origin(r.uint64(), r.string())


def _relation(r: _Reader) -> Relation:
    oid, namespace, name, identity = r.uint32(), r.string(), r.string(), r.char()
    count = r.int16()
    if count < 0:
        raise DecodeError(f"negative column count {count} in relation {namespace}.{name}")
    columns = []
    for _ in range(count):
        flags = r.byte()
        columns.append(Column(r.string(), r.uint32(), r.int32(), bool(flags & 1)))
    return Relation(oid, namespace, name, identity, tuple(columns))


def _type(r: _Reader) -> Type:
    return Type(r.uint32(), r.string(), r.string())


def _insert(r: _Reader) -> Insert:
    oid = r.uint32()
    if (marker := r.char()) != "N":
        raise DecodeError(f"insert: expected 'N' before the new tuple, got {marker!r}")
    return Insert(oid, r.tuple_data())


def _update(r: _Reader) -> Update:
    oid = r.uint32()
    marker = r.char()
    old, key_only = None, False
    if marker in ("K", "O"):
        old, key_only = r.tuple_data(), marker == "K"
        marker = r.char()
    if marker != "N":
        raise DecodeError(f"update: expected 'N' before the new tuple, got {marker!r}")
    return Update(oid, r.tuple_data(), old, key_only)


def _delete(r: _Reader) -> Delete:
    oid = r.uint32()
    marker = r.char()
    if marker not in ("K", "O"):
        raise DecodeError(f"delete: expected 'K' or 'O' before the old tuple, got {marker!r}")
    return Delete(oid, r.tuple_data(), marker == "K")


def _truncate(r: _Reader) -> Truncate:
    count = r.int32()
    if count < 0:
        raise DecodeError(f"negative relation count {count} in truncate")
    options = r.byte()
    oids = tuple(r.uint32() for _ in range(count))
    return Truncate(oids, bool(options & 1), bool(options & 2))


def _message(r: _Reader) -> Message:
    flags, lsn, prefix = r.byte(), r.uint64(), r.string()
    content = r._take(r.int32())
    return Message(bool(flags & 1), lsn, prefix, content)


_DECODERS: dict[str, Callable[[_Reader], PgOutputMessage]] = {
    "B": _begin,
    "C": _commit,
    "O": _origin,
    "R": _relation,
    "Y": _type,
    "I": _insert,
    "U": _update,
    "D": _delete,
    "T": _truncate,
    "M": _message,
}


def decode(data: bytes | memoryview) -> PgOutputMessage:
    """Decode one pgoutput (version 1) message."""
    reader = _Reader(data)
    # The row changes without an old tuple to read first (all but an update's under REPLICA
    # IDENTITY FULL or of its key): the tag, the relation, the marker, then one tuple. Shorter
    # input matches none of them and gets the general path's errors.
    head, marker = reader.data[:1], reader.data[5:6]
    message: PgOutputMessage
    if marker == b"N" and (head == b"I" or head == b"U"):
        reader.pos = 6
        oid = _UINT32.unpack_from(reader.data, 1)[0]
        message = Insert(oid, reader.tuple_data()) if head == b"I" else Update(oid, reader.tuple_data())
        reader.done(type(message).__name__)
        return message
    if head == b"D" and (marker == b"K" or marker == b"O"):
        reader.pos = 6
        message = Delete(_UINT32.unpack_from(reader.data, 1)[0], reader.tuple_data(), marker == b"K")
        reader.done("Delete")
        return message
    tag = reader.char()
    decoder = _DECODERS.get(tag)
    if decoder is None:
        raise DecodeError(f"unknown pgoutput message type {tag!r}")
    decoded = decoder(reader)
    reader.done(type(decoded).__name__)
    return decoded


# -- the replication stream's CopyData -------------------------------------------------------


@immutable
class XLogData:
    start_lsn: int
    wal_end: int
    server_time_us: int
    payload: bytes = field(repr=False)


@immutable
class Keepalive:
    wal_end: int
    server_time_us: int
    reply_requested: bool


def decode_copy_data(data: bytes | memoryview) -> XLogData | Keepalive:
    raw = bytes(data)
    if not raw:
        raise DecodeError("empty replication message")
    tag = raw[0]
    if tag == 0x77:  # 'w'
        if len(raw) < 25:
            raise DecodeError(f"XLogData truncated: {len(raw)} byte(s)")
        start, end, clock = _XLOG.unpack_from(raw, 1)
        return XLogData(start, end, pg_time_to_unix_us(clock), raw[25:])
    if tag == 0x6B:  # 'k'
        if len(raw) != 18:
            raise DecodeError(f"keepalive must be 18 bytes, got {len(raw)}")
        end, clock, reply = _KEEPALIVE.unpack_from(raw, 1)
        return Keepalive(end, pg_time_to_unix_us(clock), reply == 1)
    raise DecodeError(f"unknown replication message type {chr(tag)!r}")


def standby_status_update(written: int, flushed: int, applied: int, now_unix_us: int, reply: bool = False) -> bytes:
    """The client's 'r' message: what it has written, flushed (durable) and applied."""
    return b"r" + struct.pack("!QQQqB", written, flushed, applied, unix_us_to_pg_time(now_unix_us), int(reply))
