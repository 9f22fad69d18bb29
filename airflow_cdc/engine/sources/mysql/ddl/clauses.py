"""The clauses of an ALTER TABLE, read once for both models of a table: each clause becomes one
of the small records below (``Unread`` for one this module does not know), which the schema
history (``history_tables.py``) and Debezium's tables (``table_changes.py``) apply in turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from airflow_cdc.engine.sources.mysql.ddl.statements import (
    TableOptions,
    index_columns,
    name_and_definition,
    table_options,
)
from airflow_cdc.engine.sources.mysql.ddl.tokens import (
    IDENT,
    QUALIFIED,
    STRING,
    split_top_level,
    strip_comments,
    strip_quotes,
    tokens,
    unquote,
)


@dataclass(frozen=True)
class Placement:
    """A column's FIRST / AFTER: neither when ``first`` is False and ``after`` None."""

    first: bool = False
    after: str | None = None

    def __bool__(self) -> bool:
        return self.first or self.after is not None


@dataclass(frozen=True)
class AddPrimaryKey:
    columns: tuple[str, ...]


@dataclass(frozen=True)
class AddUnique:
    columns: tuple[str, ...]


@dataclass(frozen=True)
class DropPrimaryKey:
    pass


@dataclass(frozen=True)
class AddColumns:
    columns: tuple[tuple[str, str], ...]  # (name as written, definition)
    placement: Placement


@dataclass(frozen=True)
class DropColumn:
    name: str


@dataclass(frozen=True)
class RenameColumn:
    old: str
    new: str


@dataclass(frozen=True)
class RedefineColumn:
    """MODIFY or CHANGE: the column ``old`` is now ``new_name definition``."""

    old: str
    new_name: str  # as written
    definition: str
    placement: Placement


@dataclass(frozen=True)
class SetDefault:
    column: str
    expression: str | None  # None: DROP DEFAULT


@dataclass(frozen=True)
class RenameTable:
    name: str  # as written, with its database or without


@dataclass(frozen=True)
class SetTableOptions:
    """DEFAULT CHARSET / CHARACTER SET / COLLATE."""

    options: TableOptions


@dataclass(frozen=True)
class SetTableComment:
    comment: str


@dataclass(frozen=True)
class NoColumnChange:
    """An index, a constraint, an engine or storage option: no column nor key of either model."""


@dataclass(frozen=True)
class Unread:
    text: str


Clause = (
    AddPrimaryKey
    | AddUnique
    | DropPrimaryKey
    | AddColumns
    | DropColumn
    | RenameColumn
    | RedefineColumn
    | SetDefault
    | RenameTable
    | SetTableOptions
    | SetTableComment
    | NoColumnChange
    | Unread
)


def read_clauses(text: str) -> list[Clause]:
    """The clauses of ``ALTER TABLE name text``, in order."""
    return [read_clause(clause.strip()) for clause in split_top_level(strip_comments(text)) if clause]


_POSITION = re.compile(rf"\s+(first|after\s+{IDENT})\s*$", re.I)


def read_clause(clause: str) -> Clause:
    position = _POSITION.search(clause)
    body = clause[: position.start()] if position else clause
    placement = Placement()
    if position:
        where = position.group(1)
        first = where.lower().startswith("first")
        placement = Placement(first, None if first else unquote(where.split(None, 1)[1]))
    for pattern, read in _CLAUSES:
        if m := pattern.match(body):
            return read(m, placement)
    return Unread(clause)


def _add_columns(m: re.Match[str], placement: Placement) -> Clause:
    group = m.group(1).strip()
    parts = split_top_level(group[1:-1]) if group.startswith("(") else [group]
    return AddColumns(tuple(name_and_definition(part) for part in parts), placement)


def _modify_column(m: re.Match[str], placement: Placement) -> Clause:
    return RedefineColumn(unquote(m.group(1)), m.group(1), m.group(2), placement)


def _change_column(m: re.Match[str], placement: Placement) -> Clause:
    new_name, definition = name_and_definition(m.group(2))
    return RedefineColumn(unquote(m.group(1)), new_name, definition, placement)


def _set_default(m: re.Match[str], placement: Placement) -> Clause:
    dropped = m.group(2).lower().startswith("drop")
    return SetDefault(unquote(m.group(1)), None if dropped else m.group(3) or "")


_COLUMN = r"(?:column\s+)?"
_CONSTRAINT = r"(?:constraint\b\s*(?:`[^`]*`|\w+)?\s+)?"
_Read = Callable[[re.Match[str], Placement], Clause]
# Tried in order: keys before columns (ADD PRIMARY KEY is no column named PRIMARY), RENAME
# COLUMN / INDEX before RENAME [TO] a table.
_CLAUSES: tuple[tuple[re.Pattern[str], _Read], ...] = tuple(
    (re.compile(pattern, re.I | re.S), read)
    for pattern, read in (
        (
            rf"add\s+{_CONSTRAINT}primary\s+key\s*(?:using\s+\w+\s*)?(\(.*\))",
            lambda m, _: AddPrimaryKey(tuple(index_columns(m.group(1)[1:-1]))),
        ),
        (
            rf"add\s+{_CONSTRAINT}unique\s*(?:key|index)?\s*(?:`[^`]*`|\w+)?\s*(\(.*\))",
            lambda m, _: AddUnique(tuple(index_columns(m.group(1)[1:-1]))),
        ),
        (r"drop\s+primary\s+key", lambda m, _: DropPrimaryKey()),
        (
            r"(add|drop)\s+(key|index|fulltext|spatial|constraint|foreign|check|partition|period|unique)\b",
            lambda m, _: NoColumnChange(),
        ),
        (rf"add\s+{_COLUMN}(?:if\s+not\s+exists\s+)?(\(.*\)|{IDENT}\s+.*)$", _add_columns),
        (rf"drop\s+{_COLUMN}(?:if\s+exists\s+)?({IDENT})\s*$", lambda m, _: DropColumn(unquote(m.group(1)))),
        (
            rf"rename\s+column\s+(?:if\s+exists\s+)?({IDENT})\s+to\s+({IDENT})\s*$",
            lambda m, _: RenameColumn(unquote(m.group(1)), unquote(m.group(2))),
        ),
        (r"rename\s+(index|key)\b", lambda m, _: NoColumnChange()),
        (rf"modify\s+{_COLUMN}(?:if\s+exists\s+)?({IDENT})\s+(.*)$", _modify_column),
        (rf"change\s+{_COLUMN}(?:if\s+exists\s+)?({IDENT})\s+(.*)$", _change_column),
        (rf"alter\s+{_COLUMN}({IDENT})\s+(set\s+default|drop\s+default)\s*(.*)$", _set_default),
        (rf"rename\s+(?:to\s+|as\s+)?({QUALIFIED})\s*$", lambda m, _: RenameTable(m.group(1))),
        (
            r"(?:default\s+)?(?:character\s+set|charset|collate)\b.*$",
            lambda m, _: SetTableOptions(table_options(tokens(m.group(0)))),
        ),
        (rf"comment\s*=?\s*({STRING})\s*$", lambda m, _: SetTableComment(strip_quotes(m.group(1).strip()))),
        (
            r"(engine|auto_increment|row_format|algorithm|lock|force|order\s+by|convert\s+to|key_block_size|"
            r"stats_|pack_keys|checksum|delay_key_write|(alter|modify)\s+(column\s+)?\S+\s+(in)?visible|"
            r"(enable|disable)\s+keys|discard|import|with(out)?\s+validation)",
            lambda m, _: NoColumnChange(),
        ),
    )
)
