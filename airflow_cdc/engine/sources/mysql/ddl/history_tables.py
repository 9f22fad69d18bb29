"""The schema history's model of a table (columns as information_schema describes them), and
what a DDL statement does to it (:func:`apply`): what the history needs to keep each table's
column list right as of each point of the binlog.

Followed: CREATE TABLE with its column list, ALTER TABLE's column, key, rename and option
clauses, RENAME TABLE, DROP TABLE. Anything else touching a table is ``Unknown``: the caller reads
that table from the server instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from airflow_cdc.engine.sources.mysql.ddl.clauses import (
    AddColumns,
    AddPrimaryKey,
    AddUnique,
    DropColumn,
    DropPrimaryKey,
    NoColumnChange,
    Placement,
    RedefineColumn,
    RenameColumn,
    RenameTable,
    SetDefault,
    SetTableComment,
    SetTableOptions,
    Unread,
    read_clauses,
)
from airflow_cdc.engine.sources.mysql.ddl.information_schema import column, declared_default
from airflow_cdc.engine.sources.mysql.ddl.statements import (
    AlterTable,
    ColumnPart,
    CreateTable,
    DropTables,
    KeyPart,
    RenameTables,
    TableKey,
    read_statement,
    read_table_body,
)
from airflow_cdc.engine.sources.mysql.ddl.tokens import split_name, unquote
from airflow_cdc.engine.sources.mysql.types import MySqlColumn


@dataclass(frozen=True)
class Table:
    database: str
    name: str
    columns: tuple[MySqlColumn, ...]
    key: tuple[str, ...]
    charset: str = "utf8mb4"


@dataclass(frozen=True)
class Unknown:
    """A statement that changes these tables in a way this module does not follow."""

    tables: tuple[TableKey, ...]


@dataclass
class Changes:
    """What a statement did to the tables: new or changed definitions, dropped names."""

    tables: dict[TableKey, Table]
    dropped: set[TableKey]


Tables = dict[TableKey, Table]


def apply(sql: str, default_db: str, tables: Tables) -> Changes | Unknown | None:
    """What ``sql`` does to ``tables`` (definitions by (database, table)); None when it changes
    no table definition (a CREATE INDEX, a GRANT, a CREATE DATABASE ...)."""
    statement = read_statement(sql, default_db)
    if isinstance(statement, CreateTable):
        if statement.body is None:
            return Unknown((statement.key,))
        return Changes({statement.key: _create(statement.key, statement.body)}, set())
    if isinstance(statement, AlterTable):
        if statement.key not in tables:
            return Unknown((statement.key,))
        return _alter(tables[statement.key], statement.clauses, default_db)
    if isinstance(statement, DropTables):
        return Changes({}, set(statement.keys))
    if isinstance(statement, RenameTables):
        return _rename(statement, tables)
    return None


def _rename(statement: RenameTables, tables: Tables) -> Changes | Unknown:
    if statement.pairs is None:
        return Unknown(())
    changes = Changes({}, set())
    current = dict(tables)
    for old_key, new_key in statement.pairs:
        if old_key not in current:
            return Unknown((old_key, new_key))
        table = replace(current.pop(old_key), database=new_key[0], name=new_key[1])
        current[new_key] = table
        changes.dropped.add(old_key)
        changes.dropped.discard(new_key)
        changes.tables.pop(old_key, None)
        changes.tables[new_key] = table
    return changes


def _create(key: TableKey, body: str) -> Table:
    read = read_table_body(body)
    charset = read.options.charset or "utf8mb4"
    columns: list[MySqlColumn] = []
    primary: list[str] = []
    for part in read.parts:
        if isinstance(part, KeyPart):
            if part.kind == "primary" and part.columns is not None:
                primary = list(part.columns)
            continue
        columns.append(column(part.name, part.definition, charset))
        if _declares_primary_key(part):
            primary = [unquote(part.name)]
    if primary:
        columns = [replace(c, nullable=False) if c.name in primary else c for c in columns]
    return Table(key[0], key[1], tuple(columns), tuple(primary), charset)


def _declares_primary_key(part: ColumnPart) -> bool:
    return re.search(r"\bprimary\s+key\b", part.definition, re.I) is not None


@dataclass
class _Alteration:
    """A table's definition while the clauses of one ALTER TABLE are applied in turn."""

    table: Table
    default_db: str
    columns: list[MySqlColumn]
    key: list[str]
    name: TableKey

    def index_of(self, column_name: str) -> int | None:
        return next((i for i, c in enumerate(self.columns) if c.name.lower() == column_name.lower()), None)

    def place(self, new: MySqlColumn, placement: Placement) -> None:
        """Insert ``new`` FIRST, AFTER a column (ValueError if there is no such column) or last."""
        if placement.first:
            self.columns.insert(0, new)
        elif placement.after is not None:
            index = self.index_of(placement.after)
            if index is None:
                raise ValueError(f"no column {placement.after} to place {new.name} after")
            self.columns.insert(index + 1, new)
        else:
            self.columns.append(new)


