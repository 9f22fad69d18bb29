"""Shared by the MySQL/MariaDB engine tests: the engine's config, a write load (pymysql), the
source table's image to compare with the replayed events (replaying: ``pg_support.apply``) and a
consumer that collects the events."""

from __future__ import annotations

import contextlib
import json
import random
import threading
from typing import Any

import pymysql


def engine_config(server: Any, database: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": f"my-{database}",
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "topic.prefix": "shop",
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password,
        "database.include.list": database,
        "offset.storage": "memory",
        "offset.flush.interval.ms": 50,
        "poll.interval.ms": 100,
        **extra,
    }


def source_image(conn: Any, table: str = "t") -> dict[str, dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"select * from {table}")
        return {json.dumps({"id": row["id"]}, sort_keys=True): dict(row) for row in cur.fetchall()}


def create_load_table(conn: Any, rows: int) -> None:
    with conn.cursor() as cur:
        cur.execute("create table t (id int primary key, v varchar(200), n int)")
        for start in range(1, rows + 1, 1000):
            values = ",".join(f"({i}, 'v{i}', {i})" for i in range(start, min(rows, start + 999) + 1))
            cur.execute(f"insert into t values {values}")


class WriteLoad:
    """Random inserts, updates and deletes in small transactions, on its own thread. With
    ``survive_restarts`` a lost connection is opened again (the transaction in flight may or may
    not have committed: the load goes on with new ids, and the test compares with what the
    source has at the end)."""

    def __init__(self, connect: Any, first_new_id: int, seed: int = 1, *, survive_restarts: bool = False) -> None:
        self._connect, self._next_id, self._rng = connect, first_new_id, random.Random(seed)
        self._survive_restarts = survive_restarts
        self._stop = threading.Event()
        self.transactions = 0
        self.connection_errors = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

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
            while not self._stop.is_set():
                try:
                    self._transactions()
                    return
                except (pymysql.OperationalError, pymysql.InterfaceError):
                    if not self._survive_restarts:
                        raise
                    self.connection_errors += 1
                    self._stop.wait(0.05)  # the server is down: try again soon
        except BaseException as exc:
            self.error = exc

    def _transactions(self) -> None:
        conn = self._connect(autocommit=False)
        try:
            cur = conn.cursor()
            while not self._stop.is_set() and self.transactions < 200_000:
                for _ in range(self._rng.randint(1, 5)):
                    self._statement(cur)
                conn.commit()
                self.transactions += 1
        finally:
            with contextlib.suppress(pymysql.Error):  # a lost connection is closed already
                conn.close()

    def _statement(self, cur: Any) -> None:
        roll = self._rng.random()
        target = self._rng.randint(1, max(1, self._next_id - 1))
        if roll < 0.4:
            cur.execute(
                "insert into t (id, v, n) values (%s, %s, %s)", (self._next_id, f"new{self._next_id}", self._next_id)
            )
            self._next_id += 1
        elif roll < 0.8:
            cur.execute("update t set v = concat(v, 'x'), n = n + 1 where id = %s", (target,))
        else:
            cur.execute("delete from t where id = %s", (target,))


class Collector:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.schema_changes: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        if "." not in item.topic:
            # The schema change topic (named topic.prefix): these tests read the tables'
            # topics; schema change events are checked by test_mariadb_oracle.py.
            self.schema_changes.append(json.loads(item.value))
            return
        event = {
            "key": json.loads(item.key) if item.key else None,
            "value": json.loads(item.value) if item.value else None,
        }
        with self.lock:
            self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def changes(self) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["value"] is not None]


class DdlLoad:
    """ALTER TABLE on ``table`` (``id int primary key, a varchar(20), b int``) over and over, on
    its own thread, with updates between: nullable columns added FIRST and AFTER (a new name
    each time, never a default: a DDL that fills rows emits no events), ``b`` widened and narrowed
    back, the added columns dropped. Renames stay out: a target built from events alone keeps a
    renamed column's old name (the apply job's schema evolution is another matter)."""

    def __init__(self, connect: Any, table: str, pause_s: float = 0.15) -> None:
        self._connect, self._table, self._pause = connect, table, pause_s
        self._stop = threading.Event()
        self.statements = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DdlLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.error:
            raise self.error

    def _cycle(self, n: int) -> list[str]:
        t = self._table
        statements = [
            f"alter table {t} add column f{n} int null first",  # instant: a read view sees the new layout
            f"update {t} set b = b + 1, f{n} = id where id % 5 = {n % 5}",
            f"alter table {t} add column m{n} varchar(10) null after a",
            f"update {t} set m{n} = 'x{n}', b = b + 1 where id % 7 = {n % 7}",
            f"alter table {t} drop column f{n}",
            f"alter table {t} drop column m{n}",
        ]
        if n % 4 == 3:  # a rebuild now and then: a read view older than it is refused (1412)
            statements += [
                f"alter table {t} modify b bigint not null",
                f"update {t} set b = b + 3000000000 where id % 11 = {n % 11}",
                f"update {t} set b = b - 3000000000 where b > 2000000000",
                f"alter table {t} modify b int not null",
            ]
        return statements

    def _run(self) -> None:
        try:
            with self._connect() as conn, conn.cursor() as cur:
                n = 0
                while not self._stop.is_set():
                    for statement in self._cycle(n):
                        cur.execute(statement)
                        self.statements += 1
                        if self._stop.wait(self._pause):
                            return
                    n += 1
        except BaseException as exc:
            self.error = exc
