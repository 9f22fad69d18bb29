"""What the source asks the server's catalog: readiness checks, publications, slots, types,
primary keys and the tables to capture. Errors name what to fix."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from airflow_cdc.engine.errors import CdcError, ConfigError, ConfigProblem
from airflow_cdc.engine.sources.postgres.types import TypeInfo

log = logging.getLogger(__name__)


class SourceSetupError(CdcError):
    """The server or the role is not set up for logical replication; the message says how."""


@dataclass(frozen=True)
class SlotState:
    active: bool
    active_pid: int | None
    confirmed_flush_lsn: str | None
    database: str | None
    plugin: str | None


@dataclass(frozen=True)
class TableColumns:
    schema: str
    name: str
    oid: int
    columns: tuple[tuple[str, int, int], ...]  # name, type oid, type modifier

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


Conn = psycopg.Connection[tuple[Any, ...]]


def check_server(conn: Conn) -> None:
    row = conn.execute("show wal_level").fetchone()
    if row is None or row[0] != "logical":
        raise SourceSetupError(
            f"PostgreSQL's wal_level is {row[0] if row else 'unknown'!r}, logical decoding needs 'logical': "
            "set wal_level = logical in postgresql.conf (ALTER SYSTEM SET wal_level = logical) and restart the server"
        )
    role = conn.execute(
        "select current_user, rolsuper or rolreplication from pg_roles where rolname = current_user"
    ).fetchone()
    if role is None or not role[1]:
        user = role[0] if role else "the connector's user"
        raise SourceSetupError(
            f"role {user!r} may not stream changes: run ALTER ROLE {user} REPLICATION (or connect as a superuser)"
        )


def slot_state(conn: Conn, slot: str) -> SlotState | None:
    row = conn.execute(
        "select active, active_pid, confirmed_flush_lsn::text, database, plugin "
        "from pg_replication_slots where slot_name = %s",
        (slot,),
    ).fetchone()
    return None if row is None else SlotState(*row)


#: How long a stop waits for the server to release a slot before dropping it, and after how long
#: our own lingering WAL sender is ended.
SLOT_RELEASE_TIMEOUT_S = 30.0
SLOT_RELEASE_GRACE_S = 5.0


class SlotDropError(CdcError):
    """``slot.drop.on.stop`` could not drop the slot; the message says what holds it."""


def drop_slot(
    conn: Conn,
    slot: str,
    *,
    own_pid: int | None = None,
    timeout: float = SLOT_RELEASE_TIMEOUT_S,
    grace: float = SLOT_RELEASE_GRACE_S,
) -> None:
    """Drop ``slot`` once no WAL sender holds it.

    Closing our replication connection does not free the slot at once: the server's WAL sender
    notices the closed socket only at its next read, and until it has exited the slot is active
    for its PID and a drop fails ("replication slot ... is active for PID ..."): measured, 18
    stops in 50 left the slot, and its WAL, behind. So wait for the slot to become inactive,
    with a deadline. ``own_pid`` is the WAL sender of our own, already closed, connection: past
    ``grace`` it is ended (it serves nobody). A slot held by any other process is not ours to take.
    """
    started = time.monotonic()
    ended = False
    while (state := slot_state(conn, slot)) is not None:
        if not state.active:
            with contextlib.suppress(psycopg.errors.ObjectInUse):  # acquired again meanwhile: look again
                conn.execute(
                    "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = %s", (slot,)
                )
                return
        elif own_pid is not None and state.active_pid != own_pid:
            raise SlotDropError(
                f"replication slot {slot!r} was not dropped: PID {state.active_pid}, not this engine, is "
                f"using it; drop it once that consumer is gone: select pg_drop_replication_slot('{slot}')"
            )
        elif own_pid is not None and not ended and time.monotonic() - started >= grace:
            conn.execute("select pg_terminate_backend(%s)", (own_pid,))
            ended = True
        if time.monotonic() - started >= timeout:
            raise SlotDropError(
                f"replication slot {slot!r} is still active for PID {state.active_pid} after {timeout:.0f}s; "
                f"it keeps WAL until dropped: select pg_drop_replication_slot('{slot}')"
            )
        time.sleep(0.01)


class TableFilter:
    """Debezium's include/exclude lists: regular expressions matched against whole names."""

    def __init__(self, include: Sequence[str], exclude: Sequence[str], column_exclude: Sequence[str]) -> None:
        self._include = [re.compile(p) for p in include]
        self._exclude = [re.compile(p) for p in exclude]
        self._column_exclude = [re.compile(p) for p in column_exclude]

    def table(self, schema: str, name: str) -> bool:
        qualified = f"{schema}.{name}"
        if self._include and not any(p.fullmatch(qualified) for p in self._include):
            return False
        return not any(p.fullmatch(qualified) for p in self._exclude)

    def column(self, schema: str, table: str, column: str) -> bool:
        qualified = f"{schema}.{table}.{column}"
        return not any(p.fullmatch(qualified) for p in self._column_exclude)


def captured_tables(conn: Conn, filters: TableFilter) -> list[TableColumns]:
    rows = conn.execute(
        """
        select n.nspname, c.relname, c.oid,
               array_agg(a.attname::text order by a.attnum),
               array_agg(a.atttypid::int order by a.attnum),
               array_agg(a.atttypmod order by a.attnum)
        from pg_class c
        join pg_namespace n on n.oid = c.relnamespace
        join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        where c.relkind in ('r', 'p') and not c.relispartition
          and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg_toast%%'
        group by n.nspname, c.relname, c.oid
        order by n.nspname, c.relname
        """
    ).fetchall()
    return [
        TableColumns(schema, name, oid, tuple(zip(names, types, mods, strict=True)))
        for schema, name, oid, names, types, mods in rows
        if filters.table(schema, name)
    ]


