"""The MySQL / MariaDB dialect (PyMySQL): upserts by the event's key through a staging table
(a guarded UPDATE ... JOIN, then an INSERT ... SELECT of the new keys); the session in UTC."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from airflow_cdc.engine import mysql_client
from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.targets.sql.dialect import Dialect
from airflow_cdc.spark.targets.sql.errors import TargetWriteError
from airflow_cdc.spark.targets.sql.tables import Table, TableInfo, TableName
from airflow_cdc.spark.values import ColumnType

#: ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT: InnoDB rolled the transaction (or its statement) back.
_MY_TRANSIENT = (1213, 1205)
_MY_TABLE = """
select TABLE_SCHEMA, TABLE_NAME from information_schema.TABLES
where TABLE_SCHEMA = coalesce(%s, database()) and TABLE_NAME = %s and TABLE_TYPE = 'BASE TABLE'
"""
_MY_COLUMNS = """
select COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_SCALE, DATETIME_PRECISION from information_schema.COLUMNS
where TABLE_SCHEMA = %s and TABLE_NAME = %s order by ORDINAL_POSITION
"""
_MY_UNIQUE = """
select INDEX_NAME, COLUMN_NAME from information_schema.STATISTICS
where TABLE_SCHEMA = %s and TABLE_NAME = %s and NON_UNIQUE = 0 and SUB_PART is null order by INDEX_NAME, SEQ_IN_INDEX
"""
#: The identity (``Dialect.identity``): the columns with their types and the unique indexes, as
#: text, in one round trip (CREATE_TIME has a resolution of a second, too coarse for a table
#: dropped and recreated at once; an identical definition needs no new read anyway).
_MY_IDENTITY = """
select (select group_concat(COLUMN_NAME, ' ', COLUMN_TYPE order by ORDINAL_POSITION separator ', ')
        from information_schema.COLUMNS where TABLE_SCHEMA = %(schema)s and TABLE_NAME = %(name)s),
       (select group_concat(INDEX_NAME, '.', COLUMN_NAME order by INDEX_NAME, SEQ_IN_INDEX separator ', ')
        from information_schema.STATISTICS
        where TABLE_SCHEMA = %(schema)s and TABLE_NAME = %(name)s and NON_UNIQUE = 0 and SUB_PART is null)
from information_schema.TABLES where TABLE_SCHEMA = %(schema)s and TABLE_NAME = %(name)s and TABLE_TYPE = 'BASE TABLE'
"""
#: Access denied: to a database (CREATE TEMPORARY TABLES), to a table, to a column.
_MY_PRIVILEGE_ERRORS = frozenset((1044, 1142, 1143))
#: "Field 'c' doesn't have a default value" (strict mode), and where it names the column.
_MY_NO_DEFAULT = 1364
_MY_QUOTED = re.compile(r"'(.+?)'")
#: Server errors that mean a value does not fit its column (strict mode).
_MY_VALUE_ERRORS = frozenset((1264, 1265, 1292, 1366, 1406, 1367, 4025))


def mysql_params(url: str) -> dict[str, Any]:
    """PyMySQL's connection arguments for a ``mysql://`` (or ``mariadb://``) URL."""
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": unquote(parts.path.lstrip("/")) or None,
        "charset": "utf8mb4",
    }


