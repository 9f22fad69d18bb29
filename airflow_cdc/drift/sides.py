"""One side of a drift check: a table on a server, and the few queries the check asks of it.

Every query is a plain ``SELECT`` in autocommit: PostgreSQL's MVCC reads and InnoDB's consistent
non-locking reads take no row lock, so the check never blocks the application's writes nor the
capture (PostgreSQL's ACCESS SHARE lock only waits for DDL, as any query does).

Ranges are inclusive ``[low, high]`` over a single integer key: an index range scan on both sides,
and the level-0 pass is one grouped scan of the whole table per side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_cdc.drift.dialects import POSITION_COLUMN, Column, Dialect
from airflow_cdc.drift.errors import DriftError

#: Keys per ``IN (...)`` list.
_KEYS_PER_QUERY = 1000


@dataclass(frozen=True)
class Summary:
    """A range's row count and checksum (the sum of its rows' hashes)."""

    rows: int
    checksum: int


class Side(Protocol):
    """What the comparison asks of a side: a SQL table (:class:`TableSide`), or a lake table
    summarised by Spark (``airflow_cdc.spark.drift_lake.LakeSide``) as a target."""

    table: str
    key: str
    columns: list[Column]
    queries: int

    def catalog_columns(self) -> list[Column]: ...

    def bounds(self) -> tuple[int, int] | None: ...

    def summaries(self, low: int, high: int, width: int) -> dict[int, Summary]: ...

    def hashes(self, low: int, high: int) -> dict[int, int]: ...

    def hashes_of(self, keys: Iterable[int]) -> dict[int, int]: ...

    def passed(self, position: str, source: Dialect) -> bool: ...

    def delete_absent(self, keys: Sequence[int], position: str, source: Dialect) -> int: ...


@dataclass
class TableSide:
    dialect: Dialect
    conn: Any
    #: ``schema.table`` (MySQL: ``database.table``).
    table: str
    key: str = ""
    #: The compared columns, in the source's order, typed as this side declares them.
    columns: list[Column] = field(default_factory=list)
    #: Statements run, for the bench's "each side read once" check.
    queries: int = 0

    @property
    def _from(self) -> str:
        return self.dialect.table(self.table)

    def _rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self.queries += 1
        with self.conn.cursor() as cur:
            cur.execute(query, tuple(params))
            return list(cur.fetchall())

    def catalog_columns(self) -> list[Column]:
        return self.dialect.columns(self.conn, self.table)

    def bounds(self) -> tuple[int, int] | None:
        """The smallest and largest key (two index lookups), None for an empty table."""
        k = self.dialect.quote(self.key)
        low, high = self._rows(f"select min({k}), max({k}) from {self._from}")[0]
        return None if low is None else (int(low), int(high))

    def summaries(self, low: int, high: int, width: int) -> dict[int, Summary]:
        """Per bucket ``(key - low) // width`` of ``[low, high]``: rows and checksum."""
        k = self.dialect.quote(self.key)
        bucket = f"floor({self.dialect.bucket(self.key)})"
        found = self._rows(
            f"select {bucket} as b, count(*), sum({self.dialect.row_hash(self.columns)}) from {self._from} "
            f"where {k} between %s and %s group by b",
            (low, width, low, high),
        )
        return {int(b): Summary(int(n), int(s or 0)) for b, n, s in found}

    def hashes(self, low: int, high: int) -> dict[int, int]:
        """Each row's hash in ``[low, high]``, by key."""
        k = self.dialect.quote(self.key)
        found = self._rows(
            f"select {k}, {self.dialect.row_hash(self.columns)} from {self._from} where {k} between %s and %s",
            (low, high),
        )
        return {int(key): int(h) for key, h in found}

    def hashes_of(self, keys: Iterable[int]) -> dict[int, int]:
        """Each row's hash among ``keys`` (a key without a row is left out)."""
        k = self.dialect.quote(self.key)
        keys = sorted(set(keys))
        out: dict[int, int] = {}
        for start in range(0, len(keys), _KEYS_PER_QUERY):
            chunk = keys[start : start + _KEYS_PER_QUERY]
            marks = ", ".join(["%s"] * len(chunk))
            found = self._rows(
                f"select {k}, {self.dialect.row_hash(self.columns)} from {self._from} where {k} in ({marks})", chunk
            )
            out.update((int(key), int(h)) for key, h in found)
        return out

    # -- positions -----------------------------------------------------------------------------
    def current_position(self) -> str:
        return self.dialect.current_position(self.conn)

    def passed(self, position: str, source: Dialect) -> bool:
        """Whether this target holds a change from at or after the source's ``position``: the
        apply job has read the log past it (its batches go in source order)."""
        column = self._position(source)
        found = self._rows(f"select 1 from {self._from} where {column} >= %s limit 1", (position,))
        return bool(found)

    def _position(self, source: Dialect) -> str:
        """The part of this target's ``_cdc_position`` a position of ``source`` compares with."""
        column = self.dialect.quote(POSITION_COLUMN)
        if source.position_part is None:
            return column
        start, length = source.position_part
        return f"substr({column}, {start}, {length})"

    def delete_absent(self, keys: Sequence[int], position: str, source: Dialect) -> int:
        """Delete the target rows of ``keys`` (which the source no longer has) that no change
        from ``position`` on wrote: a row the apply job wrote since, for a key the source got
        meanwhile, stays."""
        k, p = self.dialect.quote(self.key), self.dialect.quote(POSITION_COLUMN)
        deleted = 0
        with self.conn.cursor() as cur:
            for start in range(0, len(keys), _KEYS_PER_QUERY):
                chunk = list(keys[start : start + _KEYS_PER_QUERY])
                marks = ", ".join(["%s"] * len(chunk))
                cur.execute(
                    f"delete from {self._from} where {k} in ({marks}) and ({p} is null or "
                    f"{self._position(source)} < %s)",
                    (*chunk, position),
                )
                deleted += cur.rowcount
        return deleted


def prepare(source: TableSide, target: Side) -> None:
    """Read both catalogs: the source's primary key (one integer column) and columns, the
    target's types for the same columns (it has ``_cdc_position`` besides, left out)."""
    key = source.dialect.primary_key(source.conn, source.table)
    columns = source.dialect.columns(source.conn, source.table)
    if not columns:
        raise DriftError(f"source table {source.table} does not exist (or this user cannot see it)")
    if len(key) != 1:
        has = "no primary key" if not key else f"a composite primary key ({', '.join(key)})"
        raise DriftError(
            f"{source.table} has {has}: the drift check ranges over a single integer key column (ADR 0027); "
            "validate tables keyed by one integer column, and compare this one by other means (a row count "
            "and checksum over the whole table, or an execute-snapshot of it to repair)"
        )
    types = {c.name: c.data_type for c in columns}
    if types[key[0]] not in source.dialect.integer_types:
        raise DriftError(
            f"{source.table}'s key {key[0]} is {types[key[0]]}: the drift check ranges over a single integer key "
            "column (ADR 0027); validate tables keyed by one integer column, and repair this one by an "
            "execute-snapshot of it"
        )
    theirs = {c.name: c for c in target.catalog_columns()}
    if not theirs:
        raise DriftError(f"target table {target.table} does not exist (or this user cannot see it)")
    lacking = [c.name for c in columns if c.name not in theirs]
    if lacking:
        raise DriftError(f"target table {target.table} lacks the source's columns {', '.join(lacking)}")
    source.key = target.key = key[0]
    source.columns = columns
    target.columns = [theirs[c.name] for c in columns]
