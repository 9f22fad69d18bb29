"""Offsets in a database table (Debezium's ``JdbcOffsetBackingStore``): PostgreSQL through
psycopg 3, MySQL and MariaDB through PyMySQL.

The table is Debezium's, so either can read what the other wrote::

    CREATE TABLE debezium_offset_storage (id VARCHAR(36) NOT NULL,
        offset_key VARCHAR(1255), offset_val VARCHAR(1255),
        record_insert_ts TIMESTAMP NOT NULL, record_insert_seq INTEGER NOT NULL)

``offset_key`` is Connect's ``["<engine name>", {partition}]``, ``offset_val`` the offset JSON; a
key's latest row (by ``record_insert_ts``, ``record_insert_seq``) wins, as when Debezium loads
the table. Unlike Debezium, which deletes the whole table and inserts its own offsets again on
every flush, a write here replaces only the rows of the keys it writes, so several engines can
share one table. Every write is one transaction: all of its offsets or none.

Lost connections are retried ``offset.storage.jdbc.connection.retry.max.attempts`` times,
``offset.storage.jdbc.connection.wait.retry.delay.ms`` apart, on a new connection; then the
operation raises :class:`RetriableError`. Connects and statements have bounded timeouts.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.errors import OffsetError, RetriableError
from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.storage.base import CachedOffsetStore, connect_key, encode_entries, parse_connect_key

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TABLE_NAME = "debezium_offset_storage"
#: Debezium's DDL (JdbcOffsetBackingStoreConfig.DEFAULT_TABLE_DDL), made idempotent.
TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} (id VARCHAR(36) NOT NULL, "
    "offset_key VARCHAR(1255), offset_val VARCHAR(1255), "
    "record_insert_ts TIMESTAMP NOT NULL, record_insert_seq INTEGER NOT NULL)"
)
#: Debezium formats the name into its SQL unquoted; so do we, after checking it is a plain
#: (optionally schema-qualified) identifier.
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$")
#: Connect and statement timeout: no operation waits longer on an unresponsive server.
IO_TIMEOUT_S = 30
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}
_SCHEMES = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql"}
#: pgjdbc's TLS parameters, which are libpq's of the same names.
_PG_TLS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword")
_QUERY_PARAMS = {"postgresql": {"user", "password", *_PG_TLS}, "mysql": {"user", "password"}}


@dataclass(frozen=True)
class JdbcUrl:
    """What a ``jdbc:postgresql://``, ``jdbc:mysql://`` or ``jdbc:mariadb://`` URL names."""

    dialect: str  # "postgresql" or "mysql" (MariaDB included)
    host: str
    port: int
    database: str
    user: str = ""
    password: str = field(default="", repr=False)
    sslmode: str = ""
    #: The other TLS parameters of a PostgreSQL URL (sslrootcert, sslcert, sslkey, sslpassword).
    tls: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def where(self) -> str:
        """The server and database, without credentials, for messages."""
        return f"{self.dialect}://{self.host}:{self.port}/{self.database}"


def parse_jdbc_url(url: str) -> JdbcUrl:
    """Parse a JDBC URL; ValueError saying what is wrong with it."""
    if not url.startswith("jdbc:"):
        # The value is not echoed: it may hold a password.
        raise ValueError("is not a JDBC URL (it must start with jdbc:)")
    parts = urlsplit(url[len("jdbc:") :])
    dialect = _SCHEMES.get(parts.scheme.lower())
    if dialect is None:
        raise ValueError(f"unsupported JDBC subprotocol {parts.scheme!r}: use postgresql, mysql or mariadb")
    if not parts.netloc or "," in parts.netloc:
        raise ValueError("the URL must name exactly one host: jdbc:<subprotocol>://host:port/database")
    try:
        port = parts.port or _DEFAULT_PORTS[dialect]
    except ValueError as exc:
        raise ValueError(f"bad port in the JDBC URL: {exc}") from None
    database = unquote(parts.path.lstrip("/"))
    if not database:
        raise ValueError("the URL must name a database: jdbc:<subprotocol>://host:port/database")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(params) - _QUERY_PARAMS[dialect])
    if unknown:
        supported = ", ".join(sorted(_QUERY_PARAMS[dialect]))
        raise ValueError(f"unsupported URL parameter(s) {', '.join(unknown)} (supported: {supported})")
    return JdbcUrl(
        dialect=dialect,
        host=parts.hostname or "localhost",
        port=port,
        database=database,
        user=unquote(parts.username or "") or params.get("user", ""),
        password=unquote(parts.password or "") or params.get("password", ""),
        sslmode=params.get("sslmode", ""),
        tls={k: params[k] for k in _PG_TLS[1:] if params.get(k)} if dialect == "postgresql" else {},
    )


