"""Table definitions as of each point of the binlog: read from information_schema once, then
changed by the DDL the stream carries, and kept with the offsets so a restart resumes with the
definitions of its resume point (ADR 0014).

Why not ask information_schema at each row event: it describes the tables *now*, and the rows
being read may be older than the last ALTER. The history is versioned: each DDL that changes a
captured table's definition appends a line (``version``, the statement, the offset after it,
the changed tables in full, dropped names) to a JSON-lines file, and every offset after it
carries ``schema_version``. A restart reads the file up to the committed offset's version and
drops later lines (a DDL read again after a crash appends them again). Without a file (no
``schema.history.internal.file.filename`` and no file offset store) the history lives in memory,
like the offsets of a memory store.

A statement ``ddl.py`` does not follow makes the history read the tables it touches from the
server: right unless another DDL of the same table follows it in the unread binlog. Each row
event's table map is checked against the definition (``row_decoder.compile_table``: the column
count and each column's binlog type), so such a mismatch is an error naming the table instead of
wrong values.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.sources.mysql import ddl
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.types import MySqlColumn

log = logging.getLogger(__name__)

TableKey = tuple[str, str]
_COLUMNS_QUERY = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, "
    "CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, COLUMN_DEFAULT, COLUMN_KEY, "
    "COLUMN_COMMENT "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA NOT IN "
    "('mysql', 'information_schema', 'performance_schema', 'sys') {where} "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
)
#: Primary-key columns in the key's order (Debezium's key fields follow it, not the columns' order).
_KEY_QUERY = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE INDEX_NAME = 'PRIMARY' "
    "AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') {where} "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX"
)
_TABLES_QUERY = (
    "SELECT t.TABLE_SCHEMA, t.TABLE_NAME, c.CHARACTER_SET_NAME FROM information_schema.TABLES t "
    "LEFT JOIN information_schema.COLLATION_CHARACTER_SET_APPLICABILITY c ON c.COLLATION_NAME = t.TABLE_COLLATION "
    "WHERE t.TABLE_TYPE = 'BASE TABLE' AND t.TABLE_SCHEMA NOT IN "
    "('mysql', 'information_schema', 'performance_schema', 'sys') {where}"
)


#: DATA_TYPE spellings of one type: a DDL statement's, and information_schema's.
_CANONICAL = {
    "boolean": "tinyint",
    "bool": "tinyint",
    "integer": "int",
    "numeric": "decimal",
    "real": "double",
    "json": "longtext",
}
_TEMPORAL = frozenset(("time", "datetime", "timestamp"))


def row_shape(table: Table | None) -> tuple[tuple[Any, ...], ...] | None:
    """What a row read from the table looks like and how its values convert: each column's
    name, type, signedness, scale, fractional seconds and members. The history's definitions
    from DDL and information_schema's differ in details a row does not show (a BOOL is a
    tinyint, display widths), which this leaves out."""
    if table is None:
        return None
    return tuple(
        (
            c.name,
            _CANONICAL.get(c.data_type, c.data_type),
            c.unsigned,
            c.scale if c.data_type in ("decimal", "numeric") else None,
            c.fsp if c.data_type in _TEMPORAL else None,
            c.column_type if c.data_type in ("enum", "set", "bit") else None,
        )
        for c in table.columns
    )


class SchemaMismatchError(CdcError):
    """A row event does not fit the table definition the history holds."""


def read_tables(conn: Any, only: Iterable[TableKey] | None = None) -> dict[TableKey, Table]:
    """The definitions of every base table (or of ``only``) from information_schema."""
    where, args = "", []
    if only is not None:
        keys = list(only)
        if not keys:
            return {}
        where = "AND (" + " OR ".join(["(TABLE_SCHEMA = %s AND TABLE_NAME = %s)"] * len(keys)) + ")"
        args = [part for key in keys for part in key]
    charsets: dict[TableKey, str] = {}
    columns: dict[TableKey, list[MySqlColumn]] = {}
    keys_of: dict[TableKey, list[str]] = {}
    with conn.cursor() as cur:
        cur.execute(_TABLES_QUERY.format(where=where.replace("TABLE_", "t.TABLE_")), args)
        for schema, name, charset in cur.fetchall():
            charsets[(_text(schema), _text(name))] = _text(charset or "utf8mb4")
        cur.execute(_COLUMNS_QUERY.format(where=where), args)
        names = [d[0] for d in cur.description]
        for row in cur.fetchall():
            record = dict(zip(names, row, strict=True))
            key = (_text(record["TABLE_SCHEMA"]), _text(record["TABLE_NAME"]))
            if key not in charsets:
                continue  # a view
            columns.setdefault(key, []).append(MySqlColumn.from_information_schema(record))
        cur.execute(_KEY_QUERY.format(where=where), args)
        for schema, name, column in cur.fetchall():
            keys_of.setdefault((_text(schema), _text(name)), []).append(_text(column))
    return {
        key: Table(key[0], key[1], tuple(cols), tuple(keys_of.get(key, ())), charsets[key])
        for key, cols in columns.items()
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SchemaHistory:
    """The captured tables' definitions, versioned by the DDL applied to them."""

    def __init__(self, path: Path | None, captured: Callable[[str, str], bool]) -> None:
        self.path, self._captured = path, captured
        self.tables: dict[TableKey, Table] = {}
        self.version = 0

    # -- starting ----------------------------------------------------------------------------
    def captured_tables(self, conn: Any) -> dict[TableKey, Table]:
        """Every captured table's definition as the server has it now."""
        return {k: t for k, t in read_tables(conn).items() if self._captured(*k)}

    def start_fresh(self, conn: Any, offset: dict[str, Any]) -> None:
        """Version 0: every captured table as the server has it now (the stream's first
        position); the file starts over."""
        self.start_with(self.captured_tables(conn), offset)

    def start_with(self, tables: dict[TableKey, Table], offset: dict[str, Any]) -> None:
        """Version 0: ``tables``, the definitions at ``offset`` (a snapshot's point); the file
        starts over."""
        self.tables = dict(tables)
        self.version = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as out:
                out.write(_line(0, "", offset, self.tables.values(), ()))
                out.flush()
                os.fsync(out.fileno())

    def recover(self, conn: Any, version: int) -> bool:
        """The definitions as of ``version`` (the committed offset's); later lines, written
        for DDL whose offsets were never committed, are dropped. False: there was no history
        to recover, the definitions are the server's now."""
        if self.path is None or not self.path.exists():
            log.warning(
                "no schema history (%s): reading the tables' definitions from the server now; rows older than "
                "a later DDL would be read with the newer definition",
                self.path,
            )
            self.start_fresh(conn, {})
            return False
        kept: list[str] = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                break  # the last line, cut by a crash: its DDL is read again
            if entry["version"] > version:
                break
            kept.append(line + "\n")
            self._apply_entry(entry)
        self.version = version
        with open(self.path, "w", encoding="utf-8") as out:
            out.writelines(kept)
        return True

    # -- streaming ---------------------------------------------------------------------------
    def apply(self, conn: Any, statement: str, database: str, offset: dict[str, Any]) -> bool:
        """Apply one DDL; True when a captured table's definition changed (a new version)."""
        try:
            result = ddl.apply(statement, database, self.tables)
        except (ValueError, StopIteration) as exc:
            log.warning("cannot follow DDL %r (%s): reading its tables from the server", statement[:200], exc)
            result = ddl.Unknown(())
        if result is None:
            return False
        if isinstance(result, ddl.Unknown):
            touched = [k for k in result.tables if self._captured(*k)] or self._guess(statement, database)
            fresh = read_tables(conn, touched)
            result = ddl.Changes(fresh, {k for k in touched if k not in fresh})
        changed = {k: t for k, t in result.tables.items() if self._captured(*k)}
        dropped = {k for k in result.dropped if k in self.tables}
        if not changed and not dropped:
            return False
        self.version += 1
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(_line(self.version, statement, offset, changed.values(), dropped))
                out.flush()
                os.fsync(out.fileno())
        for key in dropped:
            self.tables.pop(key, None)
        self.tables.update(changed)
        return True

    def _guess(self, statement: str, database: str) -> list[TableKey]:
        lowered = statement.lower()
        return [k for k in self.tables if k[1].lower() in lowered]

    def _apply_entry(self, entry: dict[str, Any]) -> None:
        for schema, name in entry.get("dropped", []):
            self.tables.pop((schema, name), None)
        for raw in entry["tables"]:
            columns = tuple(MySqlColumn(**c) for c in raw["columns"])
            table = Table(raw["database"], raw["name"], columns, tuple(raw["key"]), raw.get("charset", "utf8mb4"))
            self.tables[(table.database, table.name)] = table


def _line(
    version: int, ddl_text: str, offset: dict[str, Any], tables: Iterable[Table], dropped: Iterable[TableKey]
) -> str:
    entry = {
        "version": version,
        "ddl": ddl_text,
        "position": offset,
        "tables": [{**asdict(t), "columns": [asdict(c) for c in t.columns], "key": list(t.key)} for t in tables],
        "dropped": [list(k) for k in dropped],
    }
    return json.dumps(entry, separators=(",", ":"), default=str) + "\n"
