"""What the source asks the server before it reads: is it MariaDB or MySQL, can it stream row
changes to this user, where does its binlog stand now, and is a stored position still there.

Every problem found at start is reported at once, with its fix, before any binlog is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.sources.mysql.positions import (
    GtidSet,
    MariaDbGtidSet,
    MySqlGtidSet,
    parse_gtid_set,
)
from airflow_cdc.engine.sources.mysql.tracking import StartPoint


class ServerSetupError(CdcError):
    """The server (or the user's privileges) cannot give what CDC needs; the message says what
    to change."""


@dataclass(frozen=True)
class ServerInfo:
    mariadb: bool
    version: str
    #: MySQL's gtid_mode=ON (MariaDB always has GTIDs).
    gtid_mode: bool


def _variables(cur: Any, names: list[str]) -> dict[str, str]:
    cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ",".join(["%s"] * len(names)) + ")", names)
    return {str(name).lower(): str(value) for name, value in cur.fetchall()}


def check_server(conn: Any) -> ServerInfo:
    """The server's kind and settings; ServerSetupError naming every problem and its fix."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
        found = _variables(
            cur, ["log_bin", "binlog_format", "binlog_row_image", "gtid_mode", "binlog_row_value_options"]
        )
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        grants = [str(row[0]) for row in cur.fetchall()]
    mariadb = "mariadb" in version.lower()
    problems = []
    if found.get("log_bin", "OFF").upper() not in ("ON", "1"):
        problems.append("binary logging is off: start the server with log_bin (e.g. --log-bin=mysql-bin)")
    if found.get("binlog_format", "").upper() != "ROW":
        problems.append(
            f"binlog_format is {found.get('binlog_format')!r}, not ROW: set binlog_format=ROW in the server's "
            "configuration (SET GLOBAL binlog_format=ROW affects new sessions only)"
        )
    if found.get("binlog_row_image", "FULL").upper() != "FULL":
        problems.append(
            f"binlog_row_image is {found.get('binlog_row_image')!r}, not FULL: updates and deletes would lack "
            "columns; set binlog_row_image=FULL"
        )
    if "PARTIAL_JSON" in found.get("binlog_row_value_options", "").upper():
        problems.append(
            "binlog_row_value_options is PARTIAL_JSON: an update of a JSON column would log only the change, "
            "which the engine (like Debezium) cannot apply; set binlog_row_value_options=''"
        )
    missing = missing_privileges(grants, mariadb=mariadb)
    if missing:
        problems.append(
            f"the user lacks {', '.join(missing)}: GRANT {', '.join(missing)} ON *.* TO <user> "
            "(with SELECT on the captured tables)"
        )
    if problems:
        raise ServerSetupError("the server cannot stream row changes:\n  - " + "\n  - ".join(problems))
    return ServerInfo(
        mariadb=mariadb,
        version=version,
        gtid_mode=found.get("gtid_mode", "OFF").upper() == "ON",
    )


_GLOBAL_GRANT = re.compile(r"^GRANT (?P<privileges>.+?) ON \*\.\* TO ", re.IGNORECASE)


def missing_privileges(grants: list[str], *, mariadb: bool) -> list[str]:
    """The replication privileges ``SHOW GRANTS`` lines lack (on ``*.*``). MariaDB 10.5+ shows
    REPLICATION CLIENT as BINLOG MONITOR; either will do."""
    held: set[str] = set()
    for line in grants:
        match = _GLOBAL_GRANT.match(line)
        if match:
            held.update(p.strip().upper() for p in match.group("privileges").split(","))
    if "ALL PRIVILEGES" in held or "ALL" in held:
        return []
    missing = []
    if "REPLICATION SLAVE" not in held and "REPLICATION REPLICA" not in held:
        missing.append("REPLICATION SLAVE")
    if not held & {"REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"}:
        missing.append("BINLOG MONITOR" if mariadb else "REPLICATION CLIENT")
    return missing


def binlog_status(conn: Any) -> tuple[str, int]:
    """The current binlog file and position (``SHOW BINARY LOG STATUS`` on MySQL 8.4, ``SHOW
    MASTER STATUS`` before; MariaDB 10.5+ knows both ``SHOW BINLOG STATUS`` and the old one)."""
    with conn.cursor() as cur:
        for statement in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
            try:
                cur.execute(statement)
            except Exception as exc:
                if "syntax" in str(exc).lower():
                    continue
                raise
            row = cur.fetchone()
            if row is None:
                raise ServerSetupError("binary logging is off: start the server with log_bin")
            return str(row[0]), int(row[1])
    raise ServerSetupError("the server answers neither SHOW BINARY LOG STATUS nor SHOW MASTER STATUS")


def executed_gtids(conn: Any, server: ServerInfo) -> GtidSet | None:
    """Every transaction in the binlog so far (MariaDB ``@@gtid_binlog_pos``, MySQL
    ``@@gtid_executed``); None for MySQL without GTIDs."""
    if not server.mariadb and not server.gtid_mode:
        return None
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.gtid_binlog_pos" if server.mariadb else "SELECT @@GLOBAL.gtid_executed")
        row = cur.fetchone()
    text = row[0].decode() if isinstance(row[0], bytes) else str(row[0] or "")
    return MariaDbGtidSet.parse(text) if server.mariadb else MySqlGtidSet.parse(text)


def current_position(conn: Any, server: ServerInfo) -> StartPoint:
    """Where the binlog stands now: streaming from here reads what is written from now on.
    Inside a consistent-snapshot transaction it is the snapshot's position, provided no
    transaction commits between the snapshot and this read (the caller ensures it)."""
    file, pos = binlog_status(conn)
    return StartPoint(executed_gtids(conn, server), file, pos)


def check_available(conn: Any, server: ServerInfo, start: StartPoint) -> None:
    """BinlogPurgedError (from ``binlog.py``) when the server no longer has the binlog that
    follows ``start``."""
    from airflow_cdc.engine.sources.mysql.binlog import BinlogPurgedError

    fix = "take a new snapshot (snapshot.mode=when_needed, or reset the offsets)"
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        files = [str(row[0]) for row in cur.fetchall()]
        if not files:
            return
        if start.gtids is not None and not start.gtids.empty:
            if server.mariadb:
                cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (files[0],))
                row = cur.fetchone()
                oldest = MariaDbGtidSet.parse(str(row[0] or "")) if row else MariaDbGtidSet()
                # The oldest binlog begins at ``oldest``: each domain must be read from there on.
                lost = [
                    f"{d}-{s}-{n}"
                    for d, (s, n) in oldest.domains.items()
                    if d in start.gtids.domains and start.gtids.domains[d][1] < n  # type: ignore[union-attr]
                ]
            else:
                cur.execute("SELECT @@GLOBAL.gtid_purged")
                purged = parse_gtid_set(str(cur.fetchone()[0] or ""))
                lost = [] if start.gtids.covers(purged) else [str(purged)]
            if lost:
                raise BinlogPurgedError(
                    f"the server purged binlogs with transactions after {start.gtids} (up to {', '.join(lost)}): "
                    f"those changes are lost to this engine; {fix}"
                )
            return
    if start.file and start.file not in files:
        raise BinlogPurgedError(
            f"binlog {start.file} is no longer on the server (oldest: {files[0]}): changes since "
            f"{start.file}:{start.pos} are lost to this engine; {fix}"
        )
