"""Tables as Debezium's MySQL/MariaDB DDL parser models them, for the ``tableChanges`` of schema
change events: pure functions over DDL text, no server.

Why a model of its own beside the schema history's (``ddl.py``): the history describes columns
as ``information_schema`` does, which row decoding needs; Debezium's events describe them as
its ANTLR parser read the statement's text (``ColumnDefinitionParserListener``,
``DefaultValueParserListener``, ``DataTypeResolver``): the type's name as written (``INTEGER``,
``BOOL``, ``INT UNSIGNED ZEROFILL``), its first argument as ``length`` (an ``int(11)``'s display
width; nothing for a bare ``int``), ``DEFAULT`` literals unquoted, ``CURRENT_TIMESTAMP`` as
``1970-01-01 00:00:00``, an ENUM's options with their quotes. The snapshot's tables are read
from ``SHOW CREATE TABLE``, as Debezium's snapshot reads them; streamed DDL is applied clause by
clause (``alter``). Struct fields follow ``ConnectTableChangeSerializer`` (Debezium 3.5).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_cdc.engine.sources.mysql.ddl import closing, split_top_level, strip_comments, unquote

# java.sql.Types, as MariaDbAntlrDdlParser's DataTypeResolver registers them.
_JDBC: dict[str, int] = {
    **dict.fromkeys(("CHAR", "CHARACTER", "ENUM", "SET"), 1),
    **dict.fromkeys(("VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "LONG", "LONG VARCHAR"), 12),
    **dict.fromkeys(("CHAR VARYING", "CHARACTER VARYING"), 12),
    **dict.fromkeys(("NCHAR", "NATIONAL CHAR", "NATIONAL CHARACTER"), -15),
    **dict.fromkeys(("NVARCHAR", "NCHAR VARYING", "NATIONAL VARCHAR", "NCHAR VARCHAR"), -9),
    **dict.fromkeys(("NATIONAL CHAR VARYING", "NATIONAL CHARACTER VARYING"), -9),
    **dict.fromkeys(("TINYINT", "INT1", "SMALLINT", "INT2"), 5),
    **dict.fromkeys(("MEDIUMINT", "INT3", "MIDDLEINT", "INT", "INTEGER", "INT4", "YEAR"), 4),
    **dict.fromkeys(("BIGINT", "INT8", "SERIAL"), -5),
    "REAL": 7,
    **dict.fromkeys(("DOUBLE", "FLOAT8"), 8),
    **dict.fromkeys(("FLOAT", "FLOAT4"), 6),
    **dict.fromkeys(("DECIMAL", "DEC", "FIXED"), 3),
    "NUMERIC": 2,
    "BIT": -7,
    "TIME": 92,
    "TIMESTAMP": 2014,
    "DATETIME": 93,
    "DATE": 91,
    "BINARY": -2,
    "VARBINARY": -3,
    **dict.fromkeys(("BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "LONG VARBINARY"), 2004),
    **dict.fromkeys(("BOOL", "BOOLEAN"), 16),
    **dict.fromkeys(
        ("GEOMETRY", "GEOMETRYCOLLECTION", "GEOMCOLLECTION", "LINESTRING", "MULTILINESTRING", "MULTIPOINT"), 1111
    ),
    **dict.fromkeys(("MULTIPOLYGON", "POINT", "POLYGON", "JSON", "UUID", "VECTOR"), 1111),
}
#: Types whose name may take BINARY (``varchar(10) binary``: Debezium's ``VARCHAR BINARY``).
_TAKES_BINARY = frozenset(
    ("CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "NCHAR", "NVARCHAR", "ENUM", "SET")
)
_NUMERIC = frozenset(
    (
        *("TINYINT", "INT1", "SMALLINT", "INT2", "MEDIUMINT", "INT3", "MIDDLEINT", "INT", "INTEGER", "INT4"),
        *("BIGINT", "INT8", "REAL", "DOUBLE", "FLOAT8", "FLOAT", "FLOAT4", "DECIMAL", "DEC", "FIXED", "NUMERIC"),
    )
)
#: (length, scale) a type has without arguments (DataTypeEntry's default dimensions).
_DEFAULT_DIMENSIONS = {
    **dict.fromkeys(("DECIMAL", "DEC", "FIXED", "NUMERIC"), (10, 0)),
    "BIT": (1, None),
    "VECTOR": (2048, None),
}
#: Types whose column takes the table's charset (Column.typeUsesCharset: CHAR, VARCHAR, NCHAR...).
_CHARSET_JDBC = frozenset((1, 12, -1, 2005, -15, -9, -16, 2011, 70, 2009))
_TWO_WORD_TYPES = frozenset(
    (
        *("CHAR VARYING", "CHARACTER VARYING", "LONG VARCHAR", "LONG VARBINARY", "NCHAR VARYING"),
        *("NCHAR VARCHAR", "NATIONAL CHAR", "NATIONAL CHARACTER", "NATIONAL VARCHAR"),
    )
)
_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^'\\]|''|\\.)*'|\"(?:[^\"\\]|\"\"|\\.)*\")|(?P<bits>[bBxX]'[^']*')"
    r"|(?P<ident>`(?:[^`]|``)*`)|(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+)"
    r"|(?P<word>[A-Za-z_$][\w$]*)|(?P<open>\()|(?P<other>[^\s(]))",
    re.S,
)


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens; a parenthesised group is one ``group`` token, its parentheses kept."""
    out: list[tuple[str, str]] = []
    index = 0
    while index < len(text):
        match = _TOKEN.match(text, index)
        if match is None or match.end() == index:
            break
        kind = match.lastgroup or "other"
        if kind == "open":
            end = _group_end(text, match.start("open"))
            out.append(("group", text[match.start("open") : end]))
            index = end
            continue
        out.append((kind, match.group(kind)))
        index = match.end()
    return out


