"""What a DDL statement says, read once for both models of a table (the schema history's,
``history_tables.py``, and Debezium's, ``table_changes.py``): which statement it is and which
tables it names, a CREATE TABLE's column definitions, keys and options, a column definition's
declared type. The clauses of an ALTER TABLE are read in ``clauses.py``.

Reading says nothing about what a statement does to a table: each model applies what is read
(the history keeps information_schema's view of a column, Debezium's events its parser's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_cdc.engine.sources.mysql.ddl.tokens import (
    IDENT,
    QUALIFIED,
    Token,
    closing,
    split_name,
    split_top_level,
    strip_comments,
    strip_quotes,
    tokens,
    unquote,
)

TableKey = tuple[str, str]

# -- statements ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateTable:
    key: TableKey
    #: ``(definitions) options``; None when the statement starts with no column list (LIKE,
    #: AS SELECT ...).
    body: str | None


@dataclass(frozen=True)
class AlterTable:
    key: TableKey
    clauses: str


@dataclass(frozen=True)
class DropTables:
    keys: frozenset[TableKey]


@dataclass(frozen=True)
class RenameTables:
    #: (old, new) in the statement's order; None when a pair has no ``TO``.
    pairs: tuple[tuple[TableKey, TableKey], ...] | None


Statement = CreateTable | AlterTable | DropTables | RenameTables

_CREATE = re.compile(
    rf"^create\s+(?:or\s+replace\s+)?(?:temporary\s+)?table\s+(?:if\s+not\s+exists\s+)?(?P<name>{QUALIFIED})\s*(?P<rest>.*)$",
    re.I | re.S,
)
_ALTER = re.compile(
    rf"^alter\s+(?:online\s+|ignore\s+)*table\s+(?:if\s+exists\s+)?(?P<name>{QUALIFIED})\s*(?P<rest>.*)$", re.I | re.S
)
_DROP = re.compile(
    r"^drop\s+(?:temporary\s+)?tables?\s+(?:if\s+exists\s+)?(?P<names>.*?)(?:\s+(?:restrict|cascade))?$", re.I | re.S
)
_RENAME = re.compile(r"^rename\s+tables?\s+(?P<pairs>.*)$", re.I | re.S)
_TRUNCATE_OR_INDEX = re.compile(
    r"^(?:truncate|create\s+(?:unique\s+|fulltext\s+|spatial\s+)?index|drop\s+index)\b", re.I
)


#: Debezium's TRUNCATE_STATEMENT_PATTERN (MariaDB may prefix ``SET STATEMENT ... FOR``); the
#: TABLE keyword is optional in MySQL, and Debezium's DDL parser reads both as a truncate too.
_TRUNCATE = re.compile(
    rf"^(?:set\s+statement\s+.*?\s+for\s+)?truncate\s+(?:table\s+)?(?P<name>{QUALIFIED})\s*$", re.I | re.S
)


def truncated_table(sql: str, default_db: str) -> TableKey | None:
    """The table a ``TRUNCATE [TABLE] name`` statement empties; None for any other statement."""
    m = _TRUNCATE.match(strip_comments(sql).strip().rstrip(";").strip())
    return split_name(m.group("name"), default_db) if m else None


def read_statement(sql: str, default_db: str) -> Statement | None:
    """The statement ``sql`` (the session's database ``default_db``); None for one that
    changes no table definition (a TRUNCATE, a CREATE INDEX, a GRANT, a CREATE DATABASE ...)."""
    sql = strip_comments(sql).rstrip(";")
    if _TRUNCATE_OR_INDEX.match(sql):
        return None
    if m := _CREATE.match(sql):
        rest = m.group("rest").strip()
        return CreateTable(split_name(m.group("name"), default_db), rest if rest.startswith("(") else None)
    if m := _ALTER.match(sql):
        return AlterTable(split_name(m.group("name"), default_db), m.group("rest"))
    if m := _DROP.match(sql):
        return DropTables(frozenset(split_name(n, default_db) for n in split_top_level(m.group("names"))))
    if m := _RENAME.match(sql):
        return RenameTables(_rename_pairs(m.group("pairs"), default_db))
    return None


def _rename_pairs(text: str, default_db: str) -> tuple[tuple[TableKey, TableKey], ...] | None:
    pairs = []
    for pair in split_top_level(text):
        names = re.split(r"\s+to\s+", pair, maxsplit=1, flags=re.I)
        if len(names) != 2:
            return None
        pairs.append((split_name(names[0], default_db), split_name(names[1], default_db)))
    return tuple(pairs)


# -- CREATE TABLE's body ------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnPart:
    name: str  # as written (quoted or not)
    definition: str


@dataclass(frozen=True)
class KeyPart:
    """An index or constraint of the column list: ``primary``, ``unique`` or ``other``."""

    kind: str
    #: Its key parts' column names; None when it has no column list.
    columns: tuple[str, ...] | None


@dataclass(frozen=True)
class TableOptions:
    charset: str | None = None  # declared, lower case
    collation: str | None = None
    comment: str | None = None


@dataclass(frozen=True)
class TableBody:
    parts: tuple[ColumnPart | KeyPart, ...]  # in the statement's order (PERIOD FOR left out)
    options: TableOptions


_KEY_WORDS = frozenset(("primary", "unique", "key", "index", "constraint", "foreign", "fulltext", "spatial", "check"))


def read_table_body(body: str) -> TableBody:
    """``(definitions) options`` of a CREATE TABLE; ValueError without a (closed) column list
    or for a column definition without a name."""
    toks = tokens(strip_comments(body))
    if not toks or toks[0].kind != "group":
        raise ValueError(f"no column list in {body[:80]!r}")
    closing(toks[0].text)  # ValueError when the list is not closed
    parts: list[ColumnPart | KeyPart] = []
    for part in split_top_level(toks[0].text[1:-1]):
        first = tokens(part)[:1]
        word = first[0].text.lower() if first and first[0].kind == "word" else ""
        if word in _KEY_WORDS:
            parts.append(_key_part(part))
        elif word != "period":  # PERIOD FOR SYSTEM_TIME (...): no column
            parts.append(ColumnPart(*name_and_definition(part)))
    return TableBody(tuple(parts), table_options(toks[1:]))


def name_and_definition(part: str) -> tuple[str, str]:
    """A column definition's name (as written) and the rest."""
    match = re.match(rf"\s*({IDENT})\s+(.*)$", part, re.S)
    if match is None:
        raise ValueError(f"cannot read a column definition from {part!r}")
    return match.group(1), match.group(2)


def _key_part(part: str) -> KeyPart:
    toks = tokens(part)
    words = [t.text.lower() if t.kind == "word" else "" for t in toks]
    if words[0] == "constraint":  # CONSTRAINT [symbol]
        words = words[1:] if words[1:2] in (["primary"], ["unique"], ["foreign"], ["check"]) else words[2:]
    kind = "primary" if words[:2] == ["primary", "key"] else "unique" if words[:1] == ["unique"] else "other"
    group = next((t.text for t in toks if t.kind == "group"), None)
    return KeyPart(kind, None if group is None else tuple(index_columns(group[1:-1])))


def index_columns(key_parts: str) -> list[str]:
    """The column names of an index's key parts (the text inside its parentheses): prefix
    lengths and ASC / DESC left off."""
    return [
        unquote(re.sub(r"\(\d+\)|\s+(asc|desc)\s*$", "", c, flags=re.I).strip()) for c in split_top_level(key_parts)
    ]


def table_options(toks: list[Token]) -> TableOptions:
    """CHARSET / CHARACTER SET, COLLATE and COMMENT of table options (``=`` or not)."""
    charset = collation = comment = None
    words = [t.text.lower() for t in toks]
    for index, word in enumerate(words):
        value_at = index + 2 if index + 1 < len(words) and words[index + 1] == "=" else index + 1
        value = strip_quotes(unquote(toks[value_at].text)) if value_at < len(toks) else None
        if word == "charset" or (word == "set" and index and words[index - 1] == "character"):
            charset = (value or "").lower() or None
        elif word == "collate":
            collation = value
        elif word == "comment":
            comment = value
    return TableOptions(charset, collation, comment)


# -- a column definition's type -----------------------------------------------------------------


@dataclass(frozen=True)
class DeclaredType:
    """The type a column definition starts with, and what follows it."""

    #: Upper case, as Debezium spells it: "INT", "DOUBLE PRECISION", "CHARACTER VARYING".
    name: str
    args: str | None  # the text inside its parentheses
    rest: list[Token]
    rest_text: str  # the definition's text after the type


_TWO_WORD_TYPES = frozenset(
    (
        *("CHAR VARYING", "CHARACTER VARYING", "LONG VARCHAR", "LONG VARBINARY", "NCHAR VARYING"),
        *("NCHAR VARCHAR", "NATIONAL CHAR", "NATIONAL CHARACTER", "NATIONAL VARCHAR"),
    )
)


def read_type(definition: str) -> DeclaredType:
    """The declared type of a column definition (its name left off); ValueError without one."""
    toks = tokens(definition)
    if not toks or toks[0].kind != "word":
        raise ValueError(f"no column type in {definition[:80]!r}")
    words = [toks[0].text.upper()]
    index = 1
    if index < len(toks) and toks[index].kind == "word" and f"{words[0]} {toks[index].text.upper()}" in _TWO_WORD_TYPES:
        words.append(toks[index].text.upper())
        index += 1
        if words[0] == "NATIONAL" and index < len(toks) and toks[index].text.upper() == "VARYING":
            words.append("VARYING")
            index += 1
    args = None
    if index < len(toks) and toks[index].kind == "group":
        args = toks[index].text[1:-1]
        index += 1
    if words[0] == "DOUBLE" and index < len(toks) and toks[index].text.upper() == "PRECISION":
        words.append("PRECISION")
        index += 1
        if index < len(toks) and toks[index].kind == "group":
            args = toks[index].text[1:-1]
            index += 1
    return DeclaredType(" ".join(words), args, toks[index:], definition[toks[index - 1].end :])
