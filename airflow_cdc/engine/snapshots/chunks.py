"""What a source implements so the engine can snapshot its tables incrementally (DBLog): read
key-ordered chunks between watermarks it writes into its own log, and say which streamed
transactions a chunk's read already saw.

Errors: a lost connection is a :class:`~airflow_cdc.engine.errors.RetriableError`; a query the
database refused (a bad filter that passed the check, a table dropped meanwhile) is a
:class:`TableReadError`, which fails the table and lets the snapshot go on. The coordinator
catches nothing else of a source's.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Protocol

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.records import Offset, SourceRecord

SUCCEEDED, EMPTY, NO_PRIMARY_KEY, SKIPPED, SQL_EXCEPTION, UNKNOWN_SCHEMA = (
    "SUCCEEDED",
    "EMPTY",
    "NO_PRIMARY_KEY",
    "SKIPPED",
    "SQL_EXCEPTION",
    "UNKNOWN_SCHEMA",
)


class TableReadError(CdcError):
    """The database refused a query of a table's snapshot; the table is reported
    ``SQL_EXCEPTION`` (or the signal that needed it rejected) and the snapshot goes on."""


@dataclass(frozen=True)
class TablePlan:
    """One table of a snapshot: its name (``schema.table``), filter and chunking key."""

    name: str
    filter: str | None = None
    surrogate_key: str | None = None


class ChunkRows(Protocol):
    """A chunk's rows as the source read them: they become records only when they are handed
    on, a batch at a time, so a chunk waiting for its close watermark holds no Python objects
    per row and each batch is serialized while it is still in the CPU cache (ADR 0007)."""

    def __len__(self) -> int: ...

    def records(self, offset: Offset) -> Iterator[list[SourceRecord]]:
        """The ``op=r`` records in key order, a batch at a time, each with ``offset``; the rows
        are let go as they go."""


class ReadVisibility(Protocol):
    """Which transactions a chunk's read saw (PostgreSQL: the read's ``txid_current_snapshot()``).
    Transactions are named as :meth:`ChunkSource.transaction` names them."""

    def sees(self, transaction: Hashable) -> bool:
        """The read's rows include this transaction's changes."""


@dataclass(frozen=True)
class Chunk:
    """A chunk as read: its rows in key order, the last one's key (the next chunk starts after
    it), whether they are all there is up to the end point, and what the read saw (None: the
    source cannot tell; every change streamed since the window was queued then drops its row)."""

    rows: ChunkRows
    last_key: tuple[str, ...] | None
    complete: bool
    visibility: ReadVisibility | None = None
    #: Whether the rows still have the shape the stream gives their table, asked when the stream
    #: reaches the window's close: False (a DDL of the table was streamed since they were read,
    #: or the read was ahead of one) reads the chunk again, as Debezium does. None: always.
    current: Callable[[], bool] | None = None


class ChunkSource(Protocol):
    """What a source provides to snapshot its tables incrementally. ``read_window`` runs on the
    snapshot's reader thread, everything else on the task's thread."""

    def snapshot_tables(self) -> list[str]:
        """Captured tables, ``schema.table`` (the signal table left out). Also read from other
        tasks' threads when signals are routed: a list fixed at start."""

    def check_table(self, plan: TablePlan) -> str | None:
        """None if the table can be snapshotted, else a status (NO_PRIMARY_KEY, UNKNOWN_SCHEMA)."""

    def check_filter(self, table: str, predicate: str) -> None:
        """Raise SignalError unless ``predicate`` is one boolean expression over the table."""

    def estimate_rows(self, table: str) -> int: ...

    def max_key(self, plan: TablePlan) -> tuple[str, ...] | None: ...

    def read_window(
        self,
        window_id: str,
        plan: TablePlan,
        after: tuple[str, ...] | None,
        upto: tuple[str, ...],
        limit: int,
        correlation_id: str | None = None,
    ) -> Chunk:
        """One window: write the open watermark into the source's log, read about ``limit`` rows
        with after < key <= upto in key order, write the close watermark - each committed before
        the next begins (a source may send all three in one round trip). ``correlation_id`` is
        the signal that asked for the snapshot, for the watermarks' metadata."""

    def dedup_key(self, record: SourceRecord) -> Hashable:
        """The identity of a row, equal for its snapshot read and its streamed changes."""

    def transaction(self, record: SourceRecord) -> Hashable:
        """The transaction of a streamed record (None for none), as :class:`ReadVisibility`
        names it."""

    def horizon(self) -> ReadVisibility | None:
        """What a read started now would see (None: the source cannot tell). Asked on the task's
        thread when many streamed transactions wait to be seen by a read."""

    def topic_of(self, table: str) -> str: ...

    def interrupt(self) -> None:
        """Cancel whatever a window read is waiting on."""

    def close(self) -> None:
        """Release reader connections."""
