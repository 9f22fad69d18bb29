"""A column as Debezium's MySQL/MariaDB DDL parser models it, for the ``columns`` of
``tableChanges``: read from the definition's text (``ColumnDefinitionParserListener``,
``DefaultValueParserListener``, ``DataTypeResolver``): the type's name as written (``INTEGER``,
``BOOL``, ``INT UNSIGNED ZEROFILL``), its first argument as ``length`` (an ``int(11)``'s display
width; nothing for a bare ``int``), ``DEFAULT`` literals unquoted, ``CURRENT_TIMESTAMP`` as
``1970-01-01 00:00:00``, an ENUM's options with their quotes. Struct fields follow
``ConnectTableChangeSerializer`` (Debezium 3.5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.engine.sources.mysql.ddl.statements import read_type
from airflow_cdc.engine.sources.mysql.ddl.tokens import Token, strip_quotes, tokens, unquote

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


def charset_of_collation(collation: str) -> str:
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


def column(name: str, definition: str, table_charset: str | None) -> Column:
    """A column declared ``name definition`` in a table whose default charset is ``table_charset``."""
    declared = read_type(definition)
    type_name, args, rest = declared.name, declared.args, declared.rest
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


def _dimensions(col: Column, base: str, args: str | None) -> None:
    if base in ("ENUM", "SET"):
        options = [t.text for t in tokens(args or "") if t.kind == "string"]
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
    rest: list[Token]
    words: list[str]
    charset: str | None = None
    suffix: list[str] = field(default_factory=list)

    def ahead(self, index: int) -> str:
        return self.words[index + 1] if index + 1 < len(self.words) else ""

    def value(self, index: int) -> str | None:
        return strip_quotes(unquote(self.rest[index].text)) if index < len(self.rest) else None


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
    d.charset = d.charset or (charset_of_collation(collation) if collation else None)
    return index + 1


def _on_update(d: _Definition, index: int) -> int:
    if d.ahead(index) != "update":
        return index
    return index + (3 if index + 3 < len(d.rest) and d.rest[index + 3].kind == "group" else 2)


def _default_value(d: _Definition, index: int) -> int:
    return apply_default(d.col, d.rest, index + 1)


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


def _attributes(col: Column, rest: list[Token]) -> tuple[str | None, str]:
    """Apply the definition's attributes; the declared charset and the type's suffix words."""
    d = _Definition(col, rest, [t.text.lower() if t.kind == "word" else "" for t in rest])
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


def apply_default(col: Column, rest: list[Token], index: int) -> int:
    """DefaultValueParserListener: ``col``'s default from the tokens at ``index`` (after
    DEFAULT); the index of the default's last token."""
    if index >= len(rest):
        return index
    kind, text, _ = rest[index]
    sign = ""
    if kind == "other" and text in "+-" and index + 1 < len(rest):
        sign, index = text, index + 1
        kind, text, _ = rest[index]
    lowered = text.lower()
    if kind == "word" and lowered == "null":
        col.default = None
    elif kind == "string":
        col.default = sign + strip_quotes(text)
        # a literal followed by COLLATE keeps the literal only
    elif kind == "number":
        col.default = sign + text
    elif kind == "bits":
        col.default = text[2:-1] if text[0] in "bB" else col.default
    elif kind == "word" and lowered in ("true", "false"):
        col.default = text
    elif kind == "word" and lowered in _NOW:
        arguments = rest[index + 1].text if index + 1 < len(rest) and rest[index + 1].kind == "group" else ""
        col.default = "1970-01-01 00:00:00" if lowered in ("current_timestamp", "now") else text + arguments
        index += bool(arguments)
    elif kind == "group":
        col.default = None  # an expression: Debezium handles it as NULL
    return index
