"""Which transactions a read saw, from its PostgreSQL snapshot: the incremental snapshot's exact
dedup rule compares them with the streamed transactions (ADR 0007, "Which changes drop a chunk
row"). Sans-IO but for the statements the window reader sends."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from psycopg import sql

#: A window's read starts a repeatable-read transaction, so its first statement's snapshot is the
#: chunk's. That statement keeps the snapshot in a session setting the second round trip
#: returns: PQexec answers with the last statement's result only.
READ = sql.SQL("begin isolation level repeatable read read only")
KEEP_SNAPSHOT = sql.SQL("select set_config('airflow_cdc.window_snapshot', txid_current_snapshot()::text, false)")
KEPT_SNAPSHOT = sql.SQL("select current_setting('airflow_cdc.window_snapshot')")


@dataclass(frozen=True)
class ReadSnapshot:
    """A read's snapshot, ``txid_current_snapshot()`` (64-bit ids, ``xmin:xmax:xip,...``).
    The stream names transactions by pgoutput's 32-bit xid; each is widened to the 64-bit id
    nearest ``xmax``. A transaction waiting for a synchronous standby after its commit record
    is neither below ``xmax`` nor listed, if it was the newest: it is unseen all the same."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> ReadSnapshot:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def sees(self, transaction: Hashable) -> bool:
        if not isinstance(transaction, int):
            return False
        full = self.xmax + ((transaction - self.xmax + 2**31) % 2**32 - 2**31)
        return full < self.xmin or (full < self.xmax and full not in self.xip)
