"""SQL of an incremental snapshot's chunk keys: each key column kept as text in the snapshot
context (binary keys as hex, ENUM and SET as their numbers), and compared by the server with the
bound cast back to the column's type; composite keys column by column."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.engine.sources.mysql.types import MySqlColumn

_INTEGERS = frozenset(("tinyint", "smallint", "mediumint", "int", "bigint", "year", "boolean"))
_BINARY = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))
#: Sorted by their members' numbers (ENUM's index, SET's bits), not by their text: a key of one is
#: kept and compared as that number, or the chunks' order and bounds would disagree.
_NUMBERED = frozenset(("enum", "set"))


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def key_text(column: MySqlColumn) -> str:
    """SQL of a key column's text, as the chunk cursor keeps it."""
    if column.data_type in _BINARY:
        return f"HEX({quote(column.name)})"
    if column.data_type in _NUMBERED:
        return f"CAST({quote(column.name)} + 0 AS CHAR)"
    return f"CAST({quote(column.name)} AS CHAR)"


def key_bound(column: MySqlColumn) -> str:
    """SQL of a bound for the column, from such a text (a ``%s`` placeholder)."""
    kind = column.data_type
    if kind in _INTEGERS or kind in _NUMBERED:  # an ENUM or SET compared with a number: by its number
        return "CAST(%s AS UNSIGNED)" if column.unsigned else "CAST(%s AS SIGNED)"
    if kind == "decimal":
        return f"CAST(%s AS DECIMAL({column.precision or 10},{column.scale or 0}))"
    if kind in ("datetime", "timestamp"):
        return f"CAST(%s AS DATETIME({column.fsp or 0}))"
    if kind == "time":
        return f"CAST(%s AS TIME({column.fsp or 0}))"
    if kind == "date":
        return "CAST(%s AS DATE)"
    if kind in ("float", "double"):
        return "CAST(%s AS DOUBLE)"
    if kind in _BINARY:
        return "UNHEX(%s)"
    return "%s"  # strings: compared with the column's collation


def compare(columns: Sequence[MySqlColumn], operator: str) -> str:
    """``(k1, k2) <operator> (b1, b2)`` for ``>`` or ``<=``, column by column."""
    strict = operator.rstrip("=")
    names = [quote(c.name) for c in columns]
    bounds = [key_bound(c) for c in columns]
    last = len(columns) - 1
    terms = []
    for i in range(len(columns)):
        equal = [f"{names[j]} = {bounds[j]}" for j in range(i)]
        op = operator if i == last else strict
        terms.append("(" + " and ".join([*equal, f"{names[i]} {op} {bounds[i]}"]) + ")")
    return "(" + " or ".join(terms) + ")"


def compare_args(bound: Sequence[str], operator: str) -> list[str]:
    """The placeholders' values of :func:`compare`, in order."""
    return [value for i in range(len(bound)) for value in (*bound[:i], bound[i])]
