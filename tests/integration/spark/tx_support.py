"""The transaction-consistency tests' source, feeds, targets and invariant reader (ADR 0023).

The source holds two kinds of multi-table transactions:

* transfers: ``acct_a`` and ``acct_b`` hold 50 accounts each; a transfer takes an amount from one
  account of one table and adds it to an account of the other, so ``sum(a) + sum(b)`` is constant
  once the accounts exist (they are created in one transaction, so a target shows 0 or 100);
* orders: an order row says how many lines it has (``n_lines``) and is inserted with its lines,
  in one transaction, so every order on a consistent target has exactly that many lines.

A ``Reader`` thread checks both invariants on the target, each check in one snapshot (PostgreSQL
REPEATABLE READ, MariaDB's consistent snapshot), as often as it can while the job applies.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

TABLES = ("acct_a", "acct_b", "orders", "order_lines")
ACCOUNTS, BALANCE = 50, 1000
TOTAL = 2 * ACCOUNTS * BALANCE
DDL = (
    "create table acct_a (id int primary key, balance bigint not null)",
    "create table acct_b (id int primary key, balance bigint not null)",
    "create table orders (id int primary key, n_lines int not null)",
    "create table order_lines (order_id int not null, line int not null, qty int not null, "
    "primary key (order_id, line))",
)


def load(dsn: str, transactions: int, seed: int = 27) -> None:
    """The accounts (one transaction), then ``transactions`` transfers and orders, each its own
    source transaction; some transfers touch an account twice, some orders are deleted again."""
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.transaction():
            for table in ("acct_a", "acct_b"):
                conn.execute(f"insert into {table} select g, {BALANCE} from generate_series(1, {ACCOUNTS}) g")
        order = 0
        for step in range(transactions):
            with conn.transaction():
                if step % 3:
                    amount, debit, credit = rng.randint(1, 50), rng.randint(1, ACCOUNTS), rng.randint(1, ACCOUNTS)
                    source, sink = ("acct_a", "acct_b") if rng.random() < 0.5 else ("acct_b", "acct_a")
                    conn.execute(f"update {source} set balance = balance - %s where id = %s", (amount, debit))
                    conn.execute(f"update {sink} set balance = balance + %s where id = %s", (amount, credit))
                elif order > 5 and rng.random() < 0.2:
                    gone = rng.randint(1, order)
                    conn.execute("delete from order_lines where order_id = %s", (gone,))
                    conn.execute("delete from orders where id = %s", (gone,))
                else:
                    order += 1
                    lines = rng.randint(1, 5)
                    conn.execute("insert into orders values (%s, %s)", (order, lines))
                    for line in range(1, lines + 1):
                        conn.execute("insert into order_lines values (%s, %s, %s)", (order, line, rng.randint(1, 9)))


def violation(counts: tuple[Any, ...]) -> str | None:
    """What is wrong with one snapshot's (rows a, rows b, sum a+b, orders with the wrong number
    of lines, lines without their order), or None."""
    rows_a, rows_b, total, bad_orders, orphans = (int(v or 0) for v in counts)
    if (rows_a, rows_b) == (0, 0):
        accounts = None
    elif (rows_a, rows_b) != (ACCOUNTS, ACCOUNTS):
        accounts = f"{rows_a} + {rows_b} accounts"
    else:
        accounts = None if total == TOTAL else f"total {total} != {TOTAL}"
    problems = [p for p in (accounts, bad_orders and f"{bad_orders} orders", orphans and f"{orphans} orphans") if p]
    return "; ".join(problems) or None


CHECK = (
    "select (select count(*) from acct_a), (select count(*) from acct_b), "
    "(select coalesce(sum(balance), 0) from acct_a) + (select coalesce(sum(balance), 0) from acct_b), "
    "(select count(*) from orders o where o.n_lines <> (select count(*) from order_lines l where l.order_id = o.id)), "
    "(select count(*) from order_lines l where not exists (select 1 from orders o where o.id = l.order_id))"
)


@dataclass
class Reader:
    """Checks the invariants on the target in a loop until stopped: ``checks`` made,
    ``violations`` seen (the first few described)."""

    snapshot: Callable[[], tuple[Any, ...]]
    checks: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Reader:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="invariant-reader")
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                problem = violation(self.snapshot())
                self.checks += 1
                if problem:
                    self.violations += 1
                    if len(self.examples) < 5:
                        self.examples.append(problem)
        except BaseException as exc:  # shown by stop(): a reader that died checked nothing
            self.error = exc

    def stop(self) -> Reader:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)
        if self.error is not None:
            raise AssertionError(f"the invariant reader failed: {self.error!r}") from self.error
        return self


def pg_snapshot(dsn: str) -> Callable[[], tuple[Any, ...]]:
    conn = psycopg.connect(dsn, autocommit=True)

    def read() -> tuple[Any, ...]:
        with conn.transaction():
            conn.execute("set transaction isolation level repeatable read")
            return conn.execute(CHECK).fetchone()  # type: ignore[return-value]

    return read


def mariadb_snapshot(server: Any, database: str) -> Callable[[], tuple[Any, ...]]:
    conn = server.connect(database=database)
    conn.autocommit(True)

    def read() -> tuple[Any, ...]:
        with conn.cursor() as cur:
            cur.execute("set transaction isolation level repeatable read")
            cur.execute("start transaction with consistent snapshot")
            cur.execute(CHECK)
            found = cur.fetchone()
            cur.execute("commit")
            return found  # type: ignore[no-any-return]

    return read


def image(fetch: Callable[[str], list[tuple[Any, ...]]]) -> dict[str, list[tuple[int, ...]]]:
    """Every table's rows (without ``_cdc_position``), sorted: what target == source compares."""
    columns = {"acct_a": "id, balance", "acct_b": "id, balance", "orders": "id, n_lines"}
    out = {}
    for table in TABLES:
        chosen = columns.get(table, "order_id, line, qty")
        out[table] = sorted(tuple(int(v) for v in row) for row in fetch(f"select {chosen} from {table}"))
    return out
