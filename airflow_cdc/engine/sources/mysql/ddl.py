"""Applying DDL to table definitions, without a server: what the schema history needs to keep
the column list of each table right as of each point of the binlog.

Understood: ``CREATE TABLE`` (a column list), ``ALTER TABLE ... ADD / DROP / RENAME / MODIFY /
CHANGE [COLUMN]`` (several clauses, ``FIRST`` / ``AFTER``), ``ADD PRIMARY KEY``,
``DROP PRIMARY KEY``, ``RENAME TO``, ``RENAME TABLE a TO b``, ``DROP TABLE``. Column types are
turned into what ``information_schema.COLUMNS`` would say (:func:`column_row`), so one
``MySqlColumn.from_information_schema`` serves both. Anything else touching a table returns
``Unknown``: the caller reads that table from the server instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

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

    tables: tuple[tuple[str, str], ...]


_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"(?:{_IDENT}\s*\.\s*)?{_IDENT}"


def unquote(name: str) -> str:
    name = name.strip()
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def split_name(qualified: str, default_db: str) -> tuple[str, str]:
    parts = re.findall(_IDENT, qualified)
    return (unquote(parts[0]), unquote(parts[1])) if len(parts) == 2 else (default_db, unquote(parts[0]))


def strip_comments(sql: str) -> str:
    sql = re.sub(r"/\*(?!!).*?\*/", " ", sql, flags=re.S)
    sql = re.sub(r"/\*!\d*\s*(.*?)\*/", r"\1", sql, flags=re.S)  # versioned comments are code
    return re.sub(r"(--\s|#)[^\n]*", " ", sql).strip()


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside parentheses and quotes."""
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


# -- column types -> information_schema ---------------------------------------------------------