def _group_end(text: str, start: int) -> int:
    try:
        return closing(text, start) + 1
    except ValueError:  # unbalanced: the group runs to the end
        return len(text)


def _strip_quotes(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _charset_of_collation(collation: str) -> str:
    return collation.split("_", 1)[0].lower()


@dataclass
class Column:
    """One column as Debezium models it (the ``columns`` struct of ``tableChanges``)."""

    name: str
    type_name: str
    jdbc_type: int
    length: int | None = None
    scale: int | None = None
    charset: str | None = None
    optional: bool = True
    auto_incremented: bool = False
    comment: str | None = None
    default: str | None = None
    enum_values: list[str] | None = None
    #: Declared PRIMARY KEY / UNIQUE in the column's own definition.
    primary: bool = False
    unique: bool = False

    def struct(self, position: int) -> dict[str, Any]:
        return {
            "name": self.name,
            "jdbcType": self.jdbc_type,
            "nativeType": None,
            "typeName": self.type_name,
            "typeExpression": self.type_name,
            "charsetName": self.charset,
            "length": self.length,
            "scale": self.scale,
            "position": position,
            "optional": self.optional,
            "autoIncremented": self.auto_incremented,
            "generated": self.auto_incremented,  # Debezium marks AUTO_INCREMENT columns generated
            "comment": self.comment,
            "defaultValueExpression": self.default,
            "enumValues": self.enum_values or None,
        }


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


# -- columns ------------------------------------------------------------------------------------


def column(name: str, definition: str, table_charset: str | None) -> Column:
    """A column declared ``name definition`` in a table whose default charset is ``table_charset``."""
    toks = tokens(definition)
    type_name, args, rest = _type(toks)
    jdbc = _JDBC.get(type_name.split(" ")[0] if type_name not in _JDBC else type_name, 1111)
    col = Column(unquote(name), type_name, jdbc)
    _dimensions(col, type_name.split(" ")[0] if type_name not in _JDBC else type_name, args)
    charset, suffix = _attributes(col, rest)
    if suffix:
        col.type_name = f"{col.type_name} {suffix}"
    if col.jdbc_type in (-15, -9):
        col.charset = "utf8"  # NCHAR and NVARCHAR: always utf8
        if col.jdbc_type == -15 and col.length is None:
            col.length = 1
    elif col.jdbc_type in _CHARSET_JDBC:
        col.charset = charset or table_charset
    if type_name == "SERIAL":
        col.type_name, col.auto_incremented, col.unique = "BIGINT UNSIGNED", True, True
        col.optional = False
    return col


def _type(toks: list[tuple[str, str]]) -> tuple[str, str | None, list[tuple[str, str]]]:
    """The type's base name (upper case, as Debezium spells it), its argument group, the rest."""
    if not toks or toks[0][0] != "word":
        raise ValueError(f"no column type in {' '.join(t for _, t in toks)[:80]!r}")
    words = [toks[0][1].upper()]
    index = 1
    if index < len(toks) and toks[index][0] == "word":
        pair = f"{words[0]} {toks[index][1].upper()}"
        if pair in _TWO_WORD_TYPES:
            words.append(toks[index][1].upper())
            index += 1
            if words[0] == "NATIONAL" and index < len(toks) and toks[index][1].upper() == "VARYING":
                words.append("VARYING")
                index += 1
    args = None
    if index < len(toks) and toks[index][0] == "group":
        args = toks[index][1][1:-1]
        index += 1
    if words[0] == "DOUBLE" and index < len(toks) and toks[index][1].upper() == "PRECISION":
        words.append("PRECISION")
        index += 1
        if index < len(toks) and toks[index][0] == "group":
            args = toks[index][1][1:-1]
            index += 1
    return " ".join(words), args, toks[index:]


def _dimensions(col: Column, base: str, args: str | None) -> None:
    if base in ("ENUM", "SET"):
        options = [t for kind, t in tokens(args or "") if kind == "string"]
        col.enum_values = options  # Debezium keeps each option's quotes
        col.length = max(0, len(options) * 2 - 1) if base == "SET" else 1
        return
    numbers = [a.strip() for a in (args or "").split(",") if a.strip()]
    if numbers:
        first = numbers[0]
        if "." in first:  # float(.5)-like: MariaDB's default 10
            whole = first.split(".")[0]
            col.length = int(whole) if whole and int(whole) else 10
        elif first.isdigit():
            col.length = min(int(first), 2**31 - 1)
        if len(numbers) > 1 and numbers[1].isdigit():
            col.scale = int(numbers[1])
    default_length, default_scale = _DEFAULT_DIMENSIONS.get(base, (None, None))
    if col.length is None:
        col.length = default_length
    if col.scale is None:
        col.scale = default_scale


@dataclass
class _Definition:
    """A column definition's attributes while they are read, token by token."""

    col: Column
    rest: list[tuple[str, str]]
    words: list[str]
    charset: str | None = None
    suffix: list[str] = field(default_factory=list)

    def ahead(self, index: int) -> str:
        return self.words[index + 1] if index + 1 < len(self.words) else ""

    def value(self, index: int) -> str | None:
        return _strip_quotes(unquote(self.rest[index][1])) if index < len(self.rest) else None


def _suffix(d: _Definition, index: int) -> int:
    base = d.col.type_name.split(" ")[0]
    word = d.words[index]
    if (word != "binary" and base in _NUMERIC) or (word == "binary" and base in _TAKES_BINARY):
        d.suffix.append(word.upper())
    return index


def _not_null(d: _Definition, index: int) -> int:
    if d.ahead(index) != "null":
        return index
    d.col.optional = False
    return index + 1


def _null(d: _Definition, index: int) -> int:
    d.col.optional = True
    return index


def _auto_increment(d: _Definition, index: int) -> int:
    d.col.auto_incremented = True
    return index


def _comment(d: _Definition, index: int) -> int:
    d.col.comment = d.value(index + 1)
    return index + 1


def _primary_key(d: _Definition, index: int) -> int:
    d.col.primary, d.col.optional = True, False
    return index + (d.words[index] == "primary" and d.ahead(index) == "key")


def _unique(d: _Definition, index: int) -> int:
    d.col.unique = True
    return index + (d.ahead(index) == "key")


def _charset(d: _Definition, index: int) -> int:
    index += d.words[index] == "character"  # CHARACTER SET name
    d.charset = (d.value(index + 1) or "").lower() or d.charset
    return index + 1


def _collate(d: _Definition, index: int) -> int:
    collation = d.value(index + 1)
    d.charset = d.charset or (_charset_of_collation(collation) if collation else None)
    return index + 1


def _on_update(d: _Definition, index: int) -> int:
    if d.ahead(index) != "update":
        return index
    return index + (3 if index + 3 < len(d.rest) and d.rest[index + 3][0] == "group" else 2)


def _default_value(d: _Definition, index: int) -> int:
    return _default(d.col, d.rest, index + 1)


_ATTRIBUTES: dict[str, Callable[[_Definition, int], int]] = {
    **dict.fromkeys(("signed", "unsigned", "zerofill", "binary"), _suffix),
    "not": _not_null,
    "null": _null,
    "default": _default_value,
    "auto_increment": _auto_increment,
    "comment": _comment,
    **dict.fromkeys(("primary", "key"), _primary_key),
    "unique": _unique,
    **dict.fromkeys(("charset", "character"), _charset),
    "collate": _collate,
    "on": _on_update,
}


def _attributes(col: Column, rest: list[tuple[str, str]]) -> tuple[str | None, str]:
    """Apply the definition's attributes; the declared charset and the type's suffix words."""
    d = _Definition(col, rest, [t.lower() if kind == "word" else "" for kind, t in rest])
    index = 0
    while index < len(rest):
        handler = _ATTRIBUTES.get(d.words[index])
        if handler is not None:
            index = handler(d, index)
        index += 1
    ordered = [w for w in ("SIGNED", "UNSIGNED", "ZEROFILL", "BINARY") if w in d.suffix]
    if "ZEROFILL" in ordered and "UNSIGNED" not in ordered:
        ordered.insert(ordered.index("ZEROFILL"), "UNSIGNED")  # ZEROFILL implies UNSIGNED
    if "SIGNED" in ordered and ("UNSIGNED" in ordered or "ZEROFILL" in ordered):
        ordered.remove("SIGNED")  # DataTypeBuilder.adjustSignedUnsignedZerofill
    return d.charset, " ".join(ordered)


_NOW = ("current_timestamp", "now", "localtime", "localtimestamp")


def _default(col: Column, rest: list[tuple[str, str]], index: int) -> int:
    """DefaultValueParserListener: the index of the default's last token."""
    if index >= len(rest):
        return index
    kind, text = rest[index]
    sign = ""
    if kind == "other" and text in "+-" and index + 1 < len(rest):
        sign, index = text, index + 1
        kind, text = rest[index]
    lowered = text.lower()
    if kind == "word" and lowered == "null":
        col.default = None
    elif kind == "string":
        col.default = sign + _strip_quotes(text)
        # a literal followed by COLLATE keeps the literal only
    elif kind == "number":
        col.default = sign + text
    elif kind == "bits":
        col.default = text[2:-1] if text[0] in "bB" else col.default
    elif kind == "word" and lowered in ("true", "false"):
        col.default = text
    elif kind == "word" and lowered in _NOW:
        arguments = rest[index + 1][1] if index + 1 < len(rest) and rest[index + 1][0] == "group" else ""
        col.default = "1970-01-01 00:00:00" if lowered in ("current_timestamp", "now") else text + arguments
        index += bool(arguments)
    elif kind == "group":
        col.default = None  # an expression: Debezium handles it as NULL
    return index


# -- tables -------------------------------------------------------------------------------------


def create_table(database: str, name: str, body: str, default_charset: str | None) -> Table:
    """A table from ``CREATE TABLE name body``'s body: ``(definitions) options``."""
    toks = tokens(strip_comments(body))
    if not toks or toks[0][0] != "group":
        raise ValueError(f"no column list in CREATE TABLE {name}")
    charset, comment = _table_options(toks[1:])
    table = Table(database, name, charset=charset or default_charset, comment=comment)
    uniques: list[list[str]] = []
    for part in split_top_level(toks[0][1][1:-1]):
        first = part.split(None, 1)[0].lower() if part.strip() else ""
        if first in ("primary", "unique", "key", "index", "constraint", "foreign", "fulltext", "spatial", "check"):
            _table_constraint(table, part, uniques)
            continue
        if first == "period":
            continue
        column_name, definition = _name_and_definition(part)
        col = column(column_name, definition, table.charset)
        table.columns.append(col)
        if not table.key and (col.primary or (col.unique and not col.optional)):
            table.key = [col.name]
    _key_from_unique(table, uniques)
    return table


def _name_and_definition(part: str) -> tuple[str, str]:
    match = re.match(r"\s*(`(?:[^`]|``)+`|[\w$]+)\s+(.*)$", part, re.S)
    if match is None:
        raise ValueError(f"cannot read a column definition from {part!r}")
    return match.group(1), match.group(2)


def _table_options(toks: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    charset = collation = comment = None
    words = [t.lower() for _, t in toks]
    for index, word in enumerate(words):
        value_at = index + 2 if index + 1 < len(words) and words[index + 1] == "=" else index + 1
        value = _strip_quotes(unquote(toks[value_at][1])) if value_at < len(toks) else None
        if word == "charset" or (word == "set" and index and words[index - 1] == "character"):
            charset = (value or "").lower() or None
        elif word == "collate":
            collation = value
        elif word == "comment":
            comment = value
    if charset is None and collation:
        charset = _charset_of_collation(collation)
    return charset, comment


def _index_columns(group: str) -> list[str]:
    return [unquote(re.sub(r"\(\d+\)|\s+(asc|desc)\s*$", "", c, flags=re.I).strip()) for c in split_top_level(group)]


def _table_constraint(table: Table, part: str, uniques: list[list[str]]) -> None:
    groups = [t for kind, t in tokens(part) if kind == "group"]
    lowered = part.lower()
    if not groups:
        return
    if re.match(r"\s*(constraint\s+\S+\s+)?primary\s+key", lowered):
        table.key = _index_columns(groups[0][1:-1])
        for col in table.columns:
            if col.name in table.key:
                col.optional = False
    elif re.match(r"\s*(constraint\s+\S+\s+)?unique\b", lowered):
        uniques.append(_index_columns(groups[0][1:-1]))


def _key_from_unique(table: Table, uniques: list[list[str]]) -> None:
    """Without a primary key, the first unique key of NOT NULL columns stands for it."""
    for names in uniques:
        if table.key:
            return
        found = [table.columns[i] for i in (table.index_of(n) for n in names) if i is not None]
        if len(found) == len(names) and not any(c.optional for c in found):
            table.key = [c.name for c in found]


# -- ALTER TABLE --------------------------------------------------------------------------------

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_POSITION = re.compile(rf"\s+(first|after\s+{_IDENT})\s*$", re.I)
_COLUMN = r"(?:column\s+)?"
_CONSTRAINT = r"(?:constraint\b\s*(?:`[^`]*`|\w+)?\s+)?"


def alter(table: Table, clauses: str) -> Table | None:
    """The table after ``ALTER TABLE name clauses``; None when a clause is not understood."""
    altered = table.copy()
    for clause in split_top_level(strip_comments(clauses)):
        if clause and not _alter_clause(altered, clause.strip()):
            return None
    return altered


def _alter_clause(table: Table, clause: str) -> bool:
    position = _POSITION.search(clause)
    body = clause[: position.start()] if position else clause
    where = position.group(1) if position else ""
    for pattern, action in _ACTIONS:
        if m := pattern.match(body):
            return action(table, m, where)
    return False


def _place(table: Table, col: Column, where: str, index: int | None = None) -> None:
    if index is not None:
        table.columns.pop(index)
    if where.lower().startswith("first"):
        table.columns.insert(0, col)
    elif where:
        after = table.index_of(unquote(where.split(None, 1)[1]))
        table.columns.insert(len(table.columns) if after is None else after + 1, col)
    elif index is not None:
        table.columns.insert(index, col)
    else:
        table.columns.append(col)


def _add_columns(table: Table, m: re.Match[str], where: str) -> bool:
    group = m.group(1).strip()
    parts = split_top_level(group[1:-1]) if group.startswith("(") else [group]
    for part in parts:
        name, definition = _name_and_definition(part)
        col = column(name, definition, table.charset)
        _place(table, col, where)
        if col.primary:
            table.key = [col.name]
    return True


def _add_primary_key(table: Table, m: re.Match[str], where: str) -> bool:
    table.key = _index_columns(m.group(1)[1:-1])
    for col in table.columns:
        if col.name in table.key:
            col.optional = False
    return True


def _add_unique(table: Table, m: re.Match[str], where: str) -> bool:
    _key_from_unique(table, [_index_columns(m.group(1)[1:-1])])
    return True


def _drop_primary_key(table: Table, m: re.Match[str], where: str) -> bool:
    table.key = []
    return True


def _drop_column(table: Table, m: re.Match[str], where: str) -> bool:
    gone = unquote(m.group(1)).lower()
    table.columns = [c for c in table.columns if c.name.lower() != gone]
    table.key = [k for k in table.key if k.lower() != gone]
    return True


def _rename_column(table: Table, m: re.Match[str], where: str) -> bool:
    index = table.index_of(unquote(m.group(1)))
    if index is None:
        return False
    old, new = table.columns[index].name, unquote(m.group(2))
    table.columns[index].name = new
    table.key = [new if k == old else k for k in table.key]
    return True


def _redefine(table: Table, old: str, new_name: str, definition: str, where: str) -> bool:
    index = table.index_of(unquote(old))
    if index is None:
        return False
    col = column(new_name, definition, table.charset)
    previous = table.columns[index].name
    if previous in table.key:
        col.optional = False
        table.key = [col.name if k == previous else k for k in table.key]
    if where:
        _place(table, col, where, index)
    else:
        table.columns[index] = col
    return True


def _modify_column(table: Table, m: re.Match[str], where: str) -> bool:
    return _redefine(table, m.group(1), m.group(1), m.group(2), where)


def _change_column(table: Table, m: re.Match[str], where: str) -> bool:
    new_name, definition = _name_and_definition(m.group(2))
    return _redefine(table, m.group(1), new_name, definition, where)


def _set_default(table: Table, m: re.Match[str], where: str) -> bool:
    index = table.index_of(unquote(m.group(1)))
    if index is None:
        return False
    col = table.columns[index]
    if m.group(2).lower().startswith("drop"):
        col.default = None
    else:
        _default(col, tokens(m.group(3) or ""), 0)
    return True


def _table_charset(table: Table, m: re.Match[str], where: str) -> bool:
    charset, _ = _table_options(tokens(m.group(0)))
    table.charset = charset or table.charset
    return True


def _table_comment(table: Table, m: re.Match[str], where: str) -> bool:
    table.comment = _strip_quotes(m.group(1).strip())
    return True


def _rename_table(table: Table, m: re.Match[str], where: str) -> bool:
    names = [unquote(n) for n in re.findall(_IDENT, m.group(1))]
    table.database, table.name = (names[0], names[1]) if len(names) == 2 else (table.database, names[0])
    return True


def _nothing(table: Table, m: re.Match[str], where: str) -> bool:
    return True  # an index, a constraint, an engine option: Debezium's table is unchanged


_Action = Callable[[Table, re.Match[str], str], bool]
_ACTIONS: tuple[tuple[re.Pattern[str], _Action], ...] = tuple(
    (re.compile(pattern, re.I | re.S), action)
    for pattern, action in (
        (rf"add\s+{_CONSTRAINT}primary\s+key\s*(?:using\s+\w+\s*)?(\(.*\))", _add_primary_key),
        (rf"add\s+{_CONSTRAINT}unique\s*(?:key|index)?\s*(?:`[^`]*`|\w+)?\s*(\(.*\))", _add_unique),
        (r"drop\s+primary\s+key", _drop_primary_key),
        (r"(add|drop)\s+(key|index|fulltext|spatial|constraint|foreign|check|partition|period|unique)\b", _nothing),
        (rf"add\s+{_COLUMN}(?:if\s+not\s+exists\s+)?(\(.*\)|{_IDENT}\s+.*)$", _add_columns),
        (rf"drop\s+{_COLUMN}(?:if\s+exists\s+)?({_IDENT})\s*$", _drop_column),
        (rf"rename\s+column\s+(?:if\s+exists\s+)?({_IDENT})\s+to\s+({_IDENT})\s*$", _rename_column),
        (r"rename\s+(index|key)\b", _nothing),
        (rf"modify\s+{_COLUMN}(?:if\s+exists\s+)?({_IDENT})\s+(.*)$", _modify_column),
        (rf"change\s+{_COLUMN}(?:if\s+exists\s+)?({_IDENT})\s+(.*)$", _change_column),
        (rf"alter\s+{_COLUMN}({_IDENT})\s+(set\s+default|drop\s+default)\s*(.*)$", _set_default),
        (rf"rename\s+(?:to\s+|as\s+)?((?:{_IDENT}\s*\.\s*)?{_IDENT})\s*$", _rename_table),
        (r"(?:default\s+)?(?:character\s+set|charset|collate)\b.*$", _table_charset),
        (r"comment\s*=?\s*('(?:[^'\\]|''|\\.)*')\s*$", _table_comment),
        (
            r"(engine|auto_increment|row_format|algorithm|lock|force|order\s+by|convert\s+to|key_block_size|"
            r"stats_|pack_keys|checksum|delay_key_write|(alter|modify)\s+(column\s+)?\S+\s+(in)?visible|"
            r"(enable|disable)\s+keys|discard|import|with(out)?\s+validation)",
            _nothing,
        ),
    )
)
