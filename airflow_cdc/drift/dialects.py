"""What differs between PostgreSQL and MySQL/MariaDB when a table is summarised for the drift
check: the canonical text of a row, the per-range aggregate, the keyed reads, the server's
current log position. Everything else (``compare.py``) is dialect-free.

The canonical text. Each server renders the row itself, so that no row crosses the network in
the no-difference case; the two dialects must render the same row the same way, whatever the
column's declared type on each side (the apply job may create ``numeric`` where the source has
``numeric(10,2)``, ``timestamptz`` read in a session time zone, ...):

* NULL is ``chr(30)``, columns are joined by ``chr(31)`` (neither is in real text; PostgreSQL's
  text cannot hold ``chr(0)``);
* exact numbers without trailing fractional zeros (``1.50`` and ``1.5`` are one value);
* timestamps as ``YYYY-MM-DD HH:MM:SS.ffffff``, those with a time zone in UTC (the MySQL session
  runs in ``+00:00``, as the apply job's does); dates ``YYYY-MM-DD``;
* booleans ``1``/``0`` (MySQL's ``tinyint(1)``); bytes as lowercase hex;
* anything else as the server's own text of the value.

The row's hash is the first 15 hex digits of the md5 of that text, read as a (positive, 60-bit)
integer; a range's checksum is their sum, which both servers return as an exact decimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from airflow_cdc.drift.errors import DriftError

#: The column every SQL target keeps each row's source position in (``spark/frames.py``).
POSITION_COLUMN = "_cdc_position"


@dataclass(frozen=True)
class Column:
    name: str
    #: information_schema's ``data_type``, lowercase.
    data_type: str


class Dialect:
    name = ""
    #: ``(start, length)`` (1-based) of the part of ``_cdc_position`` that a position of this
    #: source is compared with; None: all of it.
    position_part: tuple[int, int] | None = None
    #: ``%s`` placeholders: both drivers (psycopg, PyMySQL) take them.
    integer_types: tuple[str, ...] = ()

    def connect(self, url: str) -> Any:
        raise NotImplementedError

    def quote(self, name: str) -> str:
        raise NotImplementedError

    def table(self, name: str) -> str:
        return ".".join(self.quote(part) for part in name.split(".", 1))

    def split(self, name: str) -> tuple[str, str]:
        """``(schema, table)`` of a name (MySQL: ``(database, table)``)."""
        raise NotImplementedError

    def target_name(self, table: str, url: str) -> str:
        """The table the apply job writes source ``table`` to by default, on a target at ``url``."""
        return table

    def canonical(self, column: Column) -> str:
        raise NotImplementedError

    def row_hash(self, columns: Sequence[Column]) -> str:
        raise NotImplementedError

    def bucket(self, key: str) -> str:
        """``bucket of key`` for ``%s`` = lower bound and ``%s`` = width (integer division)."""
        raise NotImplementedError

    def current_position(self, conn: Any) -> str:
        """The server's log position now, in the ``_cdc_position`` format of changes after it."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------
    def columns(self, conn: Any, name: str) -> list[Column]:
        schema, table = self.split(name)
        rows = _rows(
            conn,
            "select column_name, data_type from information_schema.columns where table_schema = %s "
            "and table_name = %s order by ordinal_position",
            (schema, table),
        )
        return [Column(str(r[0]), str(r[1]).lower()) for r in rows]

    def primary_key(self, conn: Any, name: str) -> list[str]:
        schema, table = self.split(name)
        rows = _rows(
            conn,
            "select k.column_name from information_schema.table_constraints c "
            "join information_schema.key_column_usage k on k.constraint_name = c.constraint_name "
            "and k.table_schema = c.table_schema and k.table_name = c.table_name "
            "where c.constraint_type = 'PRIMARY KEY' and c.table_schema = %s and c.table_name = %s "
            "order by k.ordinal_position",
            (schema, table),
        )
        return [str(r[0]) for r in rows]


def _rows(conn: Any, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query, tuple(params))
        return list(cur.fetchall())


_NULL, _SEPARATOR = 30, 31