_ALIASES = {
    "integer": "int",
    "int4": "int",
    "int8": "bigint",
    "dec": "decimal",
    "numeric": "decimal",
    "fixed": "decimal",
    "real": "double",
    # Debezium's schema of a column a statement declares BOOL is a boolean (the server says
    # tinyint(1), which a snapshot reads: an int there).
    "bool": "boolean",
    "boolean": "boolean",
    "character": "char",
}
_INT_PRECISION = {"tinyint": 3, "smallint": 5, "mediumint": 7, "int": 10, "bigint": 19}
_TEXT_LENGTH = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295, "json": 4294967295}
_BLOB_LENGTH = {"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}
_TYPE = re.compile(
    r"(?P<base>[a-z0-9_]+(?:\s+precision|\s+varying)?)\s*(?:\((?P<args>(?:[^()']|'(?:[^']|'')*')*)\))?", re.I
)


_SPELLED_OUT = {"double precision": "double", "character varying": "varchar"}
_CHARACTER_TYPES = ("char", "varchar", "binary", "varbinary")
_CHARSET_TYPES = ("char", "varchar", "enum", "set", *_TEXT_LENGTH)
_DEFAULT_ARGS = {"decimal": "10,0", "bit": "1"}
_TEMPORAL_TYPES = ("datetime", "timestamp", "time")
_PRECISION_AND_SCALE: dict[str, Callable[[list[int]], tuple[int | None, int | None]]] = {
    "decimal": lambda n: ([*n, 10][0], [*n[1:], 0][0]),
    "float": lambda n: (n[0] if n else 12, n[1] if len(n) > 1 else None),
    "double": lambda n: (n[0] if n else 22, n[1] if len(n) > 1 else None),
    "bit": lambda n: (n[0] if n else 1, None),
}


def column_row(name: str, definition: str, table_charset: str) -> dict[str, Any]:
    """What information_schema.COLUMNS says of a column declared ``name definition``."""
    data_type, args, rest = _declared_type(name, definition)
    unsigned = " unsigned" in f" {rest}" or " zerofill" in f" {rest}"
    numbers = [] if data_type in ("enum", "set") else [int(a) for a in re.findall(r"\d+", args or "")]
    precision, scale = _precision_and_scale(data_type, numbers, unsigned)
    return {
        "COLUMN_NAME": name,
        "DATA_TYPE": data_type,
        "COLUMN_TYPE": _column_type(data_type, args, unsigned),
        "IS_NULLABLE": "NO" if "not null" in rest or "primary key" in rest else "YES",
        "CHARACTER_SET_NAME": _charset(data_type, rest, table_charset),
        "CHARACTER_MAXIMUM_LENGTH": _max_length(data_type, numbers),
        "NUMERIC_PRECISION": precision,
        "NUMERIC_SCALE": scale,
        "DATETIME_PRECISION": (numbers[0] if numbers else 0) if data_type in _TEMPORAL_TYPES else None,
        "COLUMN_DEFAULT": _default(definition),
    }


_DEFAULT = re.compile(r"\bdefault\s+(?P<literal>'(?:[^'\\]|''|\\.)*'|[-+\w.:]+)", re.I)


def _default(definition: str) -> str | None:
    """COLUMN_DEFAULT as MariaDB writes it: a quoted literal as declared, NULL, or the bare word
    (a number, an expression's name). Only a temporal default is read (a zero date's stand-in,
    ``types.binlog_null_value``)."""
    match = _DEFAULT.search(definition)
    if match is None:
        return None
    literal = match.group("literal")
    return "NULL" if literal.upper() == "NULL" else literal


def _declared_type(name: str, definition: str) -> tuple[str, str | None, str]:
    """The type's information_schema name, its arguments' text, and the rest of the definition
    (lower case)."""
    text = definition.strip()
    match = _TYPE.match(text)
    if match is None:
        raise ValueError(f"cannot read the type of column {name}: {definition!r}")
    base = re.sub(r"\s+", " ", match.group("base").lower())
    base = _SPELLED_OUT.get(base, base)
    args = "1" if base in ("bool", "boolean") else match.group("args")
    if base == "float" and args and args.strip().isdigit() and int(args) > 24:
        return "double", None, text[match.end() :].lower()  # float(p) with p > 24 is a double
    return _ALIASES.get(base, base), args, text[match.end() :].lower()


def _column_type(data_type: str, args: str | None, unsigned: bool) -> str:
    if data_type == "boolean":
        return "tinyint(1)"
    args = args or _DEFAULT_ARGS.get(data_type)
    return data_type + (f"({args})" if args else "") + (" unsigned" if unsigned else "")


def _precision_and_scale(data_type: str, numbers: list[int], unsigned: bool) -> tuple[int | None, int | None]:
    if data_type in _INT_PRECISION:
        return _INT_PRECISION[data_type] + (data_type == "bigint" and unsigned), 0
    read = _PRECISION_AND_SCALE.get(data_type)
    return read(numbers) if read else (None, None)


def _max_length(data_type: str, numbers: list[int]) -> int | None:
    if data_type in _CHARACTER_TYPES:
        return numbers[0] if numbers else 1
    return _TEXT_LENGTH.get(data_type, _BLOB_LENGTH.get(data_type))


def _charset(data_type: str, rest: str, table_charset: str) -> str | None:
    if data_type == "json":
        return "utf8mb4"
    if data_type not in _CHARSET_TYPES:
        return None
    declared = re.search(r"(?:character\s+set|charset)\s+(\w+)", rest)
    if declared:
        return declared.group(1)
    return "binary" if " binary" in f" {rest}" else table_charset


def column(name: str, definition: str, table_charset: str) -> MySqlColumn:
    return MySqlColumn.from_information_schema(column_row(unquote(name), definition, table_charset))


# -- statements ---------------------------------------------------------------------------------

_CREATE = re.compile(
    rf"^create\s+(?:or\s+replace\s+)?(?:temporary\s+)?table\s+(?:if\s+not\s+exists\s+)?(?P<name>{_QUALIFIED})\s*(?P<rest>.*)$",
    re.I | re.S,
)
_ALTER = re.compile(
    rf"^alter\s+(?:online\s+|ignore\s+)*table\s+(?:if\s+exists\s+)?(?P<name>{_QUALIFIED})\s*(?P<rest>.*)$", re.I | re.S
)
_DROP = re.compile(
    r"^drop\s+(?:temporary\s+)?tables?\s+(?:if\s+exists\s+)?(?P<names>.*?)(?:\s+(?:restrict|cascade))?$", re.I | re.S
)
_RENAME = re.compile(r"^rename\s+tables?\s+(?P<pairs>.*)$", re.I | re.S)
_TRUNCATE_OR_INDEX = re.compile(
    r"^(?:truncate|create\s+(?:unique\s+|fulltext\s+|spatial\s+)?index|drop\s+index)\b", re.I
)
_KEY_WORDS = re.compile(
    r"^(?:constraint\b|primary\s+key|unique\b|key\b|index\b|fulltext\b|spatial\b|foreign\s+key|check\b|period\b)", re.I
)


@dataclass
class Changes:
    """What a statement did to the tables: new or changed definitions, dropped names."""

    tables: dict[tuple[str, str], Table]
    dropped: set[tuple[str, str]]


def apply(sql: str, default_db: str, tables: dict[tuple[str, str], Table]) -> Changes | Unknown | None:
    """What ``sql`` does to ``tables`` (definitions by (database, table)); None when it changes
    no table definition (a CREATE INDEX, a GRANT, a CREATE DATABASE ...)."""
    sql = strip_comments(sql).rstrip(";")
    if _TRUNCATE_OR_INDEX.match(sql):
        return None
    for pattern, statement in _STATEMENTS:
        if m := pattern.match(sql):
            return statement(m, default_db, tables)
    return None


_Tables = dict[tuple[str, str], Table]


def _create_table(m: re.Match[str], default_db: str, tables: _Tables) -> Changes | Unknown:
    key = split_name(m.group("name"), default_db)
    rest = m.group("rest").strip()
    if rest.lower().startswith(("like", "select", "as")) or not rest.startswith("("):
        return Unknown((key,))
    return Changes({key: _create(key, rest)}, set())


def _alter_table(m: re.Match[str], default_db: str, tables: _Tables) -> Changes | Unknown:
    key = split_name(m.group("name"), default_db)
    if key not in tables:
        return Unknown((key,))
    return _alter(tables[key], m.group("rest"), default_db)


def _drop_tables(m: re.Match[str], default_db: str, tables: _Tables) -> Changes:
    return Changes({}, {split_name(n, default_db) for n in split_top_level(m.group("names"))})


def _rename_tables(m: re.Match[str], default_db: str, tables: _Tables) -> Changes | Unknown:
    changes = Changes({}, set())
    current = dict(tables)
    for pair in split_top_level(m.group("pairs")):
        names = re.split(r"\s+to\s+", pair, maxsplit=1, flags=re.I)
        if len(names) != 2:
            return Unknown(())
        old_key, new_key = split_name(names[0], default_db), split_name(names[1], default_db)
        if old_key not in current:
            return Unknown((old_key, new_key))
        table = replace(current.pop(old_key), database=new_key[0], name=new_key[1])
        current[new_key] = table
        changes.dropped.add(old_key)
        changes.dropped.discard(new_key)
        changes.tables.pop(old_key, None)
        changes.tables[new_key] = table
    return changes


_STATEMENTS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], str, _Tables], Changes | Unknown]], ...] = (
    (_CREATE, _create_table),
    (_ALTER, _alter_table),
    (_DROP, _drop_tables),
    (_RENAME, _rename_tables),
)