class MySQLDialect(Dialect):
    name = "mysql"
    """MariaDB-compatible SQL (``VALUES()`` in ON DUPLICATE KEY UPDATE, ``ADD COLUMN IF NOT
    EXISTS``); the session's time zone is UTC, so ``timestamp`` columns store UTC instants."""

    position_definition = f"`{POSITION_COLUMN}` varchar(64) CHARACTER SET ascii COLLATE ascii_bin"

    def connect(self, url: str) -> Any:
        # group_concat's limit is 1024 bytes on MySQL: the identity of a wide table would be cut.
        init = "SET time_zone = '+00:00', group_concat_max_len = 1048576"
        return mysql_client.connect(**mysql_params(url), autocommit=False, init_command=init)

    def identifier(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def read_table(self, conn: Any, target: TableName) -> TableInfo | None:
        with conn.cursor() as cur:
            cur.execute(_MY_TABLE, (target.schema, target.name))
            found = cur.fetchone()
            if found is None:
                return None
            schema, name = found
            qualified = f"{schema}.{name}"
            cur.execute(_MY_COLUMNS, (schema, name))
            columns = {row[0]: ColumnType.mysql(qualified, *row) for row in cur.fetchall()}
            cur.execute(_MY_UNIQUE, (schema, name))
            indexes: dict[str, set[str]] = {}
            for index, column in cur.fetchall():
                indexes.setdefault(index, set()).add(column)
        keys = tuple(frozenset(c) for c in indexes.values())
        return TableInfo(TableName(schema, name), columns, keys, self.identity(conn, TableName(schema, name)))

    def transient(self, exc: BaseException) -> bool:
        import pymysql

        return isinstance(exc, pymysql.MySQLError) and bool(exc.args) and exc.args[0] in _MY_TRANSIENT

    def identity(self, conn: Any, name: TableName) -> Any:
        with conn.cursor() as cur:
            cur.execute(_MY_IDENTITY, {"schema": name.schema, "name": name.name})
            found = cur.fetchone()
        return None if found is None else tuple(found)

    def add_position_column(self, conn: Any, url: str, name: TableName, statement: str) -> None:
        # MySQL's DDL commits the transaction it runs in: on a connection of its own, with a
        # bounded wait for the table's metadata lock.
        with mysql_client.connect(**mysql_params(url), autocommit=True) as other, other.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 60")
            cur.execute(statement)

    def write_probes(self, table: Table) -> list[tuple[str, str, str]]:
        # Every upsert goes through a temporary staging table.
        p, t = self.identifier(POSITION_COLUMN), self.quote(table.name)
        stage = f"CREATE TEMPORARY TABLE _cdc_probe SELECT {p} FROM {t} LIMIT 0"
        grant = f"GRANT CREATE TEMPORARY TABLES ON {self.identifier(table.name.schema or '')}.* TO <the job's user>"
        return [
            *super().write_probes(table),
            ("create temporary tables", grant, stage),
            ("drop its temporary table", grant, "DROP TEMPORARY TABLE IF EXISTS _cdc_probe"),
        ]

    def refusal(self, conn: Any, statement: str) -> str | None:
        import pymysql

        try:
            with conn.cursor() as cur:
                cur.execute(statement)
        except pymysql.MySQLError as exc:
            if exc.args and exc.args[0] in _MY_PRIVILEGE_ERRORS:
                return str(exc.args[1]) if len(exc.args) > 1 else str(exc)
            # The server checks privileges first: any later refusal (strict mode's "no default"
            # for a column the probe leaves out, on no row at all) means it granted them.
            return None
        return None

    def upsert(self, conn: Any, table: Table, columns: tuple[str, ...], params: list[tuple[Any, ...]]) -> int:
        """By the event's key only (``ON DUPLICATE KEY UPDATE`` would match any unique key, and
        update another row than the change's): the rows go into a staging table, then one
        guarded ``UPDATE ... JOIN`` of the keys there, then one ``INSERT ... SELECT`` of the keys
        not there. A row whose other unique value is still held by another key fails with the
        duplicate, as on PostgreSQL."""
        statements = table.statements.get(("upsert", columns))
        if statements is None:
            statements = table.statements["upsert", columns] = self._upsert_sql(table, columns)
        create, fill, update, insert, drop = statements
        with conn.cursor() as cur:
            # executemany writes one multi-row INSERT per max_stmt_length bytes. CREATE and
            # DROP TEMPORARY TABLE do not end the transaction (other DDL would).
            self._run(table, lambda: cur.execute(create))
            try:
                self._run(table, lambda: cur.executemany(fill, params))
                self._run(table, lambda: cur.execute(update))
                if not self._partial(table, columns) or self._new_keys(cur, table, columns):
                    self._run(table, lambda: cur.execute(insert))
            finally:
                cur.execute(drop)
        return len(params)

    @staticmethod
    def _partial(table: Table, columns: tuple[str, ...]) -> bool:
        """Whether rows of ``columns`` leave some of the target's columns out (an unchanged
        TOASTed value): strict mode then refuses an INSERT that leaves out a NOT NULL column
        without a default even when it selects no row, so it runs only for new keys."""
        return bool(table.info.columns.keys() - {*columns, POSITION_COLUMN})

    def _new_keys(self, cur: Any, table: Table, columns: tuple[str, ...]) -> bool:
        assert table.key is not None
        q = self._name
        match = " AND ".join(f"t.{q(c)} = s.{q(c)}" for c in table.key)
        query = (
            f"SELECT EXISTS (SELECT 1 FROM {q('_cdc_stage')} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {self._table(table)} AS t WHERE {match}))"
        )
        self._run(table, lambda: cur.execute(query))
        return bool(cur.fetchone()[0])

    def _upsert_sql(self, table: Table, columns: tuple[str, ...]) -> tuple[str, ...]:
        assert table.key is not None
        q = self._name
        stage = q("_cdc_stage")
        names = (*columns, POSITION_COLUMN)
        listed = ", ".join(q(c) for c in names)
        key = ", ".join(q(c) for c in table.key)
        match = " AND ".join(f"t.{q(c)} = s.{q(c)}" for c in table.key)
        position = q(POSITION_COLUMN)
        updated = [c for c in columns if c not in table.key] + [POSITION_COLUMN]
        sets = ", ".join(f"t.{q(c)} = s.{q(c)}" for c in updated)
        marks = ", ".join(["%s"] * len(names))
        target = self._table(table)
        return (
            f"CREATE TEMPORARY TABLE {stage} (PRIMARY KEY ({key})) SELECT {listed} FROM {target} LIMIT 0",
            f"INSERT INTO {stage} ({listed}) VALUES ({marks})",
            f"UPDATE {target} AS t JOIN {stage} AS s ON {match} SET {sets} "
            f"WHERE t.{position} IS NULL OR t.{position} <= s.{position}",
            f"INSERT INTO {target} ({listed}) SELECT {', '.join(f's.{q(c)}' for c in names)} FROM {stage} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {target} AS t WHERE {match})",
            f"DROP TEMPORARY TABLE IF EXISTS {stage}",
        )

    def delete(self, conn: Any, table: Table, params: list[tuple[Any, ...]]) -> int:
        assert table.key is not None
        q = self._name
        position = q(POSITION_COLUMN)
        one = " AND ".join(f"{q(c)} = %s" for c in table.key)
        row = f"({one} AND ({position} IS NULL OR {position} <= %s))"
        query = f"DELETE FROM {self._table(table)} WHERE " + " OR ".join([row] * len(params))
        with conn.cursor() as cur:
            return self._run(table, lambda: cur.execute(query, [v for p in params for v in p]))

    def truncate(self, conn: Any, table: Table, position: str) -> int:
        column = self._name(POSITION_COLUMN)
        query = f"DELETE FROM {self._table(table)} WHERE {column} IS NULL OR {column} < %s"
        with conn.cursor() as cur:
            return self._run(table, lambda: cur.execute(query, [position]))

    def _name(self, name: str) -> str:
        """An identifier in a statement PyMySQL formats with ``%``."""
        return self.identifier(name).replace("%", "%%")

    def _table(self, table: Table) -> str:
        return self.quote(table.name).replace("%", "%%")

    def _run(self, table: Table, action: Callable[[], Any]) -> int:
        import pymysql

        try:
            return int(action() or 0)
        except pymysql.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if code == _MY_NO_DEFAULT:  # a NOT NULL column without a default left out of an insert
                column = _MY_QUOTED.search(str(exc.args[-1]))
                raise TargetWriteError(self.left_out_message(table, column and column.group(1), str(exc))) from exc
            if isinstance(exc, pymysql.err.DataError) or code in _MY_VALUE_ERRORS:
                raise TargetWriteError(self.refused_message(table, None, str(exc))) from exc
            exc.add_note(f"while applying changes of {table.source} to {table.name}")
            raise


MYSQL = MySQLDialect()
