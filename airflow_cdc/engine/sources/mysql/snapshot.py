"""The initial snapshot: every captured table read in one consistent-snapshot transaction, and
the binlog position that transaction stands at, so streaming continues from exactly there.

MariaDB tells the position of a consistent snapshot without any lock: after ``START
TRANSACTION WITH CONSISTENT SNAPSHOT`` its status variables ``binlog_snapshot_file`` /
``binlog_snapshot_position`` name the binlog point the snapshot sees (the binlog and InnoDB
commit together), and ``BINLOG_GTID_POS`` turns it into a GTID state. MySQL has no such
variables, so there the position is read under a short ``FLUSH TABLES WITH READ LOCK``, taken
before the transaction starts and released right after the position is read (no commit can
slip between the two while the lock is held) - Debezium's "minimal" locking.

The tables' definitions are the ones at that point: information_schema is read before the
transaction starts and again after its position is read, and the transaction is started again
if a DDL changed a captured table in between (information_schema shows a DDL only once it is in
the binlog: it waits for the DDL's metadata lock). Rows are read by column name with those
definitions, so a DDL after the point on a table not yet read (``ADD COLUMN ... FIRST`` returns
at once: the snapshot holds no lock on it) changes nothing read; a table the consistent read
cannot serve any more (rebuilt, its column dropped or renamed, the table dropped) raises
:class:`TableChangedError`, and the connector takes the snapshot again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet
from airflow_cdc.engine.sources.mysql.server import ServerInfo, current_position
from airflow_cdc.engine.sources.mysql.snapshot_client import ERRORS, unbuffered_cursor
from airflow_cdc.engine.sources.mysql.snapshot_client import connect as snapshot_connect
from airflow_cdc.engine.sources.mysql.tracking import StartPoint

log = logging.getLogger(__name__)

TableKey = tuple[str, str]
Definitions = Callable[[Any], dict[TableKey, Table]]
#: Attempts at a point no DDL of a captured table crosses, before giving up (retriably).
ATTEMPTS = 5
#: Table definition has changed (a rebuild since the read view), unknown column, no such table.
_CHANGED = {1412: "rebuilt", 1054: "a column dropped or renamed", 1146: "dropped or renamed"}


class TableChangedError(CdcError):
    """A table changed after the snapshot's point in a way its consistent read cannot serve."""


class ConsistentSnapshot:
    """One connection holding a consistent-snapshot transaction; ``position`` is its point and
    ``tables`` the definitions ``definitions(conn)`` gives at that point."""

    def __init__(self, connection: dict[str, Any], server: ServerInfo, definitions: Definitions) -> None:
        # mysqlclient when installed: it parses rows in C (snapshot_client.py).
        self.conn = snapshot_connect(connection, autocommit=True, init_command="SET time_zone='+00:00'")
        try:
            self._begin(server, definitions)
        except BaseException:
            self.close()
            raise

    def _begin(self, server: ServerInfo, definitions: Definitions) -> None:
        for attempt in range(ATTEMPTS):
            before = definitions(self.conn)
            self._start(server)
            self.tables = definitions(self.conn)
            if self.tables == before:
                return
            changed = sorted(
                f"{d}.{t}"
                for d, t in before.keys() | self.tables.keys()
                if before.get((d, t)) != self.tables.get((d, t))
            )
            log.info(
                "a DDL changed %s while the snapshot started (attempt %d): starting again",
                ", ".join(changed),
                attempt + 1,
            )
            with self.conn.cursor() as cur:
                cur.execute("ROLLBACK")
        raise RetriableError(
            f"DDL kept changing captured tables while the snapshot started ({ATTEMPTS} attempts): trying again later"
        )

    def _start(self, server: ServerInfo) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            if server.mariadb:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                cur.execute("SHOW STATUS WHERE Variable_name IN ('binlog_snapshot_file', 'binlog_snapshot_position')")
                status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
                file, pos = status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
                gtids = cur.fetchone()[0]
                self.position = StartPoint(MariaDbGtidSet.parse(str(gtids or "")), file, pos)
            else:
                cur.execute("FLUSH TABLES WITH READ LOCK")
                try:
                    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                    self.position = current_position(self.conn, server)
                finally:
                    cur.execute("UNLOCK TABLES")

    def rows(self, table: Table, fetch: int, select: Sequence[str] = ()) -> Iterator[tuple[Any, ...]]:
        """The table's rows as the snapshot sees them, streamed (an unbuffered cursor): the
        ``select`` list (``snapshot_columns.py``), by default its definition's columns by name.
        TableChangedError when the consistent read cannot serve them."""
        columns = ", ".join(select or [_quote(c.name) for c in table.columns])
        try:
            with unbuffered_cursor(self.conn) as cur:
                cur.execute(f"SELECT {columns} FROM {_quote(table.database)}.{_quote(table.name)}")
                while batch := cur.fetchmany(fetch):
                    yield from batch
        except ERRORS as exc:
            code = exc.args[0] if exc.args else 0
            if code not in _CHANGED:
                raise
            raise TableChangedError(
                f"{table.database}.{table.name} was {_CHANGED[code]} after the snapshot's point ({exc.args[-1]})"
            ) from exc

    def close(self) -> None:
        with contextlib.suppress(*ERRORS):
            self.conn.close()


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