#: At most this many table names in the error of an include list that matches nothing.
_NAMED_TABLES = 30


def check_include_list(conn: Conn, include: Sequence[str], database: str) -> None:
    """``table.include.list`` must match a table. Matching nothing is a ConfigError naming the
    tables there are - silently capturing nothing, or (quoted names being the usual mistake)
    believing to capture something, costs more than a refusal to start. An entry that matches
    nothing while others match is a warning."""
    if not include:
        return
    existing = [t.qualified for t in captured_tables(conn, TableFilter([], [], []))]
    unmatched = [p for p in include if not any(re.fullmatch(p, name) for name in existing)]
    for pattern in unmatched if len(unmatched) < len(include) else ():
        log.warning("table.include.list: %r matches no table of database %r", pattern, database)
    if len(unmatched) < len(include):
        return
    named = ", ".join(existing[:_NAMED_TABLES]) + (
        f" and {len(existing) - _NAMED_TABLES} more" if len(existing) > _NAMED_TABLES else ""
    )
    quoted = any('"' in p for p in include)
    fix = "entries are regular expressions matched against unquoted schema.table names" + (
        ' (public.orders, not "public"."orders")' if quoted else ""
    )
    raise ConfigError(
        [
            ConfigProblem(
                "table.include.list",
                f"matches no table of database {database!r}, whose tables are: {named or '(none)'}",
                fix,
            )
        ]
    )


_QUOTED_DEFAULT = re.compile(r"^'((?:[^']|'')*)'(?:::[\w\s\".\[\]()]+)*$", re.DOTALL)
_PLAIN_DEFAULT = re.compile(r"^\(?(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false)\)?(?:::[\w\s\".\[\]()]+)*$")


def default_literal(expression: str | None) -> str | None:
    """The text of a column default that is a constant (``'abc'::text``, ``42``, ``true``), as the
    column's text output would be; None for an expression (``nextval(...)``, ``now()``), whose
    value only the server knows. Debezium evaluates no expressions either."""
    if expression is None:
        return None
    quoted = _QUOTED_DEFAULT.match(expression)
    if quoted:
        return quoted.group(1).replace("''", "'")
    plain = _PLAIN_DEFAULT.match(expression)
    if plain:
        text = plain.group(1)
        return {"true": "t", "false": "f"}.get(text, text)
    return None


_TYPES = "select oid::int, typname, typcategory, typtype, typelem::int, typbasetype::int from pg_type"


class Catalog:
    """Types and primary keys, read on demand and cached."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn
        self._types: dict[int, TypeInfo] = {}
        for row in conn.execute(
            "select oid::int, typname, typcategory, typtype, typelem::int, typbasetype::int from pg_type"
        ):
            self._types[row[0]] = TypeInfo(*row)

    @property
    def connection(self) -> Conn:
        """The connection it reads from (schema_facts.py reads more of the catalog with it)."""
        return self._conn

    def rebind(self, conn: Conn) -> None:
        """Read from ``conn`` from now on: the connection read so far was lost (a server restart)."""
        self._conn = conn

    def type(self, oid: int) -> TypeInfo:
        info = self._types.get(oid)
        if info is None:
            row = self._conn.execute(_TYPES + " where oid = %s", (oid,)).fetchone()
            info = TypeInfo(*row) if row else TypeInfo(oid, f"oid{oid}", "U", "b")
            self._types[oid] = info
        return info

    def not_null_columns(self, relation_oid: int) -> dict[str, str | None]:
        """The NOT NULL columns of a table, each with its default as the column's text output
        when the default is a constant (``'1.5'`` of a numeric(5,2) prints ``1.50``), else None."""
        rows = self._conn.execute(
            """
            select a.attname, pg_get_expr(d.adbin, d.adrelid), format_type(a.atttypid, a.atttypmod)
            from pg_attribute a
            left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
            where a.attrelid = %s and a.attnum > 0 and not a.attisdropped and a.attnotnull
            """,
            (relation_oid,),
        ).fetchall()
        return {name: self.constant_text(default, type_sql) for name, default, type_sql in rows}

    def constant_text(self, default: str | None, type_sql: str) -> str | None:
        literal = default_literal(default)
        if literal is None:
            return None  # an expression: only evaluating it would tell, and it may have effects
        try:
            with self._conn.transaction():
                # format('%s') prints with the type's output function, as the stream does ('t',
                # where a cast to text would give 'true').
                query = sql.SQL("select format('%s', cast(cast({} as text) as {}))")
                row = self._conn.execute(query.format(sql.Literal(literal), sql.SQL(type_sql))).fetchone()
        except psycopg.Error:
            return None
        return row[0] if row else None

    def primary_key(self, relation_oid: int) -> list[str]:
        rows = self._conn.execute(
            """
            select a.attname from pg_index i
            join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
            where i.indrelid = %s and i.indisprimary
            order by array_position(i.indkey, a.attnum)
            """,
            (relation_oid,),
        ).fetchall()
        return [r[0] for r in rows]
