"""The chaos suite's write load: seeded transactions over three tables, on its own thread.

``accounts`` takes inserts, updates, primary-key changes and deletes; ``ledger`` and ``accounts``
change together in multi-table transactions, and ``ledger`` is wiped now and then (TRUNCATE on
PostgreSQL; on MariaDB a ``DELETE`` of every row, since a TRUNCATE there is DDL, not row events,
and the binlog source emits no truncate event for it); ``docs`` holds values of 3-20 kB - stored
out of line on PostgreSQL (TOAST, ``STORAGE EXTERNAL``) - and gets updates that leave them
unchanged (a Debezium event then carries the unavailable-value placeholder) or replace them.

The load survives its server going away (a restart, a killed connection): it connects again and
goes on; a transaction in flight may or may not have committed, which is why the checks compare
with what the source holds, not with what the load meant to write.
"""

from __future__ import annotations

import contextlib
import json
import random
import string
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pymysql

TABLES = ("accounts", "ledger", "docs")
SIGNAL_TABLE = "debezium_signal"
INITIAL = {"accounts": 3000, "ledger": 1500, "docs": 150}
#: The workload's connections say who they are, so a fault that cuts the engine's leaves them be.
APPLICATION = "chaos-workload"


class Flavour:
    """What differs between the two databases: DDL, how to wipe a table, what a lost connection
    looks like."""

    name = ""
    ddl: tuple[str, ...] = ()
    wipe = ""
    lost_connection: tuple[type[BaseException], ...] = ()

    def __init__(self, connect: Callable[[], Any]) -> None:
        self.connect = connect


class Postgres(Flavour):
    name = "postgres"
    ddl = (
        "create table accounts (id int primary key, owner text not null, balance int not null)",
        "create table ledger (id int primary key, account int not null, amount int not null, memo text)",
        "create table docs (id int primary key, title text not null, body text not null)",
        # Out of line and uncompressed: every body over ~2 kB is TOASTed.
        "alter table docs alter column body set storage external",
        f"create table {SIGNAL_TABLE} (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))",
    )
    wipe = "truncate ledger"
    lost_connection = (psycopg.OperationalError, psycopg.InterfaceError)


class MariaDB(Flavour):
    name = "mariadb"
    ddl = (
        "create table accounts (id int primary key, owner varchar(64) not null, balance int not null)",
        "create table ledger (id int primary key, account int not null, amount int not null, memo varchar(64))",
        "create table docs (id int primary key, title varchar(255) not null, body mediumtext not null)",
        f"create table {SIGNAL_TABLE} (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))",
    )
    wipe = "delete from ledger"
    lost_connection = (pymysql.OperationalError, pymysql.InterfaceError)


def execute(conn: Any, statement: str, params: tuple[Any, ...] = ()) -> None:
    if isinstance(conn, psycopg.Connection):
        conn.execute(statement, params)
    else:
        with conn.cursor() as cur:
            cur.execute(statement, params)


def setup(flavour: Flavour, seed: int | str) -> None:
    """The tables, the signal table and their first rows."""
    rng = random.Random(seed)
    conn = flavour.connect()
    try:
        for statement in flavour.ddl:
            execute(conn, statement)
        for start in range(1, INITIAL["accounts"] + 1, 500):
            rows = range(start, min(start + 500, INITIAL["accounts"] + 1))
            values = ",".join(f"({i}, 'owner{i}', {rng.randint(0, 10_000)})" for i in rows)
            execute(conn, f"insert into accounts values {values}")
        values = ",".join(f"({i}, {rng.randint(1, 3000)}, {rng.randint(-500, 500)}, 'm{i}')" for i in range(1, 1501))
        execute(conn, f"insert into ledger values {values}")
        for i in range(1, INITIAL["docs"] + 1):
            execute(conn, "insert into docs values (%s, %s, %s)", (i, f"doc{i}", big_value(rng)))
        conn.commit()
    finally:
        conn.close()


def big_value(rng: random.Random) -> str:
    """3-20 kB of letters: over the 2 kB TOAST threshold, random enough not to compress away,
    and often more than a sink's 8 kB write buffer."""
    return "".join(rng.choices(string.ascii_letters, k=rng.randint(3000, 20_000)))


def source_image(flavour: Flavour) -> dict[str, dict[str, dict[str, Any]]]:
    """Each table's rows by their key (as the replayed target keys them)."""
    conn = flavour.connect()
    try:
        images = {}
        for table in TABLES:
            if isinstance(conn, psycopg.Connection):
                cursor = conn.execute(f"select * from {table}")
                names = [c.name for c in cursor.description or []]
                rows = [dict(zip(names, row, strict=True)) for row in cursor]
            else:
                with conn.cursor(pymysql.cursors.DictCursor) as cur:
                    cur.execute(f"select * from {table}")
                    rows = list(cur.fetchall())
            images[table] = {json.dumps({"id": row["id"]}): row for row in rows}
        conn.commit()
        return images
    finally:
        conn.close()