def _create(key: tuple[str, str], body: str) -> Table:
    inner = body[1 : closing(body)]
    options = body[closing(body) + 1 :].lower()
    charset_match = re.search(r"(?:character\s+set|charset)\s*=?\s*(\w+)", options)
    charset = charset_match.group(1) if charset_match else "utf8mb4"
    columns, primary = [], []
    for part in split_top_level(inner):
        if _KEY_WORDS.match(part):
            pk = re.search(r"primary\s+key\s*(?:using\s+\w+\s*)?\((?P<cols>[^)]*)\)", part, re.I)
            if pk:
                primary = [unquote(re.sub(r"\(\d+\)", "", c)) for c in split_top_level(pk.group("cols"))]
            continue
        name, definition = _name_and_rest(part)
        columns.append(column(name, definition, charset))
        if re.search(r"\bprimary\s+key\b", definition, re.I):
            primary = [unquote(name)]
    if primary:
        columns = [replace(c, nullable=False) if c.name in primary else c for c in columns]
    return Table(key[0], key[1], tuple(columns), tuple(primary), charset)


def closing(text: str, start: int = 0) -> int:
    """The index of the parenthesis closing the first one at or after ``start`` (quotes
    skipped); ValueError when there is none."""
    depth, quote = 0, ""
    for index in range(start, len(text)):
        ch = text[index]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"unbalanced parentheses in {text[:80]!r}")


