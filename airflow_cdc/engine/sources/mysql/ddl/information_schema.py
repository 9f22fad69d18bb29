"""A column definition as ``information_schema.COLUMNS`` would describe it (:func:`column_row`),
so one ``MySqlColumn.from_information_schema`` serves the schema history whether it read a table
from the server or from a statement."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from airflow_cdc.engine.sources.mysql.ddl.debezium_columns import column as debezium_column
from airflow_cdc.engine.sources.mysql.ddl.statements import read_type
from airflow_cdc.engine.sources.mysql.ddl.tokens import unquote
from airflow_cdc.engine.sources.mysql.types import MySqlColumn

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


def column(name: str, definition: str, table_charset: str) -> MySqlColumn:
    """The column declared ``name definition`` (``name`` as written) in a table of ``table_charset``,
    with its comment and the type's name as the statement spells it (Debezium's schema shows
    both: ``doc`` and ``__debezium.source.column.type``, ``INTEGER`` where the server says int)."""
    declared = debezium_column(name, definition, table_charset)
    return dataclasses.replace(
        MySqlColumn.from_information_schema(column_row(unquote(name), definition, table_charset)),
        comment=declared.comment or None,
        source_type=declared.type_name,
    )


def column_row(name: str, definition: str, table_charset: str) -> dict[str, Any]:
    """What information_schema.COLUMNS says of a column declared ``name definition``."""
    data_type, args, rest = _declared_type(definition)
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
        "COLUMN_DEFAULT": declared_default(definition),
    }


_DEFAULT = re.compile(r"\bdefault\s+(?P<literal>'(?:[^'\\]|''|\\.)*'|[bx]'[0-9a-f]*'|[-+\w.:]+)", re.I)


def declared_default(definition: str) -> str | None:
    """COLUMN_DEFAULT as MariaDB writes it: a quoted literal as declared, NULL, or the bare word
    (a number, an expression's name). Only a temporal default is read (a zero date's stand-in,
    ``types._zero_date``)."""
    match = _DEFAULT.search(definition)
    if match is None:
        return None
    literal = match.group("literal")
    return "NULL" if literal.upper() == "NULL" else literal


def _declared_type(definition: str) -> tuple[str, str | None, str]:
    """The type's information_schema name, its arguments' text, and the rest of the definition
    (lower case)."""
    declared = read_type(definition)
    base = declared.name.lower()
    base = _SPELLED_OUT.get(base, base)
    args = "1" if base in ("bool", "boolean") else declared.args
    rest = declared.rest_text.lower()
    if base == "float" and args and args.strip().isdigit() and int(args) > 24:
        return "double", None, rest  # float(p) with p > 24 is a double
    return _ALIASES.get(base, base), args, rest


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