class PostgresDialect(Dialect):
    name = "postgresql"
    # The apply job's PostgreSQL position is <last commit LSN><change LSN> (16 hex digits each):
    # the change's own LSN is the part a later change is sure to exceed.
    position_part = (17, 16)
    integer_types = ("smallint", "integer", "bigint")

    def connect(self, url: str) -> Any:
        import psycopg

        rest = url.split(":", 1)[1]
        return psycopg.connect("postgresql:" + rest, autocommit=True, application_name="airflow-cdc-validate")

    def quote(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def split(self, name: str) -> tuple[str, str]:
        schema, _, table = name.rpartition(".")
        return schema or "public", table

    def canonical(self, column: Column) -> str:
        c, kind = self.quote(column.name), column.data_type
        if kind == "numeric":
            return f"trim_scale({c})::text"
        if kind == "boolean":
            return f"{c}::int::text"
        if kind == "date":
            return f"to_char({c}, 'YYYY-MM-DD')"
        if kind == "timestamp without time zone":
            return f"to_char({c}, 'YYYY-MM-DD HH24:MI:SS.US')"
        if kind == "timestamp with time zone":
            return f"to_char({c} at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
        if kind == "bytea":
            return f"encode({c}, 'hex')"
        return f"{c}::text"

    def row_hash(self, columns: Sequence[Column]) -> str:
        parts = ", ".join(f"coalesce({self.canonical(c)}, chr({_NULL}))" for c in columns)
        return f"('x' || substr(md5(concat_ws(chr({_SEPARATOR}), {parts})), 1, 15))::bit(60)::bigint"

    def bucket(self, key: str) -> str:
        return f"(({self.quote(key)})::numeric - %s) / %s"  # floor()d by the caller's query

    def current_position(self, conn: Any) -> str:
        lsn = str(_rows(conn, "select pg_current_wal_lsn()::text")[0][0])
        high, low = lsn.split("/")
        return f"{(int(high, 16) << 32) + int(low, 16):016x}"


class MysqlDialect(Dialect):
    name = "mysql"
    integer_types = ("tinyint", "smallint", "mediumint", "int", "bigint")

    def connect(self, url: str) -> Any:
        from airflow_cdc.engine import mysql_client

        parts = urlsplit(url)
        return mysql_client.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            database=unquote(parts.path.lstrip("/")) or None,
            charset="utf8mb4",
            autocommit=True,
            # UTC, as the apply job writes: a timestamp column reads the same on both sides.
            init_command="SET time_zone = '+00:00'",
        )

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def target_name(self, table: str, url: str) -> str:
        # the apply job's default: the table's name in the target connection's database
        return unquote(urlsplit(url).path.lstrip("/")) + "." + table.rsplit(".", 1)[-1]

    def split(self, name: str) -> tuple[str, str]:
        schema, _, table = name.rpartition(".")
        if not schema:
            raise DriftError(f"{name!r}: name a MySQL table as database.table")
        return schema, table

    def canonical(self, column: Column) -> str:
        c, kind = self.quote(column.name), column.data_type
        if kind == "decimal":
            text = f"cast({c} as char)"
            return f"if(locate('.', {text}) > 0, trim(trailing '.' from trim(trailing '0' from {text})), {text})"
        if kind == "date":
            return f"date_format({c}, '%%Y-%%m-%%d')"
        if kind in ("datetime", "timestamp"):
            return f"date_format({c}, '%%Y-%%m-%%d %%H:%%i:%%s.%%f')"
        if kind in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
            return f"lower(hex({c}))"
        return f"cast({c} as char)"

    def row_hash(self, columns: Sequence[Column]) -> str:
        null = f"char({_NULL} using utf8mb4)"
        parts = ", ".join(f"coalesce({self.canonical(c)}, {null})" for c in columns)
        text = f"concat_ws(char({_SEPARATOR} using utf8mb4), {parts})"
        return f"cast(conv(substr(md5({text}), 1, 15), 16, 10) as unsigned)"

    def bucket(self, key: str) -> str:
        return f"(cast({self.quote(key)} as decimal(65, 0)) - %s) / %s"

    def current_position(self, conn: Any) -> str:
        found = _rows(conn, "show master status")
        if not found:
            raise DriftError("the MySQL server writes no binlog (SHOW MASTER STATUS is empty): it is not captured")
        file, pos = str(found[0][0]), int(found[0][1])
        index = int(file.rsplit(".", 1)[1]) if "." in file and file.rsplit(".", 1)[1].isdigit() else 0
        # The apply job's MySQL position: binlog index (8), position (16), row (8) in hex.
        return f"{index:08x}{pos:016x}00000000"


def dialect_for(url: str) -> Dialect:
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme in ("postgres", "postgresql"):
        return PostgresDialect()
    if scheme in ("mysql", "mariadb"):
        return MysqlDialect()
    raise DriftError(f"{scheme!r}: the drift check reads postgresql:// or mysql:// URLs")