def _alter(table: Table, text: str, default_db: str) -> Changes | Unknown:
    name = (table.database, table.name)
    alteration = _Alteration(table, default_db, list(table.columns), list(table.key), name)
    for clause in read_clauses(text):
        if not _APPLY[type(clause)](alteration, clause):
            return Unknown((name,))
    primary = set(alteration.key)
    columns = tuple(replace(c, nullable=False) if c.name in primary else c for c in alteration.columns)
    new_name = alteration.name
    changed = replace(table, database=new_name[0], name=new_name[1], columns=columns, key=tuple(alteration.key))
    return Changes({new_name: changed}, {name} - {new_name})


def _add_primary_key(alteration: _Alteration, clause: AddPrimaryKey) -> bool:
    alteration.key = list(clause.columns)
    return True


def _drop_primary_key(alteration: _Alteration, clause: DropPrimaryKey) -> bool:
    alteration.key = []
    return True


def _add_columns(alteration: _Alteration, clause: AddColumns) -> bool:
    for name, definition in clause.columns:
        alteration.place(column(name, definition, alteration.table.charset), clause.placement)
    return True


def _drop_column(alteration: _Alteration, clause: DropColumn) -> bool:
    gone = clause.name.lower()
    alteration.columns = [c for c in alteration.columns if c.name.lower() != gone]
    alteration.key = [k for k in alteration.key if k.lower() != gone]
    return True


def _rename_column(alteration: _Alteration, clause: RenameColumn) -> bool:
    old, new = clause.old.lower(), clause.new
    alteration.columns = [replace(c, name=new) if c.name.lower() == old else c for c in alteration.columns]
    alteration.key = [new if k.lower() == old else k for k in alteration.key]
    return True


def _redefine_column(alteration: _Alteration, clause: RedefineColumn) -> bool:
    index = alteration.index_of(clause.old)
    if index is None:
        return False
    replacement = column(clause.new_name, clause.definition, alteration.table.charset)
    if clause.old in alteration.key:
        replacement = replace(replacement, nullable=False)
        alteration.key = [unquote(clause.new_name) if k == clause.old else k for k in alteration.key]
    if clause.placement:
        alteration.columns.pop(index)
        alteration.place(replacement, clause.placement)
    else:
        alteration.columns[index] = replacement
    return True


def _set_default(alteration: _Alteration, clause: SetDefault) -> bool:
    """ALTER COLUMN SET / DROP DEFAULT: the column's default, as COLUMN_DEFAULT would show it
    (a zero date's stand-in and the Connect schema's ``default`` follow it)."""
    index = alteration.index_of(clause.column)
    if index is None:
        return False
    default = None if clause.expression is None else declared_default(f"default {clause.expression}")
    alteration.columns[index] = replace(alteration.columns[index], default=default)
    return True


def _rename_table(alteration: _Alteration, clause: RenameTable) -> bool:
    alteration.name = split_name(clause.name, alteration.default_db)
    return True


def _unchanged(alteration: _Alteration, clause: Any) -> bool:
    """A unique key, a table option or comment, an index: nothing information_schema's
    columns or the primary key show."""
    return True


def _unread(alteration: _Alteration, clause: Any) -> bool:
    return False


_APPLY: dict[type, Callable[[_Alteration, Any], bool]] = {
    AddPrimaryKey: _add_primary_key,
    AddUnique: _unchanged,
    DropPrimaryKey: _drop_primary_key,
    AddColumns: _add_columns,
    DropColumn: _drop_column,
    RenameColumn: _rename_column,
    RedefineColumn: _redefine_column,
    SetDefault: _set_default,
    RenameTable: _rename_table,
    SetTableOptions: _unchanged,
    SetTableComment: _unchanged,
    NoColumnChange: _unchanged,
    Unread: _unread,
}