class _Dialect:
    """What differs between the drivers: connecting, and which errors mean a lost connection."""

    transient: tuple[type[BaseException], ...]
    errors: tuple[type[BaseException], ...]

    def __init__(self, url: JdbcUrl, user: str, password: str) -> None:
        self.url, self.user, self.password = url, user, password

    def connect(self) -> Any:
        raise NotImplementedError


class _Postgres(_Dialect):
    def __init__(self, url: JdbcUrl, user: str, password: str) -> None:
        super().__init__(url, user, password)
        import psycopg

        self._psycopg = psycopg
        self.transient = (psycopg.OperationalError, psycopg.InterfaceError)
        self.errors = (psycopg.Error,)

    def connect(self) -> Any:
        params: dict[str, Any] = {
            "host": self.url.host,
            "port": self.url.port,
            "dbname": self.url.database,
            "connect_timeout": IO_TIMEOUT_S,
            "options": f"-c statement_timeout={IO_TIMEOUT_S * 1000}",
            "application_name": "airflow-cdc offset store",
        }
        if self.user:
            params["user"] = self.user
        if self.password:
            params["password"] = self.password
        if self.url.sslmode:
            params["sslmode"] = self.url.sslmode
        params.update(self.url.tls)
        return self._psycopg.connect(autocommit=False, **params)


class _MySQL(_Dialect):
    def __init__(self, url: JdbcUrl, user: str, password: str) -> None:
        super().__init__(url, user, password)
        import pymysql

        self._pymysql = pymysql
        self.transient = (pymysql.err.OperationalError, pymysql.err.InterfaceError)
        self.errors = (pymysql.err.MySQLError,)

    def connect(self) -> Any:
        return mysql_client.connect(
            host=self.url.host,
            port=self.url.port,
            user=self.user or "root",
            password=self.password,
            database=self.url.database,
            charset="utf8mb4",
            autocommit=False,
            connect_timeout=IO_TIMEOUT_S,
            read_timeout=IO_TIMEOUT_S,
            write_timeout=IO_TIMEOUT_S,
        )


