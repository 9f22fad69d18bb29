"""The demo's sample database: ``customers`` and ``orders`` (the tables ``example_cdc_pipeline``
applies), Debezium's signal table, empty replicas to apply to, and a steady write load."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import psycopg
from psycopg import sql

from airflow_cdc.demo.progress import DemoFailed

TABLES = ("public.customers", "public.orders")
SIGNAL_TABLE = "public.debezium_signal"

DDL = {
    "public.customers": "create table customers (id int primary key, name text not null, city text, "
    "vip boolean not null default false, since date)",
    "public.orders": "create table orders (id int primary key, customer_id int not null, "
    "amount numeric(10,2) not null, status text not null, created timestamptz not null default now(), note text)",
}
SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"

SEED = (
    "insert into customers select g, 'customer ' || g, (array['Lyon', 'Oslo', 'Porto', 'Turin', 'Graz'])[1 + g %% 5], "
    "g %% 7 = 0, date '2020-01-01' + g from generate_series(1, %(customers)s) g",
    "insert into orders select g, 1 + g %% %(customers)s, (g * 7.31 %% 1000)::numeric(10,2), "
    "(array['new', 'paid', 'shipped'])[1 + g %% 3], timestamptz '2026-01-01 00:00:00+00' + g * interval '37 seconds', "
    "case when g %% 10 = 0 then 'gift' end from generate_series(1, %(orders)s) g",
)


def customers_for(orders: int) -> int:
    return max(10, orders // 10)


def create_source(conn: psycopg.Connection[Any], orders: int) -> dict[str, int]:
    """The tables, filled, analyzed (the snapshot's row estimate comes from the statistics)."""
    sizes = {"customers": customers_for(orders), "orders": orders}
    for ddl in (*DDL.values(), SIGNAL_DDL):
        conn.execute(ddl)
    for statement in SEED:
        conn.execute(statement, sizes)
    conn.execute("analyze customers, orders")
    return {f"public.{name}": count for name, count in sizes.items()}


def create_replica(admin: psycopg.Connection[Any], name: str) -> None:
    """An empty database ``name``: the apply job creates the source's tables in it from the
    schemas the changes carry."""
    admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))


class WriteLoad:
    """``rate`` transactions per second on its own connection and thread until :meth:`stop`:
    new orders, status and amount updates with a customer change in the same transaction, and
    deletes. Paced, not flat out: a steady application load, not a benchmark."""

    def __init__(self, dsn: str, rate: float, *, seed: int = 7) -> None:
        self.dsn = dsn
        self.rate = rate
        self.transactions = 0
        self.last_lsn: str | None = None
        self.error: BaseException | None = None
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-write-load", daemon=True)

    def start(self) -> WriteLoad:
        if self.rate > 0:
            self._thread.start()
        return self

    def halt(self) -> None:
        """Stop after the running transaction."""
        self._stop.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(30)

    def stop(self) -> int:
        """Stop after the running transaction; the transactions done. DemoFailed if it failed."""
        self.halt()
        if self.error is not None:
            raise DemoFailed(f"the write load failed: {self.error}") from self.error
        return self.transactions

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                next_id = int(conn.execute("select coalesce(max(id), 0) + 1 from orders").fetchone()[0])  # type: ignore[index]
                customers = int(conn.execute("select count(*) from customers").fetchone()[0])  # type: ignore[index]
                pace, due = 1.0 / self.rate, time.monotonic()
                while not self._stop.is_set():
                    with conn.transaction():
                        next_id = self._one(conn, next_id, customers)
                    self.last_lsn = str(conn.execute("select pg_current_wal_lsn()").fetchone()[0])  # type: ignore[index]
                    self.transactions += 1
                    due += pace
                    self._stop.wait(max(0.0, due - time.monotonic()))
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _one(self, conn: psycopg.Connection[Any], next_id: int, customers: int) -> int:
        roll, rng = self._rng.random(), self._rng
        if roll < 0.45:
            conn.execute(
                "insert into orders (id, customer_id, amount, status) values (%s, %s, %s, 'new')",
                (next_id, rng.randint(1, customers), rng.randint(100, 99999) / 100),
            )
            return next_id + 1
        target = rng.randint(1, next_id - 1)
        if roll < 0.85:
            conn.execute(
                "update orders set status = 'paid', amount = amount + 1, note = %s where id = %s",
                (f"paid at {time.time():.3f}", target),
            )
            conn.execute("update customers set vip = not vip where id = %s", (rng.randint(1, customers),))
        else:
            conn.execute("delete from orders where id = %s", (target,))
        return next_id
