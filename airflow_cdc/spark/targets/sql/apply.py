"""The apply loop: latest-frame rows (``frames.py``) to a SQL target, one transaction per call.

Runs on the Spark executors, inside ``foreachPartition``: :func:`apply_changes` takes one
partition's rows (plain tuples of ``table, op, key, after, unavailable, position`` in that
order, as ``arrow_rows.latest_rows`` reads them, or a pyspark ``Row`` or any object with those
fields) and a picklable :class:`SqlTargetSettings`, opens one connection, applies every row
in one transaction, commits, and returns counts. Nothing here imports Spark, and nothing here
writes SQL: the statements are the dialect's (``dialect.py``, ``postgres.py``, ``mysql.py``).

Per table, in the order given (the caller puts a table's TRUNCATE first, then source order):

* ``c``/``u``/``r``: an upsert on the event key's columns, guarded by the row's stored source
  position (``_cdc_position``): it applies only when the stored one is NULL or not greater, so an
  older change never overwrites a newer one and a replayed batch changes nothing. Columns the row
  lists in ``unavailable`` (unchanged TOASTed values) are left out, so the target keeps its value
  (and gets the column's default on insert).
* ``d``: a delete of the key, with the same guard.
* ``t``: deletes the rows whose position is older than the truncate's (or NULL).

Consecutive rows of one table are batched: up to ``batch_size`` rows with distinct keys form a
segment (``segment_rows`` where the dialect COPYs), applied as the DELETE of its deletes, then
one upsert per column set (keys being distinct, their order does not matter; deletes go first
so that a key freed by a delete can be taken by an insert under another unique constraint). A
key seen again, a TRUNCATE, another table or a full segment starts the next segment. Each of
those groups goes by multi-row statements of ``batch_size`` rows, or, from ``copy_min_rows``
rows on (PostgreSQL), by COPY into a staging table and one set-based statement (the same
guard, the same counts).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter, itemgetter
from typing import Any

from airflow_cdc.spark.frames import POSITION_COLUMN, SCHEMA_KEY
from airflow_cdc.spark.schema_policy import say_once
from airflow_cdc.spark.targets.sql.dialect import Dialect, dialect_for
from airflow_cdc.spark.targets.sql.errors import TargetError, TargetSchemaError
from airflow_cdc.spark.targets.sql.settings import SqlTargetSettings
from airflow_cdc.spark.targets.sql.tables import CATALOG, Plan, Table, TableInfo, TableName
from airflow_cdc.spark.values import json_text

log = logging.getLogger(__name__)

COUNTS = ("upserted", "deleted", "skipped_older", "truncated")


def apply_changes(
    rows: Iterable[Any],
    settings: SqlTargetSettings | Mapping[str, Any],
    finish: Callable[[Any, Dialect], None] | None = None,
) -> dict[str, int]:
    """Apply latest-frame rows in one transaction and commit; returns counts: ``upserted``
    (rows inserted or updated), ``deleted``, ``skipped_older`` (upserts the guard refused) and
    ``truncated`` (rows a TRUNCATE removed).

    On MySQL ``upserted`` counts the rows sent and ``skipped_older`` stays 0: its affected-rows
    count (1 per insert, 2 per update, 0 per unchanged row) cannot tell a refused change from an
    insert plus an update.

    ``finish(connection, dialect)`` runs in the same transaction before it commits (the
    transaction-consistent mode keeps its held-back records there, ``pending.py``)."""
    settings = SqlTargetSettings.of(settings)
    dialect = dialect_for(settings.url)
    counts = dict.fromkeys(COUNTS, 0)
    conn = dialect.connect(settings.url)
    applier = _Applier(dialect, conn, settings, counts)
    try:
        applier.apply(rows)
        if finish is not None:
            finish(conn, dialect)
        conn.commit()
    except BaseException:
        applier.forget_catalog()
        _quietly(conn.rollback)
        raise
    finally:
        _quietly(conn.close)
    return counts


def apply_changes_retrying(
    rows: Callable[[], Iterable[Any]],
    settings: SqlTargetSettings | Mapping[str, Any],
    finish: Callable[[Any, Dialect], None] | None = None,
) -> dict[str, int]:
    """:func:`apply_changes` over ``rows()``, run again over a fresh ``rows()`` when the target
    refused the transaction for a reason that passes (``Dialect.transient``: a deadlock between
    two lanes' transactions, a serialization failure), up to ``settings.max_retries`` times.

    Why here and not Spark's task retry: Spark runs a failed task again only on a cluster
    (``spark.task.maxFailures`` is 1 in local mode), and re-reads the whole lane for it. The
    rolled-back transaction wrote nothing, and the position guard makes the rerun exact."""
    settings = SqlTargetSettings.of(settings)
    dialect = dialect_for(settings.url)
    attempt = 0
    while True:
        try:
            return apply_changes(rows(), settings, finish)
        except Exception as exc:
            if attempt >= settings.max_retries or not dialect.transient(exc):
                raise
            attempt += 1
            log.warning(
                "The target refused the transaction (%s); applying it again (%d of %d) in %.1f s",
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                attempt,
                settings.max_retries,
                settings.retry_delay_s * attempt,
            )
            time.sleep(settings.retry_delay_s * attempt)


def check_target(settings: SqlTargetSettings | Mapping[str, Any], source_tables: Iterable[str]) -> None:
    """Check (on the driver, before the stream starts) that every target table exists, adding
    ``_cdc_position`` where it is missing and allowed, has a unique key and lets the job write
    (``Dialect.check_writable``); raises :class:`TargetSchemaError` or :class:`TargetPrivilegeError`."""
    settings = SqlTargetSettings.of(settings)
    dialect = dialect_for(settings.url)
    conn = dialect.connect(settings.url)
    try:
        applier = _Applier(dialect, conn, settings, dict.fromkeys(COUNTS, 0))
        tables = [applier.table(source) for source in source_tables]
        conn.commit()
        for table in tables:
            dialect.check_writable(conn, table)
            conn.rollback()  # the probes wrote nothing; their staging table goes
    finally:
        _quietly(conn.close)


def _quietly(action: Callable[[], Any]) -> None:
    try:
        action()
    except Exception:  # the connection may be gone already; the original error matters
        log.debug("ignored while cleaning up", exc_info=True)


#: The latest frame's fields, in the order rows are handled internally.
_FIELDS = ("table", "op", "key", "after", "unavailable", "position")
_TABLE, _OP, _KEY, _AFTER, _UNAVAILABLE, _POSITION = range(6)
_ROW_OPS = frozenset(("c", "u", "r", "d"))


def _as_is(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return row


def _reader(row: Any) -> Callable[[Any], tuple[Any, ...]]:
    """Reads the six fields of rows shaped like ``row``: a plain tuple as it is, by index from a pyspark ``Row`` or a
    named tuple (a Row's attribute access is a linear search of its field names), else by
    attribute, else by key."""
    if type(row) is tuple:  # a plain tuple: the fields in order (``arrow_rows.latest_rows``)
        return _as_is
    fields = getattr(row, "__fields__", None) or getattr(row, "_fields", None)
    if isinstance(row, tuple) and fields and all(f in fields for f in _FIELDS):
        return itemgetter(*(list(fields).index(f) for f in _FIELDS))
    if isinstance(row, Mapping):
        return itemgetter(*_FIELDS)
    return attrgetter(*_FIELDS)


class _Applier:
    def __init__(self, dialect: Dialect, conn: Any, settings: SqlTargetSettings, counts: dict[str, int]) -> None:
        self.dialect, self.conn, self.settings, self.counts = dialect, conn, settings, counts
        self.tables: dict[str, Table] = {}
        self.current: Table | None = None
        self.segment: list[tuple[Any, ...]] = []
        self.keys: set[str] = set()
        copy_min = settings.copy_min_rows if dialect.copies else None
        #: A group of at least this many rows goes by COPY (never, when None).
        self.copy_min = copy_min
        self.segment_limit = (
            settings.batch_size if copy_min is None else max(settings.batch_size, settings.segment_rows)
        )

    # --- rows in ---------------------------------------------------------------------------

    def apply(self, rows: Iterable[Any]) -> None:
        read: Callable[[Any], tuple[Any, ...]] | None = None
        for row in rows:
            if read is None:
                read = _reader(row)
            self.add(read(row))
        self.flush()

    def add(self, row: tuple[Any, ...]) -> None:
        if self.current is None or row[_TABLE] != self.current.source:
            self.flush()
            self.current = self.table(row[_TABLE])
        op = row[_OP]
        if op not in _ROW_OPS:
            self._truncate(row)
            return
        key = row[_KEY]
        if key in self.keys or len(self.segment) >= self.segment_limit:
            self.flush()
        self.segment.append(row)
        self.keys.add(key)

    def _truncate(self, row: tuple[Any, ...]) -> None:
        if row[_OP] != "t":
            raise TargetError(f"unknown op {row[_OP]!r} for {row[_TABLE]} (expected c, u, r, d or t)")
        assert self.current is not None
        self.flush()
        self.counts["truncated"] += self.dialect.truncate(self.conn, self.current, row[_POSITION])

    def flush(self) -> None:
        if not self.segment or self.current is None:
            return
        table, segment = self.current, self.segment
        self.segment, self.keys = [], set()
        self._check_key(table, segment[0])
        deletes = [row for row in segment if row[_OP] == "d"]
        if deletes:
            params = self._delete_params(table, deletes)
            if self._copies(params):
                self.counts["deleted"] += self.dialect.delete_staged(self.conn, table, params)
            else:
                for chunk in self._chunks(params):
                    self.counts["deleted"] += self.dialect.delete(self.conn, table, chunk)
        for columns, params in self._upsert_groups(table, segment).items():
            if self._copies(params):
                applied = self.dialect.upsert_staged(self.conn, table, columns, params)
            else:
                applied = sum(self.dialect.upsert(self.conn, table, columns, c) for c in self._chunks(params))
            self.counts["upserted"] += applied
            if self.dialect.counts_skipped:
                self.counts["skipped_older"] += len(params) - applied

    def _copies(self, params: list[tuple[Any, ...]]) -> bool:
        return self.copy_min is not None and len(params) >= self.copy_min

    def _chunks(self, params: list[tuple[Any, ...]]) -> Iterable[list[tuple[Any, ...]]]:
        size = self.settings.batch_size
        return (params[start : start + size] for start in range(0, len(params), size))

    # --- tables ----------------------------------------------------------------------------

    def table(self, source: str) -> Table:
        table = self.tables.get(source)
        if table is None:
            info = self._info(source)
            table = self.tables[source] = Table(source, self._cache_key(source), info, self.settings.modes)
        return table

    def _cache_key(self, source: str) -> tuple[str, str]:
        return (self.settings.url, self.settings.tables.get(source, source))

    def _info(self, source: str, *, fresh: bool = False) -> TableInfo:
        target = TableName.parse(self.settings.tables.get(source, source))
        cache_key = self._cache_key(source)
        info = None if fresh else CATALOG.get(cache_key)
        if info is not None and self.dialect.identity(self.conn, info.name) != info.identity:
            info = None  # dropped and recreated, or altered, since it was read
        if info is None:
            info = self.dialect.read_table(self.conn, target)
            if info is None:
                raise TargetSchemaError(self.dialect.missing_table_message(source, target))
            if not info.has_position:
                info = self._add_position(source, target, info)
            CATALOG[cache_key] = info
        return info

    def _add_position(self, source: str, target: TableName, info: TableInfo) -> TableInfo:
        statement = self.dialect.add_position_sql(info.name)
        if not self.settings.add_position_column:
            raise TargetSchemaError(
                f"Target table {info.name} (source {source}) has no {POSITION_COLUMN} column, where it keeps each "
                f"row's source position (the replay guard): {statement}; or set add_position_column=True"
            )
        log.warning("Adding %s to %s: %s", POSITION_COLUMN, info.name, statement)
        self.dialect.add_position_column(self.conn, self.settings.url, info.name, statement)
        refreshed = self.dialect.read_table(self.conn, target)
        if refreshed is None or not refreshed.has_position:
            raise TargetSchemaError(f"Adding {POSITION_COLUMN} to {info.name} did not take effect: {statement}")
        return refreshed

    def forget_catalog(self) -> None:
        """After a failure: read these tables again next time (one may have changed)."""
        for table in self.tables.values():
            CATALOG.pop(table.cache_key, None)

    def _refresh(self, table: Table) -> None:
        table.info = self._info(table.source, fresh=True)
        table.forget_types()

    # --- keys and columns ------------------------------------------------------------------

    def _check_key(self, table: Table, row: tuple[Any, ...]) -> None:
        if table.key is not None:
            return
        if row[_KEY] is None:
            raise TargetSchemaError(
                f"A {row[_OP]!r} change of {table.source} has no key: Debezium emits a null key for a table without "
                f"a primary key; give the source table one (or set message.key.columns) so that changes can be applied"
            )
        key = tuple(json.loads(row[_KEY]))
        self._require_columns(table, key, "key ")
        if frozenset(key) not in table.info.unique_keys:
            self._refresh(table)
        if frozenset(key) not in table.info.unique_keys:
            raise TargetSchemaError(self.dialect.missing_key_message(table, key))
        table.key = key

    def _require_columns(self, table: Table, columns: Iterable[str], what: str = "") -> None:
        missing = [c for c in columns if c not in table.info.columns]
        if missing:
            self._refresh(table)
            missing = [c for c in columns if c not in table.info.columns]
        if missing:
            raise TargetSchemaError(self.dialect.missing_columns_message(table, missing, what))

    # --- parameters ------------------------------------------------------------------------

    def _delete_params(self, table: Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        assert table.key is not None
        decoders = [table.decoder(c) for c in table.key]
        params = []
        for row in rows:
            values = json.loads(row[_KEY])
            params.append(
                (*(d(json_text(values[c])) for c, d in zip(table.key, decoders, strict=True)), row[_POSITION])
            )
        return params

    def _upsert_groups(self, table: Table, rows: list[tuple[Any, ...]]) -> dict[tuple[str, ...], list[tuple[Any, ...]]]:
        """Rows by the columns they write (normally one group: all of them)."""
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        plans = table.plans
        for row in rows:
            after = row[_AFTER]
            if after is None:
                if row[_OP] == "d":
                    continue
                raise TargetError(f"A {row[_OP]!r} change of {table.source} has no 'after' (key {row[_KEY]})")
            shape = tuple(after)
            version = after.get(SCHEMA_KEY)  # the change's schema, with Connect schemas
            if version is not None:
                shape = tuple(c for c in shape if c != SCHEMA_KEY)
            if row[_UNAVAILABLE]:
                skip = set(row[_UNAVAILABLE])
                shape = tuple(c for c in shape if c not in skip)
            plan = plans.get((shape, version))
            if plan is None:
                plan = plans[(shape, version)] = self._plan(table, shape, version)
            group = groups.get(plan.columns)
            if group is None:
                group = groups[plan.columns] = []
            group.append(plan.params(after, row[_POSITION]))
        return groups

    def _plan(self, table: Table, shape: tuple[str, ...], version: str | None = None) -> Plan:
        policy = self.settings.schema_change_policy
        if policy == "ignore":
            shape = self._known_columns(table, shape, said=version is not None)
        else:
            self._require_columns(table, shape)
        assert table.key is not None
        missing_key = [c for c in table.key if c not in shape]
        if missing_key:
            raise TargetError(f"A change of {table.source} lacks its key column(s) {missing_key} in 'after'")
        absent: tuple[str, ...] = ()
        if policy == "evolve":  # the target's columns the source no longer has get NULL
            dropped = self.settings.dropped.get(table.source)
            absent = tuple(
                c
                for c in table.info.columns
                if c != POSITION_COLUMN and c not in shape and (dropped is None or c in dropped)
            )
        columns = tuple(sorted(shape + absent))  # one statement per column set, whatever the map's order
        encoded = self.settings.encodings.get(version, {}) if version is not None else {}
        return Plan(columns, [table.decoder(c, encoded.get(c)) for c in columns], fill=bool(absent))

    def _known_columns(self, table: Table, shape: tuple[str, ...], said: bool) -> tuple[str, ...]:
        """``ignore``: the columns of ``shape`` the target has; each one it lacks is named once
        (by the driver, ``evolution.py``, when the change has its schema: ``said``)."""
        if all(c in table.info.columns for c in shape):
            return shape
        self._refresh(table)
        for column in shape:
            if column not in table.info.columns and not said:
                say_once(
                    str(table.name),
                    column,
                    message=f"Target table {table.name} has no column {column} (source {table.source}): its values "
                    f"are not applied (schema change policy 'ignore')",
                )
        return tuple(c for c in shape if c in table.info.columns)
