"""Tables as Debezium's MySQL/MariaDB DDL parser models them, for the ``tableChanges`` of schema
change events: pure functions over DDL text, no server.

Why a model of its own beside the schema history's (``history_tables.py``): the history
describes columns as ``information_schema`` does, which row decoding needs; Debezium's events
describe them as its ANTLR parser read the statement's text (``debezium_columns.py``). Both read
the statement with the same reader (``statements.py``, ``clauses.py``). The snapshot's tables
are read from ``SHOW CREATE TABLE``, as Debezium's snapshot reads them; streamed DDL is applied
clause by clause (:func:`alter`). Struct fields follow ``ConnectTableChangeSerializer``
(Debezium 3.5).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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
from airflow_cdc.engine.sources.mysql.ddl.debezium_columns import (
    Column,
    apply_default,
    charset_of_collation,
    column,
)
from airflow_cdc.engine.sources.mysql.ddl.statements import KeyPart, TableOptions, read_table_body
from airflow_cdc.engine.sources.mysql.ddl.tokens import IDENT, tokens, unquote

__all__ = ["Column", "Table", "alter", "column", "create_table"]


@dataclass
class Table:
    database: str
    name: str
    columns: list[Column] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    charset: str | None = None
    comment: str | None = None

    def struct(self) -> dict[str, Any]:
        return {
            "defaultCharsetName": self.charset,
            "primaryKeyColumnNames": list(self.key),
            "columns": [c.struct(n) for n, c in enumerate(self.columns, 1)],
            "comment": self.comment,
        }

    def index_of(self, name: str) -> int | None:
        return next((i for i, c in enumerate(self.columns) if c.name.lower() == name.lower()), None)

    def copy(self) -> Table:
        return replace(self, columns=[replace(c) for c in self.columns], key=list(self.key))


def _charset(options: TableOptions) -> str | None:
    if options.charset is None and options.collation:
        return charset_of_collation(options.collation)
    return options.charset


# -- CREATE TABLE -------------------------------------------------------------------------------


def create_table(database: str, name: str, body: str, default_charset: str | None) -> Table:
    """A table from ``CREATE TABLE name body``'s body: ``(definitions) options``."""
    read = read_table_body(body)
    table = Table(database, name, charset=_charset(read.options) or default_charset, comment=read.options.comment)
    uniques: list[list[str]] = []
    for part in read.parts:
        if isinstance(part, KeyPart):
            _table_constraint(table, part, uniques)
            continue
        col = column(part.name, part.definition, table.charset)
        table.columns.append(col)
        if not table.key and (col.primary or (col.unique and not col.optional)):
            table.key = [col.name]
    _key_from_unique(table, uniques)
    return table


def _table_constraint(table: Table, part: KeyPart, uniques: list[list[str]]) -> None:
    if part.columns is None:
        return
    if part.kind == "primary":
        _set_primary_key(table, list(part.columns))
    elif part.kind == "unique":
        uniques.append(list(part.columns))


def _set_primary_key(table: Table, names: list[str]) -> None:
    table.key = names
    for col in table.columns:
        if col.name in table.key:
            col.optional = False


def _key_from_unique(table: Table, uniques: list[list[str]]) -> None:
    """Without a primary key, the first unique key of NOT NULL columns stands for it."""
    for names in uniques:
        if table.key:
            return
        found = [table.columns[i] for i in (table.index_of(n) for n in names) if i is not None]
        if len(found) == len(names) and not any(c.optional for c in found):
            table.key = [c.name for c in found]


# -- ALTER TABLE --------------------------------------------------------------------------------


def alter(table: Table, clauses: str) -> Table | None:
    """The table after ``ALTER TABLE name clauses``; None when a clause is not understood."""
    altered = table.copy()
    for clause in read_clauses(clauses):
        if not _APPLY[type(clause)](altered, clause):
            return None
    return altered


def _place(table: Table, col: Column, placement: Placement, index: int | None = None) -> None:
    if index is not None:
        table.columns.pop(index)
    if placement.first:
        table.columns.insert(0, col)
    elif placement.after is not None:
        after = table.index_of(placement.after)
        table.columns.insert(len(table.columns) if after is None else after + 1, col)
    elif index is not None:
        table.columns.insert(index, col)
    else:
        table.columns.append(col)


def _add_columns(table: Table, clause: AddColumns) -> bool:
    for name, definition in clause.columns:
        col = column(name, definition, table.charset)
        _place(table, col, clause.placement)
        if col.primary:
            table.key = [col.name]
    return True


def _add_primary_key(table: Table, clause: AddPrimaryKey) -> bool:
    _set_primary_key(table, list(clause.columns))
    return True


def _add_unique(table: Table, clause: AddUnique) -> bool:
    _key_from_unique(table, [list(clause.columns)])
    return True


def _drop_primary_key(table: Table, clause: DropPrimaryKey) -> bool:
    table.key = []
    return True


def _drop_column(table: Table, clause: DropColumn) -> bool:
    gone = clause.name.lower()
    table.columns = [c for c in table.columns if c.name.lower() != gone]
    table.key = [k for k in table.key if k.lower() != gone]
    return True


def _rename_column(table: Table, clause: RenameColumn) -> bool:
    index = table.index_of(clause.old)
    if index is None:
        return False
    old, new = table.columns[index].name, clause.new
    table.columns[index].name = new
    table.key = [new if k == old else k for k in table.key]
    return True


def _redefine_column(table: Table, clause: RedefineColumn) -> bool:
    index = table.index_of(clause.old)
    if index is None:
        return False
    col = column(clause.new_name, clause.definition, table.charset)
    previous = table.columns[index].name
    if previous in table.key:
        col.optional = False
        table.key = [col.name if k == previous else k for k in table.key]
    if clause.placement:
        _place(table, col, clause.placement, index)
    else:
        table.columns[index] = col
    return True


def _set_default(table: Table, clause: SetDefault) -> bool:
    index = table.index_of(clause.column)
    if index is None:
        return False
    col = table.columns[index]
    if clause.expression is None:
        col.default = None
    else:
        apply_default(col, tokens(clause.expression), 0)
    return True


def _set_table_options(table: Table, clause: SetTableOptions) -> bool:
    table.charset = _charset(clause.options) or table.charset
    return True


def _set_table_comment(table: Table, clause: SetTableComment) -> bool:
    table.comment = clause.comment
    return True


def _rename_table(table: Table, clause: RenameTable) -> bool:
    names = [unquote(n) for n in re.findall(IDENT, clause.name)]
    table.database, table.name = (names[0], names[1]) if len(names) == 2 else (table.database, names[0])
    return True


def _unchanged(table: Table, clause: Any) -> bool:
    return True  # an index, a constraint, an engine option: Debezium's table is unchanged


def _unread(table: Table, clause: Any) -> bool:
    return False


_APPLY: dict[type, Callable[[Table, Any], bool]] = {
    AddPrimaryKey: _add_primary_key,
    AddUnique: _add_unique,
    DropPrimaryKey: _drop_primary_key,
    AddColumns: _add_columns,
    DropColumn: _drop_column,
    RenameColumn: _rename_column,
    RedefineColumn: _redefine_column,
    SetDefault: _set_default,
    RenameTable: _rename_table,
    SetTableOptions: _set_table_options,
    SetTableComment: _set_table_comment,
    NoColumnChange: _unchanged,
    Unread: _unread,
}
