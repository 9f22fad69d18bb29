"""What a scenario checks besides the target: how far the engine's committed position is behind
the source (the slot's lag; the binlog's), and what it may have leaked - replication slots,
server connections, threads, descriptors, child processes, temp files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg

from airflow_cdc.engine.testing import wait_until

#: "Back near zero": what a caught-up engine may still be behind (WAL of a checkpoint, of the
#: heartbeat's last round).
LAG_NEAR_ZERO = 16 * 1024
#: Threads, descriptors and server connections a long-running engine may gain after faults it
#: recovered from (a pool that grew by one, the API's keep-alive connection, an incremental
#: snapshot's reader); more is a leak per fault.
GROWTH_SLACK = (4, 4, 1)


def pg_lag(conn: psycopg.Connection[Any], slot: str) -> int | None:
    row = conn.execute(
        "select pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint"
        " from pg_replication_slots where slot_name = %s",
        (slot,),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def mariadb_lag(conn: Any, offsets_file: Path) -> int | None:
    """Bytes between the committed binlog position and the server's; None before a commit. A
    committed position in an older binlog file counts the rest of that file and all of later."""
    if not offsets_file.exists():
        return None
    offsets = [o for o in json.loads(offsets_file.read_text()).values() if "file" in o]
    if not offsets:
        return None
    with conn.cursor() as cur:
        cur.execute("show binary logs")
        sizes = {name: int(size) for name, size, *_ in cur.fetchall()}
        cur.execute("show master status")
        current, position = cur.fetchone()[:2]
    committed, pos = offsets[0]["file"], int(offsets[0]["pos"])
    if committed == current:
        return max(0, int(position) - pos)
    later = [name for name in sizes if committed < name < current]
    return sizes.get(committed, 0) - pos + sum(sizes[n] for n in later) + int(position)


#: The engine's connections to PostgreSQL: every backend of the captured database and every
#: walsender, but ours and the write load's (the engine and Debezium name theirs differently).
PG_ENGINE_BACKENDS = (
    "select pid, application_name, backend_type, state from pg_stat_activity"
    " where (datname = current_database() or backend_type = 'walsender')"
    " and pid <> pg_backend_pid() and application_name <> %s"
)


def pg_connections(conn: psycopg.Connection[Any], workload: str) -> list[tuple[Any, ...]]:
    return conn.execute(PG_ENGINE_BACKENDS, (workload,)).fetchall()


def pg_leaks(conn: psycopg.Connection[Any], slot: str, workload: str) -> list[str]:
    """After a clean stop: the engine's slot alone, inactive; none of its connections left."""
    problems = []
    slots = conn.execute("select slot_name, active, temporary from pg_replication_slots").fetchall()
    if slots != [(slot, False, False)]:
        problems.append(f"replication slots {slots}, wanted only {slot!r}, inactive")
    left = pg_connections(conn, workload)
    if left:
        problems.append(f"engine connections left on the server: {left}")
    return problems


def mariadb_connections(conn: Any, engine_user: str) -> list[tuple[Any, ...]]:
    """The engine's connections: its user's, ours excepted (the load has a user of its own)."""
    with conn.cursor() as cur:
        cur.execute(
            "select id, command, state from information_schema.processlist"
            " where id <> connection_id() and (user = %s or command like 'Binlog Dump%%')",
            (engine_user,),
        )
        return list(cur.fetchall())


def mariadb_leaks(conn: Any, engine_user: str) -> list[str]:
    """After a clean stop: no connection of the engine's user but ours, no binlog dump. A dump
    thread waiting for events notices its client gone only when it next writes: a binlog
    rotation gives every dump thread something to write."""
    with conn.cursor() as cur:
        cur.execute("flush binary logs")
    try:
        wait_until(lambda: not mariadb_connections(conn, engine_user), 30, "the engine's connections gone")
    except TimeoutError:
        return [f"engine connections left on the server: {mariadb_connections(conn, engine_user)}"]
    return []


def growth(samples: dict[int, list[tuple[int, ...]]], what: tuple[str, ...], slack: tuple[int, ...]) -> list[str]:
    """``samples``: per engine process, counts (threads, descriptors, server connections) at
    its first steady state and after each recovery; a count that grew past its slack leaks."""
    problems = []
    for pid, counts in samples.items():
        for index, name in enumerate(what):
            first, most = counts[0][index], max(c[index] for c in counts)
            if most > first + slack[index]:
                series = [c[index] for c in counts]
                problems.append(f"{name} of engine pid {pid} grew from {first} to {most} ({series})")
    return problems


def temp_files(*directories: Path) -> list[str]:
    """Temp files left behind after a clean stop (the sinks' and stores' ``.*.tmp``, anything in
    the engine's TMPDIR)."""
    left = []
    for directory in directories:
        if not directory.exists():
            continue
        for path in directory.rglob("*"):
            if path.name.endswith(".tmp") or path.parent.name == "engine-tmp":
                left.append(str(path))
    return [f"temp files left: {left[:5]}"] if left else []