def _name_and_rest(part: str) -> tuple[str, str]:
    m = re.match(rf"\s*({_IDENT})\s+(.*)$", part, re.S)
    if m is None:
        raise ValueError(f"cannot read a column definition from {part!r}")
    return m.group(1), m.group(2)


def _place(columns: list[MySqlColumn], new: MySqlColumn, where: str) -> None:
    where = where.strip().lower()
    if where.startswith("first"):
        columns.insert(0, new)
    elif m := re.match(rf"after\s+({_IDENT})", where, re.I):
        after = unquote(m.group(1))
        index = next(i for i, c in enumerate(columns) if c.name.lower() == after.lower())
        columns.insert(index + 1, new)
    else:
        columns.append(new)


_POSITION = re.compile(rf"\s+(first|after\s+{_IDENT})\s*$", re.I)


@dataclass
class _Alteration:
    """A table's definition while the clauses of one ALTER TABLE are applied in turn."""

    table: Table
    default_db: str
    columns: list[MySqlColumn]
    key: list[str]
    name: tuple[str, str]
    where: str = ""  # the clause's FIRST / AFTER column, if any

    def index_of(self, column_name: str) -> int | None:
        return next((i for i, c in enumerate(self.columns) if c.name.lower() == column_name.lower()), None)


def _alter(table: Table, clauses: str, default_db: str) -> Changes | Unknown:
    name = (table.database, table.name)
    alteration = _Alteration(table, default_db, list(table.columns), list(table.key), name)
    for clause in split_top_level(clauses):
        if not _alter_clause(alteration, clause):
            return Unknown((name,))
    primary = set(alteration.key)
    columns = tuple(replace(c, nullable=False) if c.name in primary else c for c in alteration.columns)
    new_name = alteration.name
    changed = replace(table, database=new_name[0], name=new_name[1], columns=columns, key=tuple(alteration.key))
    return Changes({new_name: changed}, {name} - {new_name})


def _alter_clause(alteration: _Alteration, clause: str) -> bool:
    """Apply one clause; False when it is not understood."""
    position = _POSITION.search(clause)
    body = clause[: position.start()] if position else clause
    alteration.where = position.group(1) if position else ""
    for pattern, action in _ALTER_ACTIONS:
        if m := pattern.match(body):
            return action(alteration, m)
    return False


def _add_primary_key(alteration: _Alteration, m: re.Match[str]) -> bool:
    if pk := re.search(r"\((?P<cols>[^)]*)\)", m.string):
        alteration.key = [unquote(re.sub(r"\(\d+\)", "", c)) for c in split_top_level(pk.group("cols"))]
    return True


def _drop_primary_key(alteration: _Alteration, m: re.Match[str]) -> bool:
    alteration.key = []
    return True


