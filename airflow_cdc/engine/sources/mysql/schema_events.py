"""Debezium's schema change events for MySQL and MariaDB (``include.schema.changes``): on the
topic named ``topic.prefix``, key ``{"databaseName": ...}``, value ``source``, ``ts_ms``,
``databaseName``, ``schemaName`` (null), ``ddl`` and ``tableChanges`` (``EventDispatcher``'s
``SchemaChangeEventReceiver``, Debezium 3.5).

The initial snapshot emits what ``BinlogSnapshotChangeEventSource.readTableStructure`` does, in
its order: ``SET character_set_server=..., collation_server=...``; a ``DROP TABLE IF EXISTS``
per table; per database ``DROP DATABASE IF EXISTS``, ``CREATE DATABASE ... CHARSET ... COLLATE
...``, ``USE``, then each table's ``SHOW CREATE TABLE`` (a CREATE change with the table). Every
one has ``source.snapshot`` "true" and names the snapshot's binlog point. While streaming, each
DDL of a captured table emits one event per table (CREATE, ALTER - a rename, an index too -, or
DROP, whose change has no table), and CREATE/ALTER/DROP DATABASE of a captured database a
DATABASE event without changes; the source names the statement's binlog event.

Deliberate differences from Debezium's defaults (``schema.history.internal.store.only.captured.
tables.ddl`` and ``...databases.ddl`` false, with which it emits every DDL the server logs,
other databases' and GRANTs included): only captured tables and databases have events - the
schema history follows nothing else, and one database's topic should not carry another's
schema. A table this module has not seen (a restart streams on without the snapshot) or a
statement it does not follow is described by ``SHOW CREATE TABLE`` when its DDL is read: right
unless a later DDL of the same table is still unread, the schema history's caveat too.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from airflow_cdc.engine.connect_schema import ConnectSchemas
from airflow_cdc.engine.records import Partition, SourceRecord
from airflow_cdc.engine.sources.mysql import table_changes
from airflow_cdc.engine.sources.mysql.binlog import SchemaChange
from airflow_cdc.engine.sources.mysql.changes import ChangeBuilder
from airflow_cdc.engine.sources.mysql.ddl import split_name, split_top_level, strip_comments, unquote
from airflow_cdc.engine.sources.mysql.table_changes import Table

log = logging.getLogger(__name__)

TableKey = tuple[str, str]
_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"(?:{_IDENT}\s*\.\s*)?{_IDENT}"
_CREATE = re.compile(
    rf"^create\s+(?:or\s+replace\s+)?(?:temporary\s+)?table\s+(?P<if>if\s+not\s+exists\s+)?(?P<name>{_QUALIFIED})"
    r"\s*(?P<rest>.*)$",
    re.I | re.S,
)
_ALTER = re.compile(
    rf"^alter\s+(?:online\s+|ignore\s+)*table\s+(?:if\s+exists\s+)?(?P<name>{_QUALIFIED})\s*(?P<rest>.*)$", re.I | re.S
)
_DROP = re.compile(
    r"^drop\s+(?P<temporary>temporary\s+)?tables?\s+(?:if\s+exists\s+)?(?P<names>.*?)(?:\s+(?:restrict|cascade))?$",
    re.I | re.S,
)
_RENAME = re.compile(r"^rename\s+tables?\s+(?P<pairs>.*)$", re.I | re.S)
_INDEX = re.compile(
    rf"^(?:create\s+(?:or\s+replace\s+)?(?:unique\s+|fulltext\s+|spatial\s+)?index|drop\s+index)\s+"
    rf"(?:if\s+(?:not\s+)?exists\s+)?{_IDENT}\s+(?:using\s+\w+\s+)?on\s+(?P<name>{_QUALIFIED})\s*(?P<rest>.*)$",
    re.I | re.S,
)
_DATABASE = re.compile(
    rf"^(?P<verb>create|alter|drop)\s+(?:database|schema)\s+(?:if\s+(?:not\s+)?exists\s+)?(?P<name>{_IDENT})", re.I
)


@dataclass(frozen=True)
class Change:
    """One schema change event: its type, database, the tables it names, the table after it."""

    type: str  # CREATE, ALTER, DROP, DATABASE
    database: str
    key: TableKey | None = None
    table: Table | None = None
    #: The statement as the event shows it, when not as the binlog has it.
    ddl: str | None = None
    #: A statement Debezium's parser signals nothing for (an index it ignores): its source's
    #: ``table`` is "" (the offset context's "no table" set), not null.
    unparsed: bool = False

    def table_changes(self) -> list[dict[str, Any]]:
        if self.key is None:
            return []
        return [
            {
                "type": self.type,
                "id": f'"{self.key[0]}"."{self.key[1]}"',
                "table": None if self.table is None else self.table.struct(),
            }
        ]


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class SchemaChangeEvents:
    """Debezium's view of the captured tables, and the schema change records built from it."""

    def __init__(
        self,
        *,
        builder: ChangeBuilder,
        topic: str,
        partition: Partition,
        captured: Callable[[str, str], bool],
        database_captured: Callable[[str], bool],
        charsets: dict[str, str] | None = None,
        schemas: ConnectSchemas | None = None,
    ) -> None:
        self._builder, self.topic, self._partition = builder, topic, partition
        self._captured, self._database_captured = captured, database_captured
        self.tables: dict[TableKey, Table] = {}
        #: Each database's default charset (read from the server when first needed).
        self._charsets: dict[str, str] = dict(charsets or {})
        self._server_charset: str | None = None
        #: The records' Connect schemas, when a converter writes schemas.
        self._schemas = schemas

    # -- the initial snapshot ----------------------------------------------------------------
    def snapshot(self, conn: Any, keys: Sequence[TableKey], offset: dict[str, Any]) -> list[SourceRecord]:
        """The snapshot's schema change records for ``keys`` (captured tables, in snapshot
        order), read on ``conn`` (the snapshot's connection)."""
        variables = _query(conn, "SHOW VARIABLES WHERE Variable_name IN ('character_set_server', 'collation_server')")
        settings = {str(name): str(value) for name, value in variables}
        self._server_charset = settings.get("character_set_server")
        locales = {str(r[0]): (r[1], r[2]) for r in _query(conn, _SCHEMATA)}
        self._charsets.update({db: str(charset) for db, (charset, _) in locales.items() if charset})
        records = [self._snapshot_record(offset, "", None, _set_statement(settings), Change("DATABASE", ""))]
        for key in keys:
            statement = f"DROP TABLE IF EXISTS {quote(key[0])}.{quote(key[1])}"
            records.append(self._snapshot_record(offset, key[0], key[1], statement, Change("DROP", key[0], key)))
        for database in dict.fromkeys(db for db, _ in keys):
            charset, collation = locales.get(database, (None, None))
            create = f"CREATE DATABASE {quote(database)}" + (f" CHARSET {charset}" if charset else "")
            create += f" COLLATE {collation}" if collation else ""
            for statement in (f"DROP DATABASE IF EXISTS {quote(database)}", create, f"USE {quote(database)}"):
                records.append(self._snapshot_record(offset, database, None, statement, Change("DATABASE", database)))
            for key in (k for k in keys if k[0] == database):
                statement, table = self._show_create(conn, key)
                if table is None:
                    continue  # dropped since the history read it: its rows are gone too
                self.tables[key] = table
                records.append(
                    self._snapshot_record(offset, key[0], key[1], statement, Change("CREATE", key[0], key, table))
                )
        return records

    def _snapshot_record(
        self, offset: dict[str, Any], database: str, table: str | None, ddl: str, change: Change
    ) -> SourceRecord:
        source = self._builder.source(database, table, None, snapshot="true")  # type: ignore[arg-type]
        # Debezium's snapshot records name the binlog point the snapshot stands at.
        source["file"], source["pos"] = str(offset.get("file") or ""), int(offset.get("pos") or 0)
        return self._record(source, ddl, change, offset)

    # -- streaming -----------------------------------------------------------------------------
    def streamed(self, conn: Any, item: SchemaChange, offset: dict[str, Any]) -> list[SourceRecord]:
        """The records of one streamed DDL statement (none if it concerns nothing captured)."""
        try:
            changes = self._changes(conn, item.ddl, item.database)
        except (ValueError, IndexError) as exc:
            log.warning(
                "schema change events: cannot read DDL %r (%s); describing it from the server", item.ddl[:200], exc
            )
            changes = []
        records = []
        for change in changes:
            names = sorted({c.key[1] for c in changes if c.key is not None and c.database == change.database})
            table = "" if change.unparsed else ",".join(names) if names else None
            source = self._builder.source(change.database, table, item.source, snapshot="false")  # type: ignore[arg-type]
            source["thread"] = None  # a DDL statement has no transaction of its own (nor a BEGIN)
            records.append(self._record(source, change.ddl or item.ddl, change, offset))
        return records

    def _changes(self, conn: Any, statement: str, database: str) -> list[Change]:
        sql = strip_comments(statement).rstrip(";").strip()
        if m := _CREATE.match(sql):
            return self._create(conn, m, database)
        if m := _ALTER.match(sql):
            key = split_name(m.group("name"), database)
            return self._alter(conn, key, m.group("rest"))
        if m := _INDEX.match(sql):
            key = split_name(m.group("name"), database)
            return self._index(conn, key, sql, database)
        if m := _DROP.match(sql):
            if m.group("temporary"):
                return []
            keys = [split_name(n, database) for n in split_top_level(m.group("names"))]
            for key in keys:
                self.tables.pop(key, None)
            # DropTableParserListener: one statement per table, its name qualified.
            head, tail = sql[: m.start("names")], sql[m.end("names") :].strip()
            return [
                Change("DROP", k[0], k, ddl=f"{head}{quote(k[0])}.{quote(k[1])}" + (f" {tail}" if tail else ""))
                for k in keys
                if self._captured(*k)
            ]
        if m := _RENAME.match(sql):
            return self._rename(conn, m.group("pairs"), database)
        if m := _DATABASE.match(sql):
            name = unquote(m.group("name"))
            if m.group("verb").lower() == "drop":
                self.tables = {k: t for k, t in self.tables.items() if k[0] != name}
            return [Change("DATABASE", name)] if self._database_captured(name) else []
        return []

    def _create(self, conn: Any, m: re.Match[str], database: str) -> list[Change]:
        key = split_name(m.group("name"), database)
        if not self._captured(*key) or (m.group("if") and key in self.tables):
            return []
        rest = m.group("rest").strip()
        like = re.match(rf"^\(?\s*like\s+({_QUALIFIED})\s*\)?$", rest, re.I)
        table: Table | None
        if like and split_name(like.group(1), database) in self.tables:
            table = self.tables[split_name(like.group(1), database)].copy()
            table.database, table.name = key
        elif rest.startswith("(") and not like and not re.search(r"\)\s*(?:as\s+)?select\b", rest, re.I):
            table = table_changes.create_table(key[0], key[1], rest, self._charset_of(conn, key[0]))
        else:
            table = self._show_create(conn, key)[1]
        if table is None:
            return []
        self.tables[key] = table
        return [Change("CREATE", key[0], key, table)]

    def _alter(self, conn: Any, key: TableKey, clauses: str) -> list[Change]:
        known = self.tables.get(key)
        table = table_changes.alter(known, clauses) if known is not None else None
        if table is None:
            rename = re.search(rf"\brename\s+(?:to\s+|as\s+)?({_QUALIFIED})\s*(?:,|$)", clauses, re.I)
            new_key = split_name(rename.group(1), key[0]) if rename else key
            table = self._show_create(conn, new_key)[1]
        if table is None:
            return []
        new_key = (table.database, table.name)
        self.tables.pop(key, None)
        self.tables[new_key] = table
        return [Change("ALTER", new_key[0], new_key, table)] if self._captured(*new_key) else []

    def _index(self, conn: Any, key: TableKey, sql: str, database: str) -> list[Change]:
        """CREATE / DROP INDEX: only a unique index that becomes the primary key (one of NOT
        NULL columns, on a table without one) changes Debezium's table, an ALTER; its parser
        signals nothing for any other, and the event has no table changes."""
        if not self._captured(*key):
            return []
        table = self.tables.get(key) or self._show_create(conn, key)[1]
        unique = re.match(r"^create\s+(?:or\s+replace\s+)?unique\s", sql, re.I)
        columns = re.search(r"\((?P<cols>.*)\)", sql, re.S)
        if table is not None and unique and columns and not table.key:
            keyed = table_changes.alter(table, f"add unique ({columns.group('cols')})")
            if keyed is not None and keyed.key:
                self.tables[key] = keyed
                return [Change("ALTER", key[0], key, keyed)]
        return [Change("DATABASE", database, unparsed=True)]

    def _rename(self, conn: Any, pairs: str, database: str) -> list[Change]:
        changes = []
        for pair in split_top_level(pairs):
            names = re.split(r"\s+to\s+", pair, maxsplit=1, flags=re.I)
            old, new = split_name(names[0], database), split_name(names[1], database)
            table = self.tables.pop(old, None)
            if table is not None:
                table = table.copy()
                table.database, table.name = new
            else:
                table = self._show_create(conn, new)[1]
            if table is None:
                continue
            self.tables[new] = table
            if self._captured(*new):
                changes.append(Change("ALTER", new[0], new, table))
        return changes

    # -- the server ----------------------------------------------------------------------------
    def _show_create(self, conn: Any, key: TableKey) -> tuple[str, Table | None]:
        """``SHOW CREATE TABLE``'s statement and the table it describes (None if none)."""
        try:
            rows = _query(conn, f"SHOW CREATE TABLE {quote(key[0])}.{quote(key[1])}")
        except pymysql.err.ProgrammingError:  # no such table (any more)
            return "", None
        if not rows or len(rows[0]) < 2:
            return "", None
        statement = _text(rows[0][1])
        body = statement[statement.index("(") :] if "(" in statement else ""
        return statement, table_changes.create_table(key[0], key[1], body, self._charset_of(conn, key[0]))

    def _charset_of(self, conn: Any, database: str) -> str | None:
        if database not in self._charsets:
            for row in _query(conn, _SCHEMATA + " WHERE schema_name = %s", (database,)):
                if row[1]:
                    self._charsets[database] = _text(row[1])
        return self._charsets.get(database) or self._server_charset

    # -- records -------------------------------------------------------------------------------
    def _record(self, source: dict[str, Any], ddl: str, change: Change, offset: dict[str, Any]) -> SourceRecord:
        value = {
            "source": source,
            "ts_ms": time.time_ns() // 1_000_000,
            "databaseName": change.database,
            "schemaName": None,
            "ddl": ddl,
            "tableChanges": change.table_changes(),
        }
        key = {"databaseName": change.database}
        return SourceRecord(self.topic, key, value, self._partition, offset, source["ts_ms"], schemas=self._schemas)


_SCHEMATA = "SELECT schema_name, default_character_set_name, default_collation_name FROM information_schema.schemata"


def _set_statement(variables: dict[str, str]) -> str:
    """BinlogConnectorConnection.setStatementFor, without its ``;`` (which Debezium's parser drops)."""
    parts = []
    for name in sorted(variables):
        value = variables[name]
        parts.append(f"{name}=" + (f"'{value}'" if "," in value or ";" in value else value))
    return "SET " + ", ".join(parts)


def _query(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return [tuple(_text(v) if isinstance(v, bytes) else v for v in row) for row in cur.fetchall()]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
