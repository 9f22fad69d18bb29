"""``database.include.list`` and ``table.include.list`` must match something the server has.

A list that matches nothing captures nothing, and says nothing: the task streams, the offsets
advance, and no event ever comes (the usual slips: a backticked or quoted name, a table without
its database, a database list naming one database and a table list another). As the PostgreSQL
source does (``postgres/catalog.py``, ``check_include_list``), the task refuses to start with a
ConfigError naming what there is; an entry that matches nothing beside others that match is a
warning. Names are matched as ``filters.TableFilter`` matches them: whole names, any case.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem

log = logging.getLogger(__name__)

_SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")
#: At most this many names in the error of an include list that matches nothing.
_NAMED = 30


def check_include_lists(conn: Any, settings: Mapping[str, Any]) -> None:
    """ConfigError when ``database.include.list`` matches no database the user can see, or
    ``table.include.list`` no table of the databases captured."""
    databases_in = list(settings["database.include.list"])
    tables_in = list(settings["table.include.list"])
    if not databases_in and not tables_in:
        return
    databases, tables = _catalog(conn)
    if databases_in:
        _check("database.include.list", databases_in, databases, "database", "the server")
    if tables_in:
        captured = [
            f"{database}.{table}"
            for database, table in tables
            if _captured(database, databases_in, settings["database.exclude.list"])
        ]
        where = "the captured databases" if databases_in or settings["database.exclude.list"] else "the server"
        _check("table.include.list", tables_in, captured, "table", where)


def _catalog(conn: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """The databases and base tables the user can see, system schemas left out."""
    excluded = ", ".join(f"'{name}'" for name in _SYSTEM)
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN ({excluded}) "
            "ORDER BY SCHEMA_NAME"
        )
        databases = [str(row[0]) for row in cur.fetchall()]
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
            f"AND TABLE_SCHEMA NOT IN ({excluded}) ORDER BY TABLE_SCHEMA, TABLE_NAME"
        )
        tables = [(str(database), str(table)) for database, table in cur.fetchall()]
    return databases, tables


def _matches(pattern: str, name: str) -> bool:
    return re.fullmatch(pattern, name, re.IGNORECASE) is not None


def _captured(database: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    if include and not any(_matches(p, database) for p in include):
        return False
    return not any(_matches(p, database) for p in exclude)


def _check(key: str, include: Sequence[str], existing: Sequence[str], what: str, where: str) -> None:
    unmatched = [p for p in include if not any(_matches(p, name) for name in existing)]
    if len(unmatched) < len(include):
        for pattern in unmatched:
            log.warning("%s: %r matches no %s of %s", key, pattern, what, where)
        return
    named = ", ".join(existing[:_NAMED]) + (f" and {len(existing) - _NAMED} more" if len(existing) > _NAMED else "")
    shape = "database.table" if what == "table" else "database"
    fix = f"entries are regular expressions matched against whole, unquoted {shape} names"
    if any(mark in p for p in include for mark in "`\"'"):
        fix += " (shop.orders, not `shop`.`orders`)" if what == "table" else " (shop, not `shop`)"
    fix += f"; a {what} the user has no privilege on is not seen: grant SELECT on it"
    message = f"matches no {what} of {where}, whose {what}s are: {named or '(none)'}"
    raise ConfigError([ConfigProblem(key, message, fix)])
