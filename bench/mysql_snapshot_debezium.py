"""The ``vs_debezium`` part of bench/mysql_snapshot.py: Debezium's MariaDB connector on a Kafka
Connect worker against the engine with its Kafka sink, each taking the initial snapshot
(``snapshot.mode=initial_only``) of the same table into a broker (issue 30; goal >= 1.5x).

Timed as bench/mysql_stream_debezium.py times the stream (its helpers): topics created beforehand
with one partition and ``message.timestamp.type=LogAppendTime``, "first to last landed" is the
records that landed after the first append instant / (last instant - first instant), exact to the
broker's millisecond. A one-row marker table, snapshotted after the measured one, tells that a
side is done; each topic is then read back in full and must hold exactly the table's rows. Both
sides poll with the same small ``poll.interval.ms``; our sink runs with the client it picks when
``sink.kafka.client`` is unset (confluent-kafka when installed). The worker's first snapshot is
its warm-up, reported as Connect's cold figure; the sides then alternate who goes first.
"""

from __future__ import annotations

import statistics
import threading
import time
from types import SimpleNamespace
from typing import Any

from mysql_stream_debezium import POLL_INTERVAL_MS, create_topics, read_landed, wait_for_marker

from airflow_cdc.engine.rest import Call

MARKER_TABLE = "zz_marker"  # after the measured table in both sides' snapshot order
PREFIXES = {"connect": "dbz", "ours": "our"}


def add_marker(server: Any, database: str) -> None:
    with server.connect(database=database) as conn, conn.cursor() as cur:
        cur.execute(f"create table {MARKER_TABLE} (id int primary key)")
        cur.execute(f"insert into {MARKER_TABLE} values (1)")


def versus_debezium(
    server: Any, database: str, table: str, rows: int, rounds: int, problems: list[str]
) -> dict[str, Any]:
    """Rounds of Connect and ours; the last line's fields."""
    from airflow_cdc.engine.sinks.kafka_choice import choose_client
    from airflow_cdc.kafka_connect import ConnectClient
    from airflow_cdc.local import KafkaBroker, KafkaConnectWorker

    bench = SimpleNamespace(DATABASE=database, TABLE=table, MARKER_TABLE=MARKER_TABLE)
    add_marker(server, database)
    rates: dict[str, list[float]] = {}
    with KafkaBroker() as broker, KafkaConnectWorker(broker) as worker, ConnectClient(worker.url) as client:
        print(f"  broker up in {broker.startup_seconds:.1f}s, Connect worker in {worker.startup_seconds:.1f}s")
        bootstrap = broker.bootstrap_servers

        def capture(side: str, label: str) -> float:
            prefix = f"{PREFIXES[side]}{label}"
            create_topics(bootstrap, prefix, bench)
            if side == "connect":
                run_connect(client, server, bench, prefix, bootstrap, rows)
            else:
                run_ours(server, bench, prefix, bootstrap, rows)
            landed = read_landed(bootstrap, f"{prefix}.{database}.{table}")
            if landed["records"] != rows or set(landed["ops"]) != {"r"}:
                problems.append(f"snapshot {side} {label}: landed {dict(landed['ops'])}, the table has {rows} rows")
                print(f"  WRONG: {problems[-1]}", flush=True)
            print(
                f"  snapshot {side:<8} {label:<5} {landed['records']:>9,} records {landed['rate']:>10,.0f}/s "
                f"(landed over {landed['window_s']:.2f}s)",
                flush=True,
            )
            return float(landed["rate"])

        rates["connect.cold"] = [capture("connect", "cold")]
        for round_ in range(rounds):
            for side in ("connect", "ours") if round_ % 2 == 0 else ("ours", "connect"):
                rates.setdefault(side, []).append(capture(side, f"r{round_}"))

    def median(side: str) -> int:
        return round(statistics.median(rates[side]))

    for side in ("connect.cold", "connect", "ours"):
        listed = ", ".join(f"{r:,.0f}" for r in rates[side])
        print(f"snapshot into Kafka {side:<12} {median(side):>10,} rows/s (median of {listed})")
    ratios = [o / t for o, t in zip(rates["ours"], rates["connect"], strict=True)]
    return {
        "vs_debezium": round(statistics.median(ratios), 3),
        "kafka_client": choose_client(None, {}).name,
        "poll_interval_ms": POLL_INTERVAL_MS,
        "kafka_events_per_s": median("ours"),
        "debezium_connect_events_per_s": median("connect"),
        "debezium_connect_events_per_s_cold": median("connect.cold"),
    }


def run_connect(client: Any, server: Any, bench: Any, prefix: str, bootstrap: str, rows: int) -> None:
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "tasks.max": 1,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password or "",
        "database.ssl.mode": "disable",
        "database.server.id": 90_200 + len(client.connectors()),
        "database.include.list": bench.DATABASE,
        "topic.prefix": prefix,
        "snapshot.mode": "initial_only",
        "include.schema.changes": "false",
        "heartbeat.interval.ms": 0,
        "poll.interval.ms": POLL_INTERVAL_MS,
        "schema.history.internal.kafka.bootstrap.servers": bootstrap,
        "schema.history.internal.kafka.topic": f"{prefix}-history",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    client._send(Call("POST", "/connectors", body={"name": prefix, "config": {k: str(v) for k, v in config.items()}}))
    try:
        client.wait_running(prefix, timeout=120)
        checked = [time.monotonic()]

        def alive() -> None:  # every 2 s: the worker being measured answers each call
            if time.monotonic() - checked[0] > 2:
                checked[0] = time.monotonic()
                failures = client.status(prefix).failures
                if failures:
                    raise RuntimeError(f"connector {prefix} failed: {failures}")

        wait_for_marker(bootstrap, prefix, bench, rows, alive)
    finally:
        client.delete(prefix)


def run_ours(server: Any, bench: Any, prefix: str, bootstrap: str, rows: int) -> None:
    from airflow_cdc.engine import Engine, JsonSerializer
    from airflow_cdc.engine.sinks import KafkaSink

    sink = KafkaSink({"sink.kafka.producer.bootstrap.servers": bootstrap})
    config = {
        "name": prefix,
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "topic.prefix": prefix,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password or "",
        "database.include.list": bench.DATABASE,
        "snapshot.mode": "initial_only",
        "include.schema.changes": False,
        "offset.storage": "memory",
        "heartbeat.interval.ms": 0,
        "poll.interval.ms": POLL_INTERVAL_MS,
    }
    engine = Engine(config, batch_handler=sink, serializer=JsonSerializer())
    with sink:
        thread = threading.Thread(target=engine.run, name=prefix)
        thread.start()

        def alive() -> None:
            if not thread.is_alive() and engine.error is not None:
                raise RuntimeError(f"our engine {prefix} stopped: {engine.error!r}")

        try:
            wait_for_marker(bootstrap, prefix, bench, rows, alive)
        finally:
            engine.close(60)
            thread.join(60)