class Workload:
    """Seeded transactions at about ``rate`` per second until stopped; :meth:`pause` holds it
    between two transactions (the checks compare with a source at rest)."""

    def __init__(self, flavour: Flavour, seed: int | str, rate: float = 60.0) -> None:
        self.flavour, self.rng, self.rate = flavour, random.Random(seed), rate
        self.next_id = {table: INITIAL[table] + 1 for table in TABLES}
        self.transactions = 0
        self.reconnects = 0
        self.error: BaseException | None = None
        self._stop, self._pause = threading.Event(), threading.Event()
        self._in_transaction = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chaos-workload", daemon=True)

    def start(self) -> Workload:
        self._thread.start()
        return self

    def pause(self, timeout: float = 120.0) -> None:
        """Returns once no transaction is in flight, and none starts until :meth:`resume`."""
        self._pause.set()
        if not self._in_transaction.acquire(timeout=timeout):
            raise AssertionError(f"the write load did not pause within {timeout}s")
        self._in_transaction.release()
        self._raise()

    def resume(self) -> None:
        self._pause.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._raise()

    def probe(self, timeout: float = 60.0, *, big: bool = False) -> None:
        """One more transaction while paused (a new account; with ``big`` a document of 40 kB),
        on a connection of its own, retried while the server is still coming back: a change
        made after a heal, which the target must show too - else an engine that never
        reconnected would pass the check."""
        assert self._pause.is_set(), "probe() is for a paused load"
        deadline = time.monotonic() + timeout
        while True:
            try:
                with contextlib.closing(self.flavour.connect()) as conn:
                    if big:
                        i = self._new("docs")
                        body = "".join(self.rng.choices(string.ascii_letters, k=40_000))
                        execute(conn, "insert into docs values (%s, %s, %s)", (i, f"doc{i}", body))
                    else:
                        self._insert_accounts(conn)
                    conn.commit()
                    return
            except self.flavour.lost_connection:
                if time.monotonic() > deadline:
                    raise
                self._stop.wait(0.1)

    def progressed(self, transactions: int) -> Callable[[], bool]:
        """A condition: ``transactions`` more committed from now (or the load failed)."""
        target = self.transactions + transactions
        return lambda: self.transactions >= target or self.error is not None

    def _raise(self) -> None:
        if self.error is not None:
            raise AssertionError(f"the write load failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._transactions()
                    return
                except self.flavour.lost_connection:
                    self.reconnects += 1
                    self._stop.wait(0.1)  # the server is restarting: try again soon
        except BaseException as exc:
            self.error = exc

    def _transactions(self) -> None:
        conn = self.flavour.connect()
        try:
            while not self._stop.is_set():
                with self._in_transaction:
                    paused = self._pause.is_set()
                    if not paused:
                        self._transaction(conn)
                        conn.commit()
                        self.transactions += 1
                # Pacing: the load must not take the machine.
                self._stop.wait(0.02 if paused else 1 / self.rate)
        finally:
            with contextlib.suppress(Exception):  # a lost connection is closed already
                conn.close()

    def _new(self, table: str) -> int:
        self.next_id[table] += 1
        return self.next_id[table] - 1

    def _some(self, table: str) -> int:
        return self.rng.randint(1, self.next_id[table] - 1)

    def _transaction(self, conn: Any) -> None:
        roll = self.rng.random()
        for upto, step in MIX:
            if roll < upto:
                step(self, conn)
                return

    def _insert_accounts(self, conn: Any) -> None:
        for _ in range(self.rng.randint(1, 3)):
            i = self._new("accounts")
            execute(conn, "insert into accounts values (%s, %s, %s)", (i, f"owner{i}", self.rng.randint(0, 9999)))

    def _update_accounts(self, conn: Any) -> None:
        for _ in range(self.rng.randint(1, 3)):
            execute(conn, "update accounts set balance = balance + 1 where id = %s", (self._some("accounts"),))

    def _change_key(self, conn: Any) -> None:
        """A primary-key change: a delete of the old key and a create of the new one."""
        execute(conn, "update accounts set id = %s where id = %s", (self._new("accounts"), self._some("accounts")))

    def _delete_account(self, conn: Any) -> None:
        execute(conn, "delete from accounts where id = %s", (self._some("accounts"),))

    def _transfer(self, conn: Any) -> None:
        """Two tables in one transaction."""
        a, b, amount = self._some("accounts"), self._some("accounts"), self.rng.randint(1, 100)
        execute(conn, "update accounts set balance = balance - %s where id = %s", (amount, a))
        execute(conn, "update accounts set balance = balance + %s where id = %s", (amount, b))
        execute(conn, "insert into ledger values (%s, %s, %s, %s)", (self._new("ledger"), a, amount, f"to {b}"))

    def _insert_doc(self, conn: Any) -> None:
        i = self._new("docs")
        execute(conn, "insert into docs values (%s, %s, %s)", (i, f"doc{i}", big_value(self.rng)))

    def _retitle_doc(self, conn: Any) -> None:
        """The big value stays as it is (PostgreSQL: an unchanged TOASTed value)."""
        execute(conn, "update docs set title = concat(title, '+') where id = %s", (self._some("docs"),))

    def _rewrite_doc(self, conn: Any) -> None:
        execute(conn, "update docs set body = %s where id = %s", (big_value(self.rng), self._some("docs")))

    def _delete_doc(self, conn: Any) -> None:
        execute(conn, "delete from docs where id = %s", (self._some("docs"),))

    def _wipe(self, conn: Any) -> None:
        execute(conn, self.flavour.wipe)


#: (cumulative probability, step): what a transaction does.
MIX = (
    (0.25, Workload._insert_accounts),
    (0.42, Workload._update_accounts),
    (0.50, Workload._change_key),
    (0.57, Workload._delete_account),
    (0.75, Workload._transfer),
    (0.84, Workload._insert_doc),
    (0.92, Workload._retitle_doc),
    (0.97, Workload._rewrite_doc),
    (0.995, Workload._delete_doc),
    (1.0, Workload._wipe),
)
