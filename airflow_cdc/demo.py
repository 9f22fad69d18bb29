"""The demo: the pipeline on embedded defaults, end to end, checking itself.

A throwaway PostgreSQL (``wal_level=logical``) with two tables; the engine takes the initial
snapshot and streams a write load; the engine is stopped and restarted from its committed
offsets while writes go on; every event is applied to a target image; at the end the target
must equal the source, row by row. The Spark job that applies changes to a real target joins
when the Spark issue lands.
"""

from __future__ import annotations

import random
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TextIO

import orjson
import psycopg

from airflow_cdc.engine import Engine, JsonSerializer, SerializedRecord
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.local.postgres import PostgresServer

TABLES = {
    "customers": "create table customers (id int primary key, name text not null, city text, vip boolean)",
    "orders": "create table orders (id int primary key, customer_id int, amount numeric(10,2), status text, "
    "created timestamptz default now())",
}


class Target:
    """What a consumer builds from the events: one row image per table, applied in order."""

    def __init__(self, out: TextIO, show: int) -> None:
        self.rows: dict[str, dict[str, Any]] = {name: {} for name in TABLES}
        self.ops: dict[str, int] = {}
        self.lock = threading.Lock()
        self.out, self.show, self.shown = out, show, 0

    def __call__(self, item: SerializedRecord) -> None:
        if item.value is None:
            return  # the tombstone after a delete: a compaction marker, nothing to apply
        event = orjson.loads(item.value)
        table, key = event["source"]["table"], orjson.dumps(orjson.loads(item.key or b"null")).decode()
        with self.lock:
            self.ops[event["op"]] = self.ops.get(event["op"], 0) + 1
            if event["op"] == "d":
                self.rows[table].pop(key, None)
            else:
                self.rows[table][key] = event["after"]
            if self.shown < self.show:
                self.shown += 1
                self.out.write(
                    f"   {item.topic} key={item.key.decode() if item.key else None} "
                    f"op={event['op']} after={orjson.dumps(event['after']).decode()}\n"
                )

    def forget(self, table: str) -> None:
        with self.lock:
            self.rows[table].clear()

    def count(self, op: str) -> int:
        with self.lock:
            return self.ops.get(op, 0)

    def matches(self, source: dict[str, dict[str, Any]]) -> bool:
        with self.lock:
            return {t: dict(rows) for t, rows in self.rows.items()} == source


#: The source read back in the events' representation, by SQL alone (not by the engine's own
#: converters, which the check must not trust): numeric as text, timestamptz as ISO-8601 UTC.
SOURCE_QUERIES = {
    "customers": "select id, name, city, vip from customers",
    "orders": "select id, customer_id, amount::text as amount, status, "
    # Debezium's ZonedTimestamp: UTC, the fraction as wide as the column's precision (6 here).
    "to_char(created at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || 'Z' "
    "as created from orders",
}