class JdbcOffsetStore(CachedOffsetStore):
    """``offset.storage=jdbc``: ``offset.storage.jdbc.url``, ``.user``, ``.password``,
    ``offset.storage.jdbc.offset.table.name``."""

    def __init__(
        self,
        engine_name: str,
        *,
        url: str,
        user: str = "",
        password: str = "",
        table: str = DEFAULT_TABLE_NAME,
        retry_delay_ms: int = 3_000,
        max_attempts: int = 5,
    ) -> None:
        super().__init__(engine_name)
        self.url = parse_jdbc_url(url)
        if not TABLE_NAME.match(table):
            raise ValueError(f"{table!r} is not a plain table name ([schema.]table, letters, digits, _ and $)")
        self.table = table
        self.retry_delay_s = retry_delay_ms / 1000
        self.max_attempts = max(1, max_attempts)
        dialect = _Postgres if self.url.dialect == "postgresql" else _MySQL
        self._dialect = dialect(self.url, user or self.url.user, password or self.url.password)
        self._stopping = threading.Event()
        self._conn: Any = None
        self._seq = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._stopping.clear()
        with self._lock:
            self._run("creating the table", self._create_table)
            rows, self._seq = self._run("reading the offsets", self._load)
            data: dict[str, Offset] = {}
            for key, value in rows:
                self._apply(data, key, value)
            self._data = data
        log.info("JDBC offset store: %d offset(s) of %r in %s", len(data), self.engine_name, self.url.where)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._close()

    def _create_table(self, conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute(TABLE_DDL.format(table=self.table))
        conn.commit()

    def _load(self, conn: Any) -> tuple[list[tuple[str, str | None]], int]:
        with conn.cursor() as cur:
            cur.execute(f"SELECT offset_key, offset_val FROM {self.table} ORDER BY record_insert_ts, record_insert_seq")
            rows = [(str(key), value) for key, value in cur.fetchall()]
            cur.execute(f"SELECT COALESCE(MAX(record_insert_seq), 0) FROM {self.table}")
            row = cur.fetchone()
        conn.commit()  # end the read transaction: no snapshot or lock stays open
        return rows, int(row[0]) if row else 0

    def _apply(self, data: dict[str, Offset], key: str, value: str | None) -> None:
        try:
            name, partition = parse_connect_key(key)
        except OffsetError:
            log.warning("JDBC offset store: skipping a row with a foreign key in %s: %r", self.table, key[:200])
            return
        if name != self.engine_name:
            return
        ours = connect_key(name, partition)
        if value is None:
            data.pop(ours, None)
            return
        try:
            data[ours] = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise OffsetError(f"JDBC offset store: the offset of {ours} in {self.table} is not JSON: {exc}") from exc

    # -- reads and writes ----------------------------------------------------------------------
    def write(self, entries: Iterable[tuple[Partition, Offset]]) -> None:
        encoded = encode_entries(self.engine_name, entries)
        if not encoded:
            return
        rows = {key: value.decode() for key, value in encoded.items()}
        with self._lock:
            self._run(f"writing {len(rows)} offset(s)", lambda conn: self._replace(conn, rows))
            for key, value in rows.items():
                self._data[key] = orjson.loads(value)

    def delete(self, partition: Partition) -> None:
        key = connect_key(self.engine_name, partition)
        with self._lock:
            self._run("deleting an offset", lambda conn: self._replace(conn, {key: None}))
            self._data.pop(key, None)

    def _replace(self, conn: Any, rows: Mapping[str, str | None]) -> None:
        """One transaction: drop the keys' rows, insert the new ones (none for a deletion)."""
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        seq = self._seq
        try:
            with conn.cursor() as cur:
                for key, value in rows.items():
                    cur.execute(f"DELETE FROM {self.table} WHERE offset_key = %s", (key,))
                    if value is None:
                        continue
                    seq += 1
                    cur.execute(
                        f"INSERT INTO {self.table} (id, offset_key, offset_val, record_insert_ts, record_insert_seq)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        (str(uuid.uuid4()), key, value, now, seq),
                    )
            conn.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise
        self._seq = seq

    # -- connection and retries ----------------------------------------------------------------
    def _run(self, what: str, work: Callable[[Any], T]) -> T:
        """``work(connection)``; on a lost connection, reconnect and try again (bounded)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                if self._conn is None:
                    self._conn = self._dialect.connect()
                return work(self._conn)
            except self._dialect.transient as exc:
                self._close()
                if attempt >= self.max_attempts or self._stopping.is_set():
                    raise RetriableError(
                        f"JDBC offset store: {what} failed at {self.url.where} (offset.storage.jdbc.url) "
                        f"after {attempt} attempt(s): {type(exc).__name__}: {exc}".rstrip()
                    ) from exc
                log.warning("JDBC offset store: %s failed (%s); again in %.1fs", what, exc, self.retry_delay_s)
                if self._stopping.wait(self.retry_delay_s):
                    raise RetriableError(f"JDBC offset store: {what} interrupted by stop") from exc
            except self._dialect.errors as exc:
                raise OffsetError(
                    f"JDBC offset store: {what} failed in table {self.table} at {self.url.where}: "
                    f"{type(exc).__name__}: {exc}".rstrip()
                ) from exc

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
