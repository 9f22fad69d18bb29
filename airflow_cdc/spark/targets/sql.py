"""Apply latest-frame rows (``frames.py``) to PostgreSQL (psycopg 3) or MySQL/MariaDB (PyMySQL).

Runs on the Spark executors, inside ``foreachPartition``: :func:`apply_changes` takes one
partition's rows (pyspark ``Row`` or any object with ``table, op, key, after, unavailable,
position``) and a picklable :class:`SqlTargetSettings`, opens one connection, applies every row
in one transaction, commits, and returns counts. Nothing here imports Spark.

Per table, in the order given (the caller puts a table's TRUNCATE first, then source order):

* ``c``/``u``/``r``: an upsert on the event key's columns, guarded by the row's stored source
  position (``_cdc_position``): it applies only when the stored one is NULL or not greater, so an
  older change never overwrites a newer one and a replayed batch changes nothing. Columns the row
  lists in ``unavailable`` (unchanged TOASTed values) are left out, so the target keeps its value
  (and gets the column's default on insert).
* ``d``: a delete of the key, with the same guard.
* ``t``: deletes the rows whose position is older than the truncate's (or NULL).

Consecutive rows of one table are batched: up to ``batch_size`` rows with distinct keys form a
segment, applied as one multi-row DELETE then one multi-row upsert per column set (keys being
distinct, their order does not matter; deletes go first so that a key freed by a delete can be
taken by an insert under another unique constraint). A key seen again, a TRUNCATE, another
table or a full segment starts the next segment.

The target table must exist with the source's columns (same types: values are decoded by the
target column's type, ``values.py``), a primary key or unique index on the event key's columns,
and ``_cdc_position`` (``varchar(64)``, compared byte-wise); ``add_position_column`` adds the
last one when it is missing. Column types are read from the target's catalog once per table per
process.

Deletes leave no trace: a change older than a delete, replayed *after* it (out of order), inserts
the row again. Replays in order, which is what a restarted stream does, are safe.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any
from urllib.parse import unquote, urlsplit

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.errors import CdcError
from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.values import ColumnType, Decoder, Modes, decoder_for, json_text, pass_through

__all__ = [
    "COUNTS",
    "SqlTargetSettings",
    "TargetError",
    "TargetSchemaError",
    "TargetWriteError",
    "apply_changes",
    "check_target",
    "clear_catalog_cache",
]

log = logging.getLogger(__name__)

COUNTS = ("upserted", "deleted", "skipped_older", "truncated")
_POSTGRES_PARAMETERS = 65535  # the protocol's limit per statement


class TargetError(CdcError):
    """Applying changes to a SQL target failed; the message says what to fix."""


class TargetSchemaError(TargetError):
    """The target table is missing, or lacks a column, its key constraint or the position
    column; the message gives SQL that fixes it."""


class TargetWriteError(TargetError):
    """The target refused a value (a type or mode mismatch between source and target)."""


@dataclass(frozen=True)
class SqlTargetSettings:
    """Where and how to apply. Picklable (it travels to the executors).

    ``url``: ``postgresql://user:pw@host:port/db`` or ``mysql://user:pw@host:port/db``
    (``mariadb://`` too). ``tables``: source table (``schema.table``, ``db.table``) -> target
    table (``schema.table`` or ``table``: the connection's schema/database); unmapped tables go
    to the same name. ``modes``: the capturing connector's value settings (:class:`Modes`, or
    its config dict). ``batch_size``: rows per statement.
    """

    url: str
    tables: Mapping[str, str] = field(default_factory=dict)
    modes: Modes = field(default_factory=Modes)
    batch_size: int = 1000
    add_position_column: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.modes, Mapping):
            object.__setattr__(self, "modes", Modes.from_config(self.modes))
        object.__setattr__(self, "tables", dict(self.tables))
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {self.batch_size}")

    @classmethod
    def of(cls, value: SqlTargetSettings | Mapping[str, Any]) -> SqlTargetSettings:
        if isinstance(value, SqlTargetSettings):
            return value
        return cls(**value)

    def __repr__(self) -> str:  # never the password
        return (
            f"SqlTargetSettings(url={safe_url(self.url)!r}, tables={self.tables!r}, modes={self.modes!r}, "
            f"batch_size={self.batch_size}, add_position_column={self.add_position_column})"
        )


def safe_url(url: str) -> str:
    return re.sub(r"//([^:/@]*):[^@]*@", r"//\1:***@", url)


# ---------------------------------------------------------------------------------------------
# Entry points


def apply_changes(rows: Iterable[Any], settings: SqlTargetSettings | Mapping[str, Any]) -> dict[str, int]:
    """Apply latest-frame rows in one transaction and commit; returns counts: ``upserted``
    (rows inserted or updated), ``deleted``, ``skipped_older`` (upserts the guard refused) and
    ``truncated`` (rows a TRUNCATE removed).

    On MySQL ``upserted`` counts the rows sent and ``skipped_older`` stays 0: its affected-rows
    count (1 per insert, 2 per update, 0 per unchanged row) cannot tell a refused change from an
    insert plus an update."""
    settings = SqlTargetSettings.of(settings)
    dialect = dialect_for(settings.url)
    counts = dict.fromkeys(COUNTS, 0)
    conn = dialect.connect(settings.url)
    applier = _Applier(dialect, conn, settings, counts)
    try:
        applier.apply(rows)
        conn.commit()
    except BaseException:
        applier.forget_catalog()
        _quietly(conn.rollback)
        raise
    finally:
        _quietly(conn.close)
    return counts


def check_target(settings: SqlTargetSettings | Mapping[str, Any], source_tables: Iterable[str]) -> None:
    """Check (on the driver, before the stream starts) that every target table exists, adding
    ``_cdc_position`` where it is missing and allowed; raises :class:`TargetSchemaError`."""
    settings = SqlTargetSettings.of(settings)
    dialect = dialect_for(settings.url)
    conn = dialect.connect(settings.url)
    try:
        applier = _Applier(dialect, conn, settings, dict.fromkeys(COUNTS, 0))
        for source in source_tables:
            applier.table(source)
        conn.commit()
    finally:
        _quietly(conn.close)


def clear_catalog_cache() -> None:
    """Forget every table read from a catalog (they are read again on next use)."""
    _CATALOG.clear()


def _quietly(action: Callable[[], Any]) -> None:
    try:
        action()
    except Exception:  # the connection may be gone already; the original error matters
        log.debug("ignored while cleaning up", exc_info=True)


# ---------------------------------------------------------------------------------------------
# What a table is, per process


@dataclass(frozen=True)
class TableName:
    schema: str | None
    name: str

    @classmethod
    def parse(cls, text: str) -> TableName:
        schema, dot, name = text.partition(".")
        return cls(schema, name) if dot else cls(None, text)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


@dataclass(frozen=True)
class TableInfo:
    """A target table as its catalog describes it."""

    name: TableName  # schema resolved
    columns: dict[str, ColumnType]
    unique_keys: tuple[frozenset[str], ...]

    @property
    def has_position(self) -> bool:
        return POSITION_COLUMN in self.columns


#: (url, target table) -> TableInfo: read once per process (an executor's Python worker).
_CATALOG: dict[tuple[str, str], TableInfo] = {}


class _Plan:
    """How one column set of one table becomes statement parameters: the values in
    ``columns`` order, through the decoders that do something, then the position."""

    def __init__(self, columns: tuple[str, ...], decoders: list[Decoder]) -> None:
        self.columns = columns
        getter = itemgetter(*columns)
        self.values: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            getter if len(columns) > 1 else lambda after: (getter(after),)
        )
        self.steps = [(i, d) for i, d in enumerate(decoders) if d is not pass_through]

    def params(self, after: Mapping[str, Any], position: str) -> list[Any]:
        values = [*self.values(after), position]
        for index, decode in self.steps:
            values[index] = decode(values[index])
        return values


class _Table:
    """One target table within one call: its catalog, decoders, key, plans and statements."""

    def __init__(self, source: str, cache_key: tuple[str, str], info: TableInfo, modes: Modes) -> None:
        self.source, self.cache_key, self.info, self.modes = source, cache_key, info, modes
        self.decoders: dict[str, Decoder] = {}
        self.key: tuple[str, ...] | None = None
        self.plans: dict[tuple[str, ...], _Plan] = {}
        self.statements: dict[Any, Any] = {}

    @property
    def name(self) -> TableName:
        return self.info.name

    def decoder(self, column: str) -> Decoder:
        decode = self.decoders.get(column)
        if decode is None:
            decode = self.decoders[column] = decoder_for(self.info.columns[column], self.modes)
        return decode

    def forget_types(self) -> None:
        self.decoders.clear()
        self.plans.clear()
        self.statements.clear()


# ---------------------------------------------------------------------------------------------
# The per-call work

#: The latest frame's fields, in the order rows are handled internally.
_FIELDS = ("table", "op", "key", "after", "unavailable", "position")
_TABLE, _OP, _KEY, _AFTER, _UNAVAILABLE, _POSITION = range(6)
_ROW_OPS = frozenset(("c", "u", "r", "d"))


def _reader(row: Any) -> Callable[[Any], tuple[Any, ...]]:
    """Reads the six fields of rows shaped like ``row``: by index from a pyspark ``Row`` or a
    named tuple (a Row's attribute access is a linear search of its field names), else by
    attribute, else by key."""
    fields = getattr(row, "__fields__", None) or getattr(row, "_fields", None)
    if isinstance(row, tuple) and fields and all(f in fields for f in _FIELDS):
        return itemgetter(*(list(fields).index(f) for f in _FIELDS))
    if isinstance(row, Mapping):
        return itemgetter(*_FIELDS)
    return attrgetter(*_FIELDS)


class _Applier:
    def __init__(self, dialect: Dialect, conn: Any, settings: SqlTargetSettings, counts: dict[str, int]) -> None:
        self.dialect, self.conn, self.settings, self.counts = dialect, conn, settings, counts
        self.tables: dict[str, _Table] = {}
        self.current: _Table | None = None
        self.segment: list[tuple[Any, ...]] = []
        self.keys: set[str] = set()

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
        if key in self.keys or len(self.segment) >= self.settings.batch_size:
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
            self.counts["deleted"] += self.dialect.delete(self.conn, table, self._delete_params(table, deletes))
        for columns, params in self._upsert_groups(table, segment).items():
            applied = self.dialect.upsert(self.conn, table, columns, params)
            self.counts["upserted"] += applied
            if self.dialect.counts_skipped:
                self.counts["skipped_older"] += len(params) - applied

    # --- tables ----------------------------------------------------------------------------

    def table(self, source: str) -> _Table:
        table = self.tables.get(source)
        if table is None:
            info = self._info(source)
            table = self.tables[source] = _Table(source, self._cache_key(source), info, self.settings.modes)
        return table

    def _cache_key(self, source: str) -> tuple[str, str]:
        return (self.settings.url, self.settings.tables.get(source, source))

    def _info(self, source: str, *, fresh: bool = False) -> TableInfo:
        target = TableName.parse(self.settings.tables.get(source, source))
        cache_key = self._cache_key(source)
        info = None if fresh else _CATALOG.get(cache_key)
        if info is None:
            info = self.dialect.read_table(self.conn, target)
            if info is None:
                raise TargetSchemaError(self.dialect.missing_table_message(source, target))
            if not info.has_position:
                info = self._add_position(source, target, info)
            _CATALOG[cache_key] = info
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
            _CATALOG.pop(table.cache_key, None)

    def _refresh(self, table: _Table) -> None:
        table.info = self._info(table.source, fresh=True)
        table.forget_types()

    # --- keys and columns ------------------------------------------------------------------

    def _check_key(self, table: _Table, row: tuple[Any, ...]) -> None:
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

    def _require_columns(self, table: _Table, columns: Iterable[str], what: str = "") -> None:
        missing = [c for c in columns if c not in table.info.columns]
        if missing:
            self._refresh(table)
            missing = [c for c in columns if c not in table.info.columns]
        if missing:
            raise TargetSchemaError(self.dialect.missing_columns_message(table, missing, what))

    # --- parameters ------------------------------------------------------------------------

    def _delete_params(self, table: _Table, rows: list[tuple[Any, ...]]) -> list[list[Any]]:
        assert table.key is not None
        decoders = [table.decoder(c) for c in table.key]
        params = []
        for row in rows:
            values = json.loads(row[_KEY])
            params.append(
                [d(json_text(values[c])) for c, d in zip(table.key, decoders, strict=True)] + [row[_POSITION]]
            )
        return params

    def _upsert_groups(self, table: _Table, rows: list[tuple[Any, ...]]) -> dict[tuple[str, ...], list[list[Any]]]:
        """Rows by the columns they write (normally one group: all of them)."""
        groups: dict[tuple[str, ...], list[list[Any]]] = {}
        plans = table.plans
        for row in rows:
            after = row[_AFTER]
            if after is None:
                if row[_OP] == "d":
                    continue
                raise TargetError(f"A {row[_OP]!r} change of {table.source} has no 'after' (key {row[_KEY]})")
            shape = tuple(after)
            if row[_UNAVAILABLE]:
                skip = set(row[_UNAVAILABLE])
                shape = tuple(c for c in shape if c not in skip)
            plan = plans.get(shape)
            if plan is None:
                plan = plans[shape] = self._plan(table, shape)
            group = groups.get(plan.columns)
            if group is None:
                group = groups[plan.columns] = []
            group.append(plan.params(after, row[_POSITION]))
        return groups

    def _plan(self, table: _Table, shape: tuple[str, ...]) -> _Plan:
        self._require_columns(table, shape)
        assert table.key is not None
        missing_key = [c for c in table.key if c not in shape]
        if missing_key:
            raise TargetError(f"A change of {table.source} lacks its key column(s) {missing_key} in 'after'")
        columns = tuple(sorted(shape))  # one statement per column set, whatever the map's order
        return _Plan(columns, [table.decoder(c) for c in columns])


# ---------------------------------------------------------------------------------------------
# Dialects


class Dialect:
    """What differs between PostgreSQL and MySQL: connecting, the catalog, the statements."""

    counts_skipped = False

    def connect(self, url: str) -> Any:
        raise NotImplementedError

    def read_table(self, conn: Any, target: TableName) -> TableInfo | None:
        raise NotImplementedError

    def add_position_column(self, conn: Any, url: str, name: TableName, statement: str) -> None:
        raise NotImplementedError

    def upsert(self, conn: Any, table: _Table, columns: tuple[str, ...], params: list[list[Any]]) -> int:
        raise NotImplementedError

    def delete(self, conn: Any, table: _Table, params: list[list[Any]]) -> int:
        raise NotImplementedError

    def truncate(self, conn: Any, table: _Table, position: str) -> int:
        raise NotImplementedError

    def identifier(self, name: str) -> str:
        raise NotImplementedError

    position_definition = ""

    def quote(self, name: TableName) -> str:
        return ".".join(self.identifier(part) for part in (name.schema, name.name) if part)

    def add_position_sql(self, name: TableName) -> str:
        return f"ALTER TABLE {self.quote(name)} ADD COLUMN IF NOT EXISTS {self.position_definition}"

    # --- messages ----------------------------------------------------------------------

    def missing_table_message(self, source: str, target: TableName) -> str:
        return (
            f"Target table {target} (for source table {source}) does not exist. Create it with the source's columns "
            f"and types, a primary key on the source's key columns and the position column: CREATE TABLE "
            f"{self.quote(target)} (<the source's columns>, {self.position_definition}, PRIMARY KEY (<key columns>)); "
            f"or map the source table to an existing one (settings.tables)"
        )

    def missing_key_message(self, table: _Table, key: tuple[str, ...]) -> str:
        columns = ", ".join(self.identifier(c) for c in key)
        return (
            f"Target table {table.name} (source {table.source}) has no primary key or unique index on exactly "
            f"({', '.join(key)}), the change events' key columns, which upserts need: "
            f"ALTER TABLE {self.quote(table.name)} ADD PRIMARY KEY ({columns})"
        )

    def missing_columns_message(self, table: _Table, missing: list[str], what: str) -> str:
        adds = "; ".join(
            f"ALTER TABLE {self.quote(table.name)} ADD COLUMN {self.identifier(c)} <the source's type>" for c in missing
        )
        return (
            f"Target table {table.name} (source {table.source}) lacks the {what}column(s) {', '.join(missing)} "
            f"that the change events carry: {adds}"
        )

    def refused_message(self, table: _Table, column: str | None, detail: str) -> str:
        where = f" column {column} of" if column else ""
        return (
            f"The target refused a value for{where} {table.name} (source {table.source}): {detail}. The target "
            f"column's type must match the source column's, and the settings' modes the connector's "
            f"(decimal.handling.mode, binary.handling.mode, time.precision.mode, interval.handling.mode)"
        )


def dialect_for(url: str) -> Dialect:
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):
        return _POSTGRES
    if scheme in ("mysql", "mariadb"):
        return _MYSQL
    raise TargetError(f"unknown SQL target {safe_url(url)!r}: use postgresql://... or mysql://...")


def _chunks(params: list[list[Any]], size: int) -> Iterable[list[list[Any]]]:
    for start in range(0, len(params), size):
        yield params[start : start + size]


# --- PostgreSQL -------------------------------------------------------------------------------

_PG_TABLE = """
select c.oid, n.nspname, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = coalesce(%s::text, current_schema()) and c.relname = %s and c.relkind in ('r', 'p', 'f')
"""
#: Each column's type with domains resolved (information_schema's own helpers), an array's
#: element type, and the scale / fractional digits / bit length its typmod gives.
_PG_COLUMNS = """
select a.attname, format_type(a.atttypid, a.atttypmod), coalesce(et.typname, bt.typname),
       coalesce(et.typtype, bt.typtype) = 'e', et.oid is not null,
       information_schema._pg_numeric_scale(coalesce(et.oid, bt.oid), r.typmod),
       information_schema._pg_datetime_precision(coalesce(et.oid, bt.oid), r.typmod),
       information_schema._pg_char_max_length(coalesce(et.oid, bt.oid), r.typmod),
       information_schema._pg_interval_type(coalesce(et.oid, bt.oid), r.typmod)
from pg_attribute a
join pg_type t on t.oid = a.atttypid
cross join lateral (
    select information_schema._pg_truetypid(a.*, t.*) as typid, information_schema._pg_truetypmod(a.*, t.*) as typmod
) r
join pg_type bt on bt.oid = r.typid
left join pg_type et on bt.typcategory = 'A' and bt.typelem <> 0 and et.oid = bt.typelem
where a.attrelid = %s and a.attnum > 0 and not a.attisdropped
order by a.attnum
"""
#: Unique indexes ON CONFLICT can infer: no predicate, no expression.
_PG_UNIQUE = """
select array(
    select a.attname::text from unnest(i.indkey) k join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k
)
from pg_index i where i.indrelid = %s and i.indisunique and i.indisvalid and i.indpred is null and i.indexprs is null
"""
_PG_PARAMETER = re.compile(r"parameter \$(\d+)")


class _Postgres(Dialect):
    counts_skipped = True
    position_definition = f'{POSITION_COLUMN} varchar(64) COLLATE "C"'

    def connect(self, url: str) -> Any:
        import psycopg

        rest = url.split(":", 1)[1]  # postgres:// and postgresql+psycopg:// are libpq's postgresql://
        return psycopg.connect("postgresql:" + rest, autocommit=False, application_name="airflow-cdc-apply")

    def identifier(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def read_table(self, conn: Any, target: TableName) -> TableInfo | None:
        found = conn.execute(_PG_TABLE, (target.schema, target.name)).fetchone()
        if found is None:
            return None
        oid, schema, name = found
        qualified = f"{schema}.{name}"
        columns = {}
        for column, sql_type, type_name, enum, array, scale, precision, length, fields in conn.execute(
            _PG_COLUMNS, (oid,)
        ):
            columns[column] = ColumnType(
                qualified, column, type_name, sql_type, scale, precision, length, array, enum, interval_fields=fields
            )
        keys = tuple(frozenset(row[0]) for row in conn.execute(_PG_UNIQUE, (oid,)))
        return TableInfo(TableName(schema, name), columns, keys)

    def add_position_column(self, conn: Any, url: str, name: TableName, statement: str) -> None:
        # In the call's transaction: PostgreSQL's DDL is transactional, and the table's lock is
        # then the transaction's (a deadlock with another executor is detected, not hung).
        conn.execute(statement)

    def upsert(self, conn: Any, table: _Table, columns: tuple[str, ...], params: list[list[Any]]) -> int:
        width = len(columns) + 1
        applied = 0
        with self._cursor(conn) as cur:
            for chunk in _chunks(params, max(1, _POSTGRES_PARAMETERS // width)):
                query = self._statement(conn, table, ("upsert", columns, len(chunk)))
                applied += self._run(cur, table, query, [v for row in chunk for v in row], (*columns, POSITION_COLUMN))
        return applied

    def delete(self, conn: Any, table: _Table, params: list[list[Any]]) -> int:
        assert table.key is not None
        deleted = 0
        with self._cursor(conn) as cur:
            for chunk in _chunks(params, max(1, _POSTGRES_PARAMETERS // (len(table.key) + 1))):
                query = self._statement(conn, table, ("delete", len(chunk)))
                names = (*table.key, POSITION_COLUMN)
                deleted += self._run(cur, table, query, [v for row in chunk for v in row], names)
        return deleted

    def truncate(self, conn: Any, table: _Table, position: str) -> int:
        with self._cursor(conn) as cur:
            return self._run(cur, table, self._statement(conn, table, ("truncate",)), [position], (POSITION_COLUMN,))

    @staticmethod
    def _cursor(conn: Any) -> Any:
        """A cursor taking the server's own $n placeholders: psycopg caches its conversion of
        %s queries only up to 4 kB, and a multi-row statement is far larger."""
        import psycopg

        return psycopg.RawCursor(conn)

    def _statement(self, conn: Any, table: _Table, what: tuple[Any, ...]) -> str:
        query = table.statements.get(what)
        if query is None:
            builders: dict[str, Callable[..., Any]] = {
                "upsert": self._upsert_sql,
                "delete": self._delete_sql,
                "truncate": self._truncate_sql,
            }
            query = table.statements[what] = builders[what[0]](table, *what[1:]).as_string(conn)
        return str(query)

    def _upsert_sql(self, table: _Table, columns: tuple[str, ...], rows: int) -> Any:
        from psycopg import sql

        assert table.key is not None
        updated = [c for c in columns if c not in table.key] + [POSITION_COLUMN]
        return sql.SQL(
            "INSERT INTO {table} AS t ({names}) VALUES {rows} ON CONFLICT ({key}) DO UPDATE SET {sets} "
            'WHERE t.{position} IS NULL OR t.{position} COLLATE "C" <= EXCLUDED.{position}'
        ).format(
            table=self._table(table),
            names=sql.SQL(", ").join(map(sql.Identifier, (*columns, POSITION_COLUMN))),
            rows=_numbered_rows(rows, ["{}"] * (len(columns) + 1)),
            key=sql.SQL(", ").join(map(sql.Identifier, table.key)),
            sets=sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updated),
            position=sql.Identifier(POSITION_COLUMN),
        )

    def _delete_sql(self, table: _Table, rows: int) -> Any:
        from psycopg import sql

        assert table.key is not None
        casts = ["{}::" + table.info.columns[c].sql_type.replace("{", "{{").replace("}", "}}") for c in table.key]
        return sql.SQL(
            "DELETE FROM {table} AS t USING (VALUES {rows}) AS d ({names}) WHERE {match} "
            'AND (t.{position} IS NULL OR t.{position} COLLATE "C" <= d.{position})'
        ).format(
            table=self._table(table),
            rows=_numbered_rows(rows, [*casts, "{}::text"]),
            names=sql.SQL(", ").join(map(sql.Identifier, (*table.key, POSITION_COLUMN))),
            match=sql.SQL(" AND ").join(sql.SQL("t.{0} = d.{0}").format(sql.Identifier(c)) for c in table.key),
            position=sql.Identifier(POSITION_COLUMN),
        )

    def _truncate_sql(self, table: _Table) -> Any:
        from psycopg import sql

        return sql.SQL('DELETE FROM {table} WHERE {position} IS NULL OR {position} COLLATE "C" < $1').format(
            table=self._table(table), position=sql.Identifier(POSITION_COLUMN)
        )

    def _table(self, table: _Table) -> Any:
        from psycopg import sql

        return sql.Identifier(*(p for p in (table.name.schema, table.name.name) if p))

    def _run(self, cur: Any, table: _Table, query: str, params: list[Any], names: tuple[str, ...]) -> int:
        import psycopg

        try:
            cur.execute(query, params)
        except psycopg.errors.DataError as exc:
            match = _PG_PARAMETER.search(exc.diag.context or "")
            column = names[(int(match.group(1)) - 1) % len(names)] if match else None
            raise TargetWriteError(self.refused_message(table, column, _first_line(exc))) from exc
        except psycopg.Error as exc:
            exc.add_note(f"while applying changes of {table.source} to {table.name}")
            raise
        return int(cur.rowcount)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _numbered_rows(rows: int, templates: list[str]) -> Any:
    """``($1, $2), ($3, $4), ...``: ``templates`` per row, ``{}`` standing for the parameter."""
    from psycopg import sql

    width, parts = len(templates), []
    for row in range(rows):
        base = row * width
        parts.append("(" + ", ".join(t.format(f"${base + i + 1}") for i, t in enumerate(templates)) + ")")
    return sql.SQL(", ".join(parts))


# --- MySQL / MariaDB --------------------------------------------------------------------------

_MY_TABLE = """
select TABLE_SCHEMA, TABLE_NAME from information_schema.TABLES
where TABLE_SCHEMA = coalesce(%s, database()) and TABLE_NAME = %s and TABLE_TYPE = 'BASE TABLE'
"""
_MY_COLUMNS = """
select COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_SCALE, DATETIME_PRECISION from information_schema.COLUMNS
where TABLE_SCHEMA = %s and TABLE_NAME = %s order by ORDINAL_POSITION
"""
_MY_UNIQUE = """
select INDEX_NAME, COLUMN_NAME from information_schema.STATISTICS
where TABLE_SCHEMA = %s and TABLE_NAME = %s and NON_UNIQUE = 0 and SUB_PART is null order by INDEX_NAME, SEQ_IN_INDEX
"""
#: Server errors that mean a value does not fit its column (strict mode).
_MY_VALUE_ERRORS = frozenset((1264, 1265, 1292, 1366, 1406, 1367, 4025))


def _mysql_params(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": unquote(parts.path.lstrip("/")) or None,
        "charset": "utf8mb4",
    }


class _MySQL(Dialect):
    """MariaDB-compatible SQL (``VALUES()`` in ON DUPLICATE KEY UPDATE, ``ADD COLUMN IF NOT
    EXISTS``); the session's time zone is UTC, so ``timestamp`` columns store UTC instants."""

    position_definition = f"`{POSITION_COLUMN}` varchar(64) CHARACTER SET ascii COLLATE ascii_bin"

    def connect(self, url: str) -> Any:

        return mysql_client.connect(**_mysql_params(url), autocommit=False, init_command="SET time_zone = '+00:00'")

    def identifier(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def read_table(self, conn: Any, target: TableName) -> TableInfo | None:
        with conn.cursor() as cur:
            cur.execute(_MY_TABLE, (target.schema, target.name))
            found = cur.fetchone()
            if found is None:
                return None
            schema, name = found
            qualified = f"{schema}.{name}"
            cur.execute(_MY_COLUMNS, (schema, name))
            columns = {row[0]: ColumnType.mysql(qualified, *row) for row in cur.fetchall()}
            cur.execute(_MY_UNIQUE, (schema, name))
            indexes: dict[str, set[str]] = {}
            for index, column in cur.fetchall():
                indexes.setdefault(index, set()).add(column)
        return TableInfo(TableName(schema, name), columns, tuple(frozenset(c) for c in indexes.values()))

    def add_position_column(self, conn: Any, url: str, name: TableName, statement: str) -> None:
        # MySQL's DDL commits the transaction it runs in: on a connection of its own, with a
        # bounded wait for the table's metadata lock.

        with mysql_client.connect(**_mysql_params(url), autocommit=True) as other, other.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 60")
            cur.execute(statement)

    def upsert(self, conn: Any, table: _Table, columns: tuple[str, ...], params: list[list[Any]]) -> int:
        # executemany writes one multi-row INSERT (ON DUPLICATE KEY UPDATE included) per
        # max_stmt_length bytes.
        query = table.statements.get(("upsert", columns))
        if query is None:
            query = table.statements["upsert", columns] = self._upsert_sql(table, columns)
        with conn.cursor() as cur:
            self._run(table, lambda: cur.executemany(query, params))
        return len(params)

    def _upsert_sql(self, table: _Table, columns: tuple[str, ...]) -> str:
        assert table.key is not None
        q = self._name
        position = q(POSITION_COLUMN)
        guard = f"{position} IS NULL OR {position} <= VALUES({position})"
        # Assignments run left to right and see the values assigned before them: the guard
        # reads the stored position, so the position is assigned last.
        updated = [c for c in columns if c not in table.key] + [POSITION_COLUMN]
        sets = ", ".join(f"{q(c)} = IF({guard}, VALUES({q(c)}), {q(c)})" for c in updated)
        names = ", ".join(q(c) for c in (*columns, POSITION_COLUMN))
        marks = ", ".join(["%s"] * (len(columns) + 1))
        return f"INSERT INTO {self._table(table)} ({names}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {sets}"

    def delete(self, conn: Any, table: _Table, params: list[list[Any]]) -> int:
        assert table.key is not None
        q = self._name
        position = q(POSITION_COLUMN)
        one = " AND ".join(f"{q(c)} = %s" for c in table.key)
        row = f"({one} AND ({position} IS NULL OR {position} <= %s))"
        query = f"DELETE FROM {self._table(table)} WHERE " + " OR ".join([row] * len(params))
        with conn.cursor() as cur:
            return self._run(table, lambda: cur.execute(query, [v for p in params for v in p]))

    def truncate(self, conn: Any, table: _Table, position: str) -> int:
        column = self._name(POSITION_COLUMN)
        query = f"DELETE FROM {self._table(table)} WHERE {column} IS NULL OR {column} < %s"
        with conn.cursor() as cur:
            return self._run(table, lambda: cur.execute(query, [position]))

    def _name(self, name: str) -> str:
        """An identifier in a statement PyMySQL formats with ``%``."""
        return self.identifier(name).replace("%", "%%")

    def _table(self, table: _Table) -> str:
        return self.quote(table.name).replace("%", "%%")

    def _run(self, table: _Table, action: Callable[[], Any]) -> int:
        import pymysql

        try:
            return int(action() or 0)
        except pymysql.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if isinstance(exc, pymysql.err.DataError) or code in _MY_VALUE_ERRORS:
                raise TargetWriteError(self.refused_message(table, None, str(exc))) from exc
            exc.add_note(f"while applying changes of {table.source} to {table.name}")
            raise


_POSTGRES = _Postgres()
_MYSQL = _MySQL()