def _source_rows(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for table, query in SOURCE_QUERIES.items():
        cursor = conn.execute(query)
        names = [column.name for column in cursor.description or []]
        out[table] = {orjson.dumps({"id": row[0]}).decode(): dict(zip(names, row, strict=True)) for row in cursor}
    return out


def _writes(conn: psycopg.Connection[Any], rng: random.Random, count: int, next_id: list[int]) -> None:
    for _ in range(count):
        roll, customer = rng.random(), rng.randint(1, 200)
        with conn.transaction():
            if roll < 0.5:
                conn.execute(
                    "insert into orders (id, customer_id, amount, status) values (%s, %s, %s, 'new')",
                    (next_id[0], customer, rng.randint(100, 99999) / 100),
                )
                next_id[0] += 1
            elif roll < 0.8:
                conn.execute("update orders set status = 'paid' where id = %s", (rng.randint(1, next_id[0]),))
                conn.execute("update customers set vip = not coalesce(vip, false) where id = %s", (customer,))
            else:
                conn.execute("delete from orders where id = %s", (rng.randint(1, next_id[0]),))


def _notification(engine: Engine, signal_id: str, kind: str) -> dict[str, Any] | None:
    items, _ = engine.notifications.since(0)
    return next((n for n in items if n["id"] == signal_id and n["type"] == kind), None)


def _engine(server: PostgresServer, state: Path, target: Target) -> Engine:
    return Engine(
        {
            "name": "demo",
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "topic.prefix": "shop",
            "database.hostname": server.host,
            "database.port": server.port,
            "database.user": server.user,
            "database.dbname": "shop",
            # Compare like with like: the target image holds numerics and timestamps as text.
            "decimal.handling.mode": "string",
            "offset.storage.file.filename": str(state / "offsets.json"),
            "offset.flush.interval.ms": 200,
        },
        consumer=target,
        serializer=JsonSerializer(),
    )


def run_demo(*, writes: int = 600, show: int = 4, out: TextIO = sys.stdout) -> dict[str, Any]:
    """Run the demo; returns its summary and raises AssertionError if the final check fails."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="airflow-cdc-demo-") as tmp, PostgresServer() as server:
        state = Path(tmp)
        out.write(f"== a throwaway PostgreSQL on 127.0.0.1:{server.port} (wal_level=logical)\n")
        with server.connect() as admin:
            admin.execute("create database shop")
        conn = server.connect("shop")
        for ddl in TABLES.values():
            conn.execute(ddl)
        conn.execute(
            "insert into customers select g, 'customer ' || g, 'city ' || (g % 20), false "
            "from generate_series(1, 200) g"
        )
        conn.execute(
            "insert into orders (id, customer_id, amount, status) select g, 1 + g % 200, g * 1.5, 'new' "
            "from generate_series(1, 1000) g"
        )
        next_id = [1001]
        target = Target(out, show)
        out.write("== engine run 1: initial snapshot, then streaming (first events shown)\n")
        with EngineRunner(_engine(server, state, target)):
            wait_until(lambda: target.count("r") >= 1200, 60, "the snapshot")
            out.write(f"   snapshot: {target.count('r')} rows read\n")
            _writes(conn, rng, writes // 2, next_id)
            wait_until(lambda: target.matches(_source_rows(conn)), 60, "streaming caught up")
        out.write(f"   streamed {sum(target.count(op) for op in 'cud')} changes; engine stopped\n")
        _writes(conn, rng, writes // 2, next_id)
        out.write(
            f"== {writes // 2} more transactions while the engine is down; engine run 2 resumes from "
            "its committed offsets\n"
        )
        engine = _engine(server, state, target)
        with EngineRunner(engine):
            wait_until(lambda: target.matches(_source_rows(conn)), 60, "target equals source")
            out.write("   caught up; now the target loses its orders, and an incremental snapshot refills them\n")
            target.forget("orders")
            signal_id = engine.signals.send("execute-snapshot", {"data-collections": ["public.orders"]})
            _writes(conn, rng, writes // 4, next_id)  # writes go on while the snapshot reads
            wait_until(lambda: _notification(engine, signal_id, "COMPLETED"), 60, "the incremental snapshot")
            scanned = _notification(engine, signal_id, "TABLE_SCAN_COMPLETED") or {"additional_data": {}}
            out.write(
                f"   incremental snapshot COMPLETED: {scanned['additional_data'].get('total_rows_scanned')} rows "
                "read in watermarked chunks while streaming went on\n"
            )
            wait_until(lambda: target.matches(_source_rows(conn)), 60, "target equals source")
        source = _source_rows(conn)
        conn.close()
        summary = {
            "snapshot_rows": target.count("r"),
            "creates": target.count("c"),
            "updates": target.count("u"),
            "deletes": target.count("d"),
            "rows": {t: len(rows) for t, rows in source.items()},
        }
        assert target.matches(source), "target differs from source"
        out.write(f"== check passed: target equals source, row by row ({summary['rows']}); events {summary}\n")
        return summary
