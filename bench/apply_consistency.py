"""What the apply job's ``consistency=transaction`` mode costs (ADR 0023), same run, same events.

The events are Debezium PostgreSQL change events with transaction metadata, written as the
engine's changelog (``<dir>/<topic>/<seq>.jsonl``): ``--transactions`` source transactions, two
of three a transfer (one update in ``public.acct_a``, one in ``public.acct_b``), one of three an
order (an insert in ``public.orders`` and 1-5 in ``public.order_lines``), each with its BEGIN and
END on ``bench.transaction``; positions (``source.sequence``) grow with the commit order, and the
expected final rows are kept while the events are written. The changelog source rather than Kafka:
no broker in the measurement, the same records for both sides.

Both sides run ``apply.run`` (``availableNow``, ``--batch`` records per micro-batch, 2 lanes for
``key``) into a fresh PostgreSQL target database, taking turns going first across rounds; each
run must leave every target table equal to the expected rows, or the bench fails (exit status 1).
Rates are events/s over the change events (not BEGIN/END), medians over rounds; ``cost`` =
transaction rate / key rate. Each run's line shows its batches' phases (``apply.run``'s
``phases_s``: in key mode read / transform / write, in transaction mode split / read / write) and
the last line is one JSON object, with the load average next to the rates (2 shared cores).

The first round warms the JVM up (its JIT, Spark's code generation: a first run took 3-4 times
as long as the next) and is printed but not counted.

    python bench/apply_consistency.py --quick     # 6,000 transactions, 2 rounds after the warm-up
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.spark.apply import ApplyJob, run, session
from airflow_cdc.spark.reading import SourceOptions

PREFIX = "bench"
TABLES = ("acct_a", "acct_b", "orders", "order_lines")
DDL = (
    "create table acct_a (id int primary key, balance bigint not null)",
    "create table acct_b (id int primary key, balance bigint not null)",
    "create table orders (id int primary key, n_lines int not null)",
    "create table order_lines (order_id int, line int, qty int not null, primary key (order_id, line))",
)
ACCOUNTS = 1000


class Writer:
    """Changelog lines per topic, and the rows the events leave."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self.rows: dict[str, dict[tuple[int, ...], tuple[int, ...]]] = {t: {} for t in TABLES}
        self.lsn = 1000
        self.events = 0

    def record(self, topic: str, key: Any, value: Any) -> None:
        lines = self.lines.setdefault(topic, [])
        line = {"topic": topic, "key": json.dumps(key), "value": json.dumps(value), "seq": len(lines), "ts_ms": 0}
        lines.append(json.dumps(line))

    def transaction(self, txid: str, changes: list[tuple[str, dict[str, int]]]) -> None:
        self.record(f"{PREFIX}.transaction", {"id": txid}, {"status": "BEGIN", "id": txid, "event_count": None})
        commit = self.lsn + len(changes) + 1
        counts: dict[str, int] = {}
        for order, (table, after) in enumerate(changes, 1):
            self.lsn += 1
            key_columns = ("order_id", "line") if table == "order_lines" else ("id",)
            key = {c: after[c] for c in key_columns}
            source = {"db": "bench", "schema": "public", "table": table, "lsn": self.lsn, "snapshot": "false"}
            source["sequence"] = json.dumps([str(commit), str(self.lsn)])
            counts[table] = counts.get(table, 0) + 1
            tx = {"id": txid, "total_order": order, "data_collection_order": counts[table]}
            value = {"before": None, "after": after, "source": source, "op": "u", "transaction": tx, "ts_ms": 0}
            self.record(f"{PREFIX}.public.{table}", key, value)
            self.rows[table][tuple(key.values())] = tuple(after.values())
            self.events += 1
        self.lsn = commit
        collections = [{"data_collection": f"public.{t}", "event_count": n} for t, n in counts.items()]
        end = {"status": "END", "id": txid, "event_count": len(changes), "data_collections": collections}
        self.record(f"{PREFIX}.transaction", {"id": txid}, end)

    def write(self, root: Path, segment: int = 2_000) -> None:
        for topic, lines in self.lines.items():
            (root / topic).mkdir(parents=True)
            for start in range(0, len(lines), segment):
                (root / topic / f"{start:020d}.jsonl").write_text("\n".join(lines[start : start + segment]) + "\n")


