"""Schema changes on a SQL target, on the driver, before a batch's lanes write it: the target
tables the batch needs are created, and columns added, widened or made nullable, as the policy
allows (``schema_policy.py``), from the schemas the batch's records carry (``table_schemas.py``).

Why on the driver, before the write: DDL takes a table's exclusive lock, which would deadlock
with the lanes' transactions if a lane ran it; and a change the target cannot take fails the
batch before anything of it is written. The lanes see the new columns at once: each checks the
identity of its cached tables (``Dialect.identity``) when a call starts.

A column added with a default on the source gives every existing source row that default
without a change event for any of them (Debezium's schema carries the constant default): the
target's existing rows get it too, by one UPDATE after the ADD COLUMN.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.schema_policy import creates, evolves, say_once
from airflow_cdc.spark.table_schemas import SourceColumn, TableSchema, merged
from airflow_cdc.spark.targets.sql.dialect import Dialect, dialect_for
from airflow_cdc.spark.targets.sql.errors import TargetSchemaError
from airflow_cdc.spark.targets.sql.settings import SqlTargetSettings
from airflow_cdc.spark.targets.sql.tables import TableInfo, TableName
from airflow_cdc.spark.targets.sql.type_mapping import mysql_type, postgres_type, takes, widened
from airflow_cdc.spark.values import ColumnType, decoder_for, json_text

log = logging.getLogger(__name__)


@dataclass
class Evolved:
    """What :func:`evolve_tables` did: the statements it ran, and per source table the target
    columns its newest schema lacks (dropped at the source: ``evolve`` writes NULL into them)."""

    statements: list[str] = field(default_factory=list)
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)


def evolve_tables(settings: SqlTargetSettings, policy: str, versions: Mapping[str, Sequence[TableSchema]]) -> Evolved:
    """Bring the target tables of ``versions`` (source table -> its schemas in this batch, oldest
    first) to what the policy allows."""
    done = Evolved()
    if not versions:
        return done
    dialect = dialect_for(settings.url)
    conn = dialect.connect(settings.url)
    try:
        for source in sorted(versions):
            evolution = _Evolution(dialect, conn, settings, policy, source, list(versions[source]))
            done.statements += evolution.run()
            done.dropped[source] = evolution.dropped
        conn.commit()
    except BaseException:
        _quietly(conn.rollback)
        raise
    finally:
        _quietly(conn.close)
    return done


def _quietly(action: Any) -> None:
    try:
        action()
    except Exception:  # the connection may be gone; the original error matters
        log.debug("ignored while cleaning up", exc_info=True)


class _Evolution:
    """One source table's target, against the schemas one batch carries."""

    def __init__(
        self,
        dialect: Dialect,
        conn: Any,
        settings: SqlTargetSettings,
        policy: str,
        source: str,
        versions: list[TableSchema],
    ) -> None:
        self.dialect, self.conn, self.settings, self.policy = dialect, conn, settings, policy
        self.source, self.versions = source, versions
        self.whole = merged(versions)
        self.target = TableName.parse(settings.tables.get(source, source))
        self.done: list[str] = []
        self.dropped: tuple[str, ...] = ()

    def run(self) -> list[str]:
        info = self.dialect.read_table(self.conn, self.target)
        if info is None:
            if not creates(self.policy):
                return []  # the lanes stop with the missing table's message
            self._create()
            info = self.dialect.read_table(self.conn, self.target)
            if info is None:
                raise TargetSchemaError(f"Creating target table {self.target} ({self.source}) did not take effect")
        if self.policy == "exception":
            self._refuse_changes(info)
            return self.done
        self._columns(info)
        return self.done

    # --- statements ----------------------------------------------------------------------------

    def _run(self, statement: str, params: Sequence[Any] = ()) -> None:
        log.warning("Schema change for %s (%s policy): %s", self.source, self.policy, statement)
        if self.dialect.name == "postgresql":
            self.conn.execute(statement, params or None)
        else:
            with self.conn.cursor() as cur:
                cur.execute(statement, params or None)
        self.done.append(statement)

    def _type(self, column: SourceColumn) -> str:
        if self.dialect.name == "postgresql":
            return postgres_type(column)
        return mysql_type(column, key=column.name in self.whole.key)

    def _q(self) -> str:
        return self.dialect.quote(self.target)

    def _create(self) -> None:
        ident = self.dialect.identifier
        if self.target.schema:
            what = "SCHEMA" if self.dialect.name == "postgresql" else "DATABASE"
            exists = self._schema_exists()
            if not exists:
                self._run(f"CREATE {what} IF NOT EXISTS {ident(self.target.schema)}")
        key = self.whole.key
        columns = [
            f"{ident(c.name)} {self._type(c)}{' NOT NULL' if (not c.optional or c.name in key) else ''}"
            for c in self.whole.columns
        ]
        columns.append(self.dialect.position_definition)
        if key:
            columns.append(f"PRIMARY KEY ({', '.join(ident(k) for k in key)})")
        self._run(f"CREATE TABLE IF NOT EXISTS {self._q()} ({', '.join(columns)})")

    def _schema_exists(self) -> bool:
        if self.dialect.name == "postgresql":
            found = self.conn.execute("select 1 from pg_namespace where nspname = %s", (self.target.schema,))
            return found.fetchone() is not None
        with self.conn.cursor() as cur:
            cur.execute("select 1 from information_schema.SCHEMATA where SCHEMA_NAME = %s", (self.target.schema,))
            return cur.fetchone() is not None

    # --- columns ------------------------------------------------------------------------------

    def _columns(self, info: TableInfo) -> None:
        newest = set(self.versions[-1].names)
        for column in self.whole.columns:
            current = info.columns.get(column.name)
            if current is None:
                self._missing(column, info, added_now=column.name in newest)
                continue
            for version in self.versions:  # every version: a batch may hold int, then bigint
                seen = version.column(column.name)
                if seen is not None:
                    current_type = self._current_type(info, column.name)
                    self._fit(seen, current_type, info)
        gone = [c for c in info.columns if c != POSITION_COLUMN and c not in newest]
        self.dropped = tuple(gone)
        if gone and evolves(self.policy):
            for name, nullable in self._nullability(info).items():
                if name in gone and not nullable:
                    self._drop_not_null(name, info)

    def _current_type(self, info: TableInfo, name: str) -> str:
        # After a widening in this same call, the catalog read before it is stale.
        if self.done:
            fresh = self.dialect.read_table(self.conn, self.target)
            if fresh is not None and name in fresh.columns:
                return fresh.columns[name].described
        return info.columns[name].described

    def _missing(self, column: SourceColumn, info: TableInfo, added_now: bool) -> None:
        if self.policy == "ignore":
            say_once(
                str(info.name),
                column.name,
                message=f"Target table {info.name} (source {self.source}) has no column {column.name} "
                f"({column.described}): its values are not applied (schema change policy 'ignore')",
            )
            return
        ident = self.dialect.identifier
        mapped = self._type(column)
        defaulted = added_now and column.has_default and column.default is not None
        if defaulted and self.dialect.name == "mysql":
            # One statement: MySQL's DDL commits at once, and a driver killed between an ADD
            # COLUMN and its backfill would leave the rows without the default for good.
            literal = self._literal(self._default(column, _mysql_kind(str(info.name), column.name, mapped)))
            self._run(f"ALTER TABLE {self._q()} ADD COLUMN {ident(column.name)} {mapped} DEFAULT ({literal})")
            return
        self._run(f"ALTER TABLE {self._q()} ADD COLUMN {ident(column.name)} {mapped}")
        if defaulted:  # PostgreSQL: in this transaction, with the ADD COLUMN
            self._backfill(column)

    def _default(self, column: SourceColumn, kind: ColumnType) -> Any:
        return decoder_for(kind, self.settings.modes)(json_text(column.default))

    def _backfill(self, column: SourceColumn) -> None:
        """The source's default, as the column's default (a change from before the ADD COLUMN,
        applied after it, inserts a row without the column: the source's row has the default)
        and in the rows the target has now (as the source's ADD COLUMN gave its rows)."""
        info = self.dialect.read_table(self.conn, self.target)
        assert info is not None
        target = info.columns[column.name]
        value = self._default(column, target)
        name = self.dialect.identifier(column.name)
        literal = self._literal(value)
        if self.dialect.name == "postgresql":
            literal = f"CAST({literal} AS {target.described})"
        self._run(f"ALTER TABLE {self._q()} ALTER COLUMN {name} SET DEFAULT {literal}")
        self._run(f"UPDATE {self._q()} SET {name} = {literal}")

    def _literal(self, value: Any) -> str:
        if self.dialect.name == "postgresql":
            from psycopg import sql

            return sql.Literal(value).as_string(self.conn)
        return str(self.conn.escape(value))

    def _fit(self, column: SourceColumn, current: str, info: TableInfo) -> None:
        wanted = self._type(column)
        verdict = takes(current, wanted)
        if verdict == "as is":
            return
        if self.policy == "ignore":
            say_once(
                str(info.name),
                column.name,
                wanted,
                message=f"Column {column.name} of target table {info.name} (source {self.source}) stays {current}; "
                f"the source's is now {column.described} ({wanted} here) (schema change policy 'ignore')",
            )
            return
        if verdict == "no":
            raise TargetSchemaError(self._incompatible(column, current, wanted, info))
        new_type = widened(current, wanted)
        ident = self.dialect.identifier(column.name)
        if self.dialect.name == "postgresql":
            self._run(f"ALTER TABLE {self._q()} ALTER COLUMN {ident} TYPE {new_type}")
        else:
            null = "NULL" if self._nullability(info).get(column.name, True) else "NOT NULL"
            self._run(f"ALTER TABLE {self._q()} MODIFY COLUMN {ident} {new_type} {null}")

    def _incompatible(self, column: SourceColumn, current: str, wanted: str, info: TableInfo) -> str:
        q, c = self._q(), self.dialect.identifier(column.name)
        change = (
            f"ALTER TABLE {q} ALTER COLUMN {c} TYPE {wanted} USING {c}::{wanted}"
            if self.dialect.name == "postgresql"
            else f"ALTER TABLE {q} MODIFY COLUMN {c} {wanted}"
        )
        return (
            f"Target table {info.name} (source {self.source}): column {column.name} is {current} in the target, but "
            f"the source's changes now carry {column.described} ({wanted} on this target), which a {current} column "
            f"cannot take and cannot be widened to. Nothing of this batch was applied. Fix the target column "
            f"({change}), or drop the target table so that the job creates it again (then send execute-snapshot "
            f"for {self.source}), or set schema_change_policy='ignore' to keep {current}; then run the job again: "
            f"it applies from this batch"
        )

    def _refuse_changes(self, info: TableInfo) -> None:
        """``exception``: the columns the target lacks stop the job with the message the lanes gave before."""
        missing = [c.name for c in self.versions[-1].columns if c.name not in info.columns]
        if missing:
            adds = "; ".join(
                f"ALTER TABLE {self._q()} ADD COLUMN {self.dialect.identifier(c)} {self._type(self.whole.column(c))}"  # type: ignore[arg-type]
                for c in missing
            )
            raise TargetSchemaError(
                f"Target table {info.name} (source {self.source}) lacks the column(s) {', '.join(missing)} that the "
                f"change events carry: {adds} (schema change policy 'exception'; 'lenient' adds them)"
            )
        for column in self.versions[-1].columns:
            current = info.columns[column.name].described
            wanted = self._type(column)
            verdict = takes(current, wanted)
            if verdict == "no":
                raise TargetSchemaError(self._incompatible(column, current, wanted, info))
            if verdict == "widen":
                raise TargetSchemaError(
                    f"Target table {info.name} (source {self.source}): column {column.name} is {current}, narrower "
                    f"than the source's {column.described}: widen it to {widened(current, wanted)} (schema change "
                    f"policy 'exception'; 'lenient' widens it)"
                )

    def _nullability(self, info: TableInfo) -> dict[str, bool]:
        if self.dialect.name == "postgresql":
            rows = self.conn.execute(
                "select a.attname::text, not a.attnotnull from pg_attribute a where a.attrelid = %s::regclass "
                "and a.attnum > 0 and not a.attisdropped",
                (self._q(),),
            ).fetchall()
        else:
            with self.conn.cursor() as cur:
                cur.execute(
                    "select COLUMN_NAME, IS_NULLABLE = 'YES' from information_schema.COLUMNS "
                    "where TABLE_SCHEMA = %s and TABLE_NAME = %s",
                    (info.name.schema, info.name.name),
                )
                rows = cur.fetchall()
        return {str(name): bool(nullable) for name, nullable in rows}

    def _drop_not_null(self, name: str, info: TableInfo) -> None:
        ident = self.dialect.identifier(name)
        if self.dialect.name == "postgresql":
            self._run(f"ALTER TABLE {self._q()} ALTER COLUMN {ident} DROP NOT NULL")
        else:
            self._run(f"ALTER TABLE {self._q()} MODIFY COLUMN {ident} {info.columns[name].described} NULL")


def _mysql_kind(table: str, column: str, mapped: str) -> ColumnType:
    """The catalog's description of a MySQL column of type ``mapped`` before it exists (to decode
    its default with the decoder the lanes will use)."""
    base = mapped.split("(", 1)[0].strip().lower()
    sizes = re.search(r"\((\d+)(?:,(\d+))?\)", mapped)
    scale = int(sizes.group(2)) if sizes and sizes.group(2) and base == "decimal" else None
    precision = int(sizes.group(1)) if sizes and base in ("datetime", "time", "timestamp") else None
    return ColumnType.mysql(table, column, base, mapped, scale, precision)
