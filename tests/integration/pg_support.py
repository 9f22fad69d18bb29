"""Shared by the PostgreSQL tests: a write load, an engine child process, and replaying the
captured events into a table image to compare with the source."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

CHILD = Path(__file__).with_name("engine_child.py")


def engine_config(pg_server: Any, database: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": f"pg-{database}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": "shop",
        "database.hostname": pg_server.host,
        "database.port": pg_server.port,
        "database.user": pg_server.user,
        "database.dbname": database,
        "slot.name": f"slot_{database}",
        "publication.name": f"pub_{database}",
        "offset.storage": "memory",
        "offset.flush.interval.ms": 50,
        "poll.interval.ms": 100,
        **extra,
    }


#: The signal table's rows (signals, watermarks) are change events too, but no target's rows.
SIGNAL_TABLE = "debezium_signal"


def apply(events: list[dict[str, Any]], image: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Apply change events in order: the target a consumer would build."""
    image = {} if image is None else image
    for event in events:
        value = event.get("value")
        if value is None or value["source"].get("table") == SIGNAL_TABLE:
            continue  # a tombstone, or a signal
        key = json.dumps(event["key"], sort_keys=True)
        if value["op"] in ("c", "r", "u"):
            image[key] = value["after"]
        elif value["op"] == "d":
            image.pop(key, None)
    return image


def source_image(conn: psycopg.Connection[Any], table: str = "t") -> dict[str, dict[str, Any]]:
    cursor = conn.execute(f"select * from {table}")
    names = [c.name for c in cursor.description or []]
    return {json.dumps({"id": row[0]}, sort_keys=True): dict(zip(names, row, strict=True)) for row in cursor}


def create_load_table(conn: psycopg.Connection[Any], rows: int) -> None:
    conn.execute("create table t (id int primary key, v text, n int)")
    conn.execute("insert into t select g, 'v' || g, g from generate_series(1, %s) g", (rows,))


class WriteLoad:
    """Random inserts, updates and deletes in small transactions, on its own thread."""

    def __init__(
        self, dsn: str, first_new_id: int, seed: int = 1, *, deletes: bool = True, per_second: float | None = None
    ) -> None:
        self._dsn, self._next_id, self._rng = dsn, first_new_id, random.Random(seed)
        self._deletes = deletes
        # A paced load, for a test that waits long with the load running (a broker away, an
        # engine killed and started again): unpaced, it reaches the cap below in about 100 s on
        # a quiet machine, and then no write comes any more.
        self._interval = 1 / per_second if per_second else 0.0
        self._stop = threading.Event()
        self.transactions = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> WriteLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error:
            raise self.error

    def _run(self) -> None:
        try:
            with psycopg.connect(self._dsn, autocommit=False) as conn:
                due = time.monotonic()
                while not self._stop.is_set() and self.transactions < 200_000:
                    for _ in range(self._rng.randint(1, 5)):
                        self._statement(conn)
                    conn.commit()
                    self.transactions += 1
                    if self._interval:
                        due += self._interval
                        self._stop.wait(max(0.0, due - time.monotonic()))
        except BaseException as exc:
            self.error = exc

    def _statement(self, conn: psycopg.Connection[Any]) -> None:
        roll = self._rng.random()
        target = self._rng.randint(1, max(1, self._next_id - 1))
        if roll < 0.4:
            conn.execute("insert into t values (%s, %s, %s)", (self._next_id, f"new{self._next_id}", self._next_id))
            self._next_id += 1
        elif roll < 0.8 or not self._deletes:
            conn.execute("update t set v = v || 'x', n = n + 1 where id = %s", (target,))
        else:
            conn.execute("delete from t where id = %s", (target,))


def start_child(config: dict[str, Any], log: Path, offsets: Path) -> subprocess.Popen[bytes]:
    # stderr to a file, never an unread pipe: a child that logs a lot must not block on it.
    with open(log.with_suffix(".stderr"), "ab") as stderr:
        return subprocess.Popen([sys.executable, str(CHILD), json.dumps(config), str(log), str(offsets)], stderr=stderr)


def child_stderr(log: Path, lines: int = 30) -> str:
    path = log.with_suffix(".stderr")
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def image_diff(expected: dict[str, dict[str, Any]], actual: dict[str, dict[str, Any]]) -> str:
    missing = [k for k in expected if k not in actual]
    extra = [k for k in actual if k not in expected]
    wrong = [k for k in expected if k in actual and actual[k] != expected[k]]
    return (
        f"missing {len(missing)} {missing[:5]}, extra {len(extra)} {extra[:5]}, "
        f"different {len(wrong)} {[(k, expected[k], actual[k]) for k in wrong[:3]]}"
    )


def wait_for_target(
    log: Path, expected: dict[str, dict[str, Any]], child: subprocess.Popen[bytes], timeout: float
) -> None:
    """Wait until replaying the log gives ``expected``; fail early, and say why, otherwise."""
    from airflow_cdc.engine.testing import wait_until

    try:
        wait_until(
            lambda: child.poll() is not None or apply(read_events(log)) == expected, timeout, "target equals source"
        )
    except TimeoutError:
        raise AssertionError(
            f"target never equalled source: {image_diff(expected, apply(read_events(log)))}\n"
            f"engine stderr:\n{child_stderr(log)}"
        ) from None
    assert child.poll() is None, f"the engine exited with {child.returncode}:\n{child_stderr(log)}"


def read_events(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    events = []
    data = log.read_bytes()
    # A reader may catch the child's write half-done: only whole lines count.
    lines = data[: data.rfind(b"\n") + 1].splitlines()
    for index, line in enumerate(lines):
        if not line.startswith(b"{"):
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            # Only the last line of a run killed mid-write may be cut (the next run's marker ends it).
            if index + 1 < len(lines) and lines[index + 1].startswith(b"run "):
                continue
            raise
    return events
