"""The publication pgoutput streams: created as ``publication.autocreate.mode`` says, and checked
to cover every captured table.

Debezium's default, ``all_tables``, needs a superuser (``CREATE PUBLICATION ... FOR ALL
TABLES``); ``filtered`` needs the role to own each table. A role with only ``LOGIN REPLICATION``
(what a DBA hands out) can do neither: the publication must then exist, created once by a
superuser or the tables' owner. Both cases fail at start with the statement to run, never with
the server's bare "must be superuser" (ADR 0020). An existing publication that leaves out a
captured table is refused too: pgoutput would send nothing for it, and its changes would be
lost without a word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from airflow_cdc.engine.sources.postgres.catalog import SourceSetupError, TableColumns

Conn = psycopg.Connection[tuple[Any, ...]]


def ensure_publication(conn: Conn, name: str, mode: str, tables: Sequence[TableColumns]) -> None:
    """Create or update publication ``name`` as ``mode`` says, then check it covers ``tables``."""
    exists = conn.execute("select 1 from pg_publication where pubname = %s", (name,)).fetchone() is not None
    if mode == "filtered" and not tables:
        raise SourceSetupError("publication.autocreate.mode=filtered but table.include.list matches no table")
    if mode == "disabled" and not exists:
        raise SourceSetupError(
            f"publication {name!r} does not exist and publication.autocreate.mode=disabled: "
            f"{_create_advice(conn, name, tables)}"
        )
    if mode == "filtered" and exists and _published(conn, name) == {(t.schema, t.name) for t in tables}:
        pass  # already what it would be set to: a role that does not own the tables can use it
    elif mode == "filtered" or (mode == "all_tables" and not exists):
        _create_or_alter(conn, name, mode, exists, tables)
    check_publication_covers(conn, name, tables)


def _create_or_alter(conn: Conn, name: str, mode: str, exists: bool, tables: Sequence[TableColumns]) -> None:
    if mode == "all_tables":
        statement = sql.SQL("create publication {} for all tables").format(sql.Identifier(name))
    else:
        verb = "alter publication {} set table {}" if exists else "create publication {} for table {}"
        table_list = sql.SQL(", ").join(sql.Identifier(t.schema, t.name) for t in tables)
        statement = sql.SQL(verb).format(sql.Identifier(name), table_list)
    try:
        with conn.transaction():
            conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SourceSetupError(
            f"role {_role(conn)!r} may not {'create' if not exists else 'alter'} publication {name!r} "
            f"(publication.autocreate.mode={mode}: {exc.diag.message_primary or exc}): "
            f"{_create_advice(conn, name, tables)}"
        ) from exc


def check_publication_covers(conn: Conn, name: str, tables: Sequence[TableColumns]) -> None:
    """Every captured plain table is in the publication. Partitioned tables are left out of the
    check: a publication lists their partitions, or the root only with publish_via_partition_root."""
    published = _published(conn, name)
    plain = _plain_tables(conn, tables)
    missing = [t for t in tables if t.oid in plain and (t.schema, t.name) not in published]
    if missing:
        listed = ", ".join(t.qualified for t in missing)
        add = sql.SQL(", ").join(sql.Identifier(t.schema, t.name) for t in missing).as_string(conn)
        raise SourceSetupError(
            f"publication {name!r} does not include {listed}, which table.include.list captures: their changes "
            f"would never arrive. Have the tables' owner or a superuser run "
            f"ALTER PUBLICATION {sql.Identifier(name).as_string(conn)} ADD TABLE {add}; "
            "or leave them out of table.include.list"
        )


def _published(conn: Conn, name: str) -> set[tuple[str, str]]:
    rows = conn.execute("select schemaname, tablename from pg_publication_tables where pubname = %s", (name,))
    return {(schema, table) for schema, table in rows}


def _plain_tables(conn: Conn, tables: Sequence[TableColumns]) -> set[int]:
    if not tables:
        return set()
    rows = conn.execute(
        "select oid::int from pg_class where oid = any(%s) and relkind = 'r'", ([t.oid for t in tables],)
    )
    return {oid for (oid,) in rows}


def _role(conn: Conn) -> str:
    row = conn.execute("select current_user").fetchone()
    return str(row[0]) if row else "?"


def _create_advice(conn: Conn, name: str, tables: Sequence[TableColumns]) -> str:
    """The statement a superuser or the tables' owner runs once, and the setting that goes with it."""
    ident = sql.Identifier(name).as_string(conn)
    if tables:
        table_list = sql.SQL(", ").join(sql.Identifier(t.schema, t.name) for t in tables).as_string(conn)
        create = f"CREATE PUBLICATION {ident} FOR TABLE {table_list}"
    else:
        create = f"CREATE PUBLICATION {ident} FOR ALL TABLES"
    return (
        f"have the tables' owner or a superuser run once {create}; (the engine then uses it as it is), "
        "or give this role ownership of the tables and set publication.autocreate.mode: filtered "
        "(README, 'The source role')"
    )