def _nothing_shown(alteration: _Alteration, m: re.Match[str]) -> bool:
    return True  # an index, a constraint, a default, a table option: nothing a change event shows


def _add_column(alteration: _Alteration, m: re.Match[str]) -> bool:
    _place(alteration.columns, column(m.group(1), m.group(2), alteration.table.charset), alteration.where)
    return True


def _drop_column(alteration: _Alteration, m: re.Match[str]) -> bool:
    gone = unquote(m.group(1)).lower()
    alteration.columns = [c for c in alteration.columns if c.name.lower() != gone]
    alteration.key = [k for k in alteration.key if k.lower() != gone]
    return True


def _rename_column(alteration: _Alteration, m: re.Match[str]) -> bool:
    old, new = unquote(m.group(1)), unquote(m.group(2))
    alteration.columns = [replace(c, name=new) if c.name.lower() == old.lower() else c for c in alteration.columns]
    alteration.key = [new if k.lower() == old.lower() else k for k in alteration.key]
    return True


def _modify_column(alteration: _Alteration, m: re.Match[str]) -> bool:
    old = unquote(m.group(1))
    return _redefine_column(alteration, old, old, m.group(2))


def _change_column(alteration: _Alteration, m: re.Match[str]) -> bool:
    new_name, definition = _name_and_rest(m.group(2))
    return _redefine_column(alteration, unquote(m.group(1)), new_name, definition)


def _redefine_column(alteration: _Alteration, old: str, new_name: str, definition: str) -> bool:
    index = alteration.index_of(old)
    if index is None:
        return False
    replacement = column(new_name, definition, alteration.table.charset)
    if old in alteration.key:
        replacement = replace(replacement, nullable=False)
        alteration.key = [unquote(new_name) if k == old else k for k in alteration.key]
    if alteration.where:
        alteration.columns.pop(index)
        _place(alteration.columns, replacement, alteration.where)
    else:
        alteration.columns[index] = replacement
    return True


def _rename_table(alteration: _Alteration, m: re.Match[str]) -> bool:
    alteration.name = split_name(m.group(1), alteration.default_db)
    return True


_COLUMN = r"(?:column\s+)?"
# Tried in order: ADD PRIMARY KEY before ADD <column>, index and constraint clauses before columns.
_ALTER_ACTIONS: tuple[tuple[re.Pattern[str], Callable[[_Alteration, re.Match[str]], bool]], ...] = tuple(
    (re.compile(pattern, re.I | re.S), action)
    for pattern, action in (
        (r"add\s+(?:constraint\b.*?\s+)?primary\s+key", _add_primary_key),
        (r"drop\s+primary\s+key", _drop_primary_key),
        (r"(add|drop)\s+(unique|key|index|fulltext|spatial|constraint|foreign|check|partition)\b", _nothing_shown),
        (rf"add\s+{_COLUMN}(?:if\s+not\s+exists\s+)?({_IDENT})\s+(.*)$", _add_column),
        (rf"drop\s+{_COLUMN}(?:if\s+exists\s+)?({_IDENT})\s*$", _drop_column),
        (rf"rename\s+column\s+({_IDENT})\s+to\s+({_IDENT})\s*$", _rename_column),
        (rf"modify\s+{_COLUMN}(?:if\s+exists\s+)?({_IDENT})\s+(.*)$", _modify_column),
        (rf"change\s+{_COLUMN}(?:if\s+exists\s+)?({_IDENT})\s+(.*)$", _change_column),
        (rf"rename\s+(?:to\s+|as\s+)?({_QUALIFIED})\s*$", _rename_table),
        (
            r"(alter\s+(column\s+)?\S+\s+(set|drop)\s+default|engine|auto_increment|comment|row_format|"
            r"algorithm|lock|force|order\s+by|convert\s+to|(default\s+)?(character\s+set|charset|collate))",
            _nothing_shown,
        ),
    )
)