def events(transactions: int, seed: int = 27) -> Writer:
    rng = random.Random(seed)
    out = Writer()
    balances = {t: dict.fromkeys(range(1, ACCOUNTS + 1), 1000) for t in ("acct_a", "acct_b")}
    # The accounts, one transaction.
    out.transaction("0:1", [(t, {"id": i, "balance": 1000}) for t in ("acct_a", "acct_b") for i in range(1, 1001)])
    order = 0
    for step in range(transactions):
        if step % 3:
            amount, debit, credit = rng.randint(1, 50), rng.randint(1, ACCOUNTS), rng.randint(1, ACCOUNTS)
            balances["acct_a"][debit] -= amount
            balances["acct_b"][credit] += amount
            changes = [
                ("acct_a", {"id": debit, "balance": balances["acct_a"][debit]}),
                ("acct_b", {"id": credit, "balance": balances["acct_b"][credit]}),
            ]
        else:
            order += 1
            lines = rng.randint(1, 5)
            changes = [("orders", {"id": order, "n_lines": lines})]
            changes += [
                ("order_lines", {"order_id": order, "line": n, "qty": rng.randint(1, 9)}) for n in range(1, lines + 1)
            ]
        out.transaction(f"{step + 2}:{out.lsn}", changes)
    return out


def target(pg: PostgresServer, name: str) -> str:
    with pg.connect() as conn:
        conn.autocommit = True
        conn.execute(f"drop database if exists {name} with (force)")
        conn.execute(f"create database {name}")
    with pg.connect(name) as conn:
        for statement in DDL:
            conn.execute(statement)
        conn.commit()
    password = f":{quote(pg.password, safe='')}" if pg.password else ""
    return f"postgresql://{quote(pg.user, safe='')}{password}@{pg.host}:{pg.port}/{name}"


def matches(pg: PostgresServer, name: str, want: Writer) -> str | None:
    with pg.connect(name) as conn:
        for table in TABLES:
            columns = {"acct_a": "id, balance", "acct_b": "id, balance", "orders": "id, n_lines"}
            rows = conn.execute(f"select {columns.get(table, 'order_id, line, qty')} from {table}").fetchall()
            width = 2 if table == "order_lines" else 1
            got = {tuple(r[:width]): tuple(r) for r in rows}
            if got != want.rows[table]:
                return f"{name}.{table}: {len(got)} rows, want {len(want.rows[table])}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="6,000 transactions, 2 rounds (default 30,000, 3)")
    parser.add_argument("--consistency", choices=("both", "key", "transaction"), default="both")
    parser.add_argument(
        "--batch",
        type=int,
        default=5_000,
        help="records per micro-batch (the changelog admits whole 2,000-line segments: batch // 1000 of them)",
    )
    args = parser.parse_args()
    transactions, rounds = (6_000, 2) if args.quick else (30_000, 3)
    sides = ("key", "transaction") if args.consistency == "both" else (args.consistency,)
    generated = events(transactions)
    rates: dict[str, list[float]] = {side: [] for side in sides}
    failures: list[str] = []
    os.environ.setdefault("CDC_SPARK_MASTER", "local[2]")
    with tempfile.TemporaryDirectory(prefix="apply-consistency-") as tmp, PostgresServer.from_env() as pg:
        root = Path(tmp) / "changelog"
        generated.write(root)
        topics = tuple(f"{PREFIX}.public.{t}" for t in TABLES)
        spark = session(ApplyJob(source=SourceOptions(), target_url="postgresql://localhost/x", checkpoint=""))
        spark.sparkContext.setLogLevel("ERROR")
        try:
            for number in range(rounds + 1):  # round 0: the warm-up
                for side in sides if number % 2 == 0 else tuple(reversed(sides)):
                    name = f"target_{side}_{number}"
                    source = SourceOptions(
                        kind="changelog", changelog_dir=str(root), topics=topics, max_records_per_batch=args.batch
                    )
                    job = ApplyJob(
                        source=source,
                        target_url=target(pg, name),
                        checkpoint=f"{tmp}/checkpoint-{name}",
                        lanes=2,
                        consistency=side,
                    )
                    started = time.perf_counter()
                    result = run(spark, job)
                    seconds = time.perf_counter() - started
                    problem = matches(pg, name, generated)
                    if problem:
                        failures.append(f"{side}: {problem}")
                    if number:
                        rates[side].append(generated.events / seconds)
                    phases = ", ".join(f"{name} {s:.1f} s" for name, s in result["phases_s"].items())
                    print(
                        f"round {number or 'warm-up'} {side:>11}: {generated.events / seconds:,.0f} events/s "
                        f"({result['batches']} batches, {seconds:.1f} s: {phases})",
                        flush=True,
                    )
        finally:
            spark.stop()
    summary: dict[str, Any] = {"bench": "apply_consistency", "events": generated.events, "batch": args.batch}
    for side in sides:
        summary[f"{side}_events_per_s"] = round(statistics.median(rates[side]))
    if len(sides) == 2:
        summary["cost"] = round(summary["transaction_events_per_s"] / summary["key_events_per_s"], 3)
    summary["load_average"] = [round(x, 2) for x in os.getloadavg()]
    summary["mismatches"] = failures
    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
