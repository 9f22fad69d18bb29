"""The initial snapshot: every captured table read in one consistent-snapshot transaction, and
the binlog position that transaction stands at, so streaming continues from exactly there.

MariaDB tells the position of a consistent snapshot without any lock: after ``START
TRANSACTION WITH CONSISTENT SNAPSHOT`` its status variables ``binlog_snapshot_file`` /
``binlog_snapshot_position`` name the binlog point the snapshot sees (the binlog and InnoDB
commit together), and ``BINLOG_GTID_POS`` turns it into a GTID state. MySQL has no such
variables, so there the position is read under a short ``FLUSH TABLES WITH READ LOCK``, taken
before the transaction starts and released right after the position is read (no commit can
slip between the two while the lock is held) - Debezium's "minimal" locking.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pymysql
import pymysql.cursors

from airflow_cdc.engine import mysql_client
from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet
from airflow_cdc.engine.sources.mysql.server import ServerInfo, current_position
from airflow_cdc.engine.sources.mysql.tracking import StartPoint


class ConsistentSnapshot:
    """One connection holding a consistent-snapshot transaction; ``position`` is its point."""

    def __init__(self, connection: dict[str, Any], server: ServerInfo) -> None:
        self.conn = mysql_client.connect(
            **{**connection, "charset": "utf8mb4"}, autocommit=True, init_command="SET time_zone='+00:00'"
        )
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

    def rows(self, database: str, table: str, fetch: int) -> Iterator[tuple[Any, ...]]:
        """The table's rows as the snapshot sees them, streamed (an unbuffered cursor)."""
        with self.conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(f"SELECT * FROM `{database.replace('`', '``')}`.`{table.replace('`', '``')}`")
            while batch := cur.fetchmany(fetch):
                yield from batch

    def close(self) -> None:
        with contextlib.suppress(pymysql.MySQLError):
            self.conn.close()
