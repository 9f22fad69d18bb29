"""The ``vs_debezium`` part of bench/mysql_stream.py: Debezium's MariaDB connector on a Kafka
Connect worker against the engine with its Kafka sink, over the binlog the load wrote.

Both capture the very same range - from the GTID state before the load to the marker row - into
topics created beforehand with one partition and ``message.timestamp.type=LogAppendTime``, so
every record carries the instant the broker appended it: "first to last landed" is the records
that landed after the first instant / (last instant - first instant), exact to the broker's
millisecond and independent of how often anyone polls. Each topic is then read back in full:
every side must hold exactly the load's events (op counts), else the run is wrong.

Debezium starts at the load's GTID state by the Connect REST API (KIP-875): the connector is
created STOPPED, its offset set to the state, then resumed with ``snapshot.mode=recovery`` (it
rebuilds its schema history from the tables as they are - the load changes no schema - and
streams from the offset). The worker's first capture is its warm-up, reported as Connect's cold
figure (a worker runs for weeks). Ours runs from a file offset at the same state, in this
process, with each client set explicitly (``sink.kafka.client=kafka-python`` and ``confluent``);
``vs_debezium_default`` is the one the sink picks when unset (``kafka_default_client``). Both
sides poll with the same small ``poll.interval.ms`` (``POLL_INTERVAL_MS``): at Debezium's default
(500 ms) its queue holds the last, partial batch up to half a second inside the timed window.
Each producer runs at its defaults (Connect's: acks=all, one request in flight; ours:
acks=all, idempotent, linger 5 ms).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from airflow_cdc.engine.rest import Call

#: Each side's topic prefix (and engine name), before its round's label.
PREFIXES = {"connect": "dbz", "ours": "our", "confluent": "cnf"}
#: Both sides' poll.interval.ms (Debezium's default is 500).
POLL_INTERVAL_MS = 10
#: A capture that lands nothing new for this long has failed.
STALL_S = 120


def versus_debezium(server: Any, load: Any, work: Path, rounds: int, problems: list[str]) -> dict[str, Any]:
    """Rounds of Connect, ours (kafka-python) and ours (confluent); the last line's fields."""
    import mysql_stream as bench

    from airflow_cdc.engine.sinks.kafka_choice import choose_client
    from airflow_cdc.kafka_connect import ConnectClient
    from airflow_cdc.local import KafkaBroker, KafkaConnectWorker

    rates: dict[str, list[float]] = {}
    with KafkaBroker() as broker, KafkaConnectWorker(broker) as worker, ConnectClient(worker.url) as client:
        print(f"  broker up in {broker.startup_seconds:.1f}s, Connect worker in {worker.startup_seconds:.1f}s")
        bootstrap = broker.bootstrap_servers

        def capture(side: str, label: str) -> float:
            prefix = f"{PREFIXES[side]}{label}"
            create_topics(bootstrap, prefix, bench)
            if side == "connect":
                run_connect(client, server, load, prefix, bench, bootstrap)
            else:
                run_ours(server, load, work, prefix, bench, bootstrap, side)
            landed = read_landed(bootstrap, f"{prefix}.{bench.DATABASE}.{bench.TABLE}")
            if dict(landed["ops"]) != load.ops:
                problems.append(f"kafka {side} {label}: landed {dict(landed['ops'])}, the load made {load.ops}")
                print(f"  WRONG: {problems[-1]}", flush=True)
            print(
                f"  kafka {side:<16} {label:<5} {landed['records']:>9,} records {landed['rate']:>10,.0f}/s "
                f"(landed over {landed['window_s']:.2f}s)",
                flush=True,
            )
            return float(landed["rate"])

        rates["connect.cold"] = [capture("connect", "cold")]
        sides = ["connect", "ours", "confluent"]
        for round_ in range(rounds):
            for side in sides[round_ % 3 :] + sides[: round_ % 3]:  # rotate who goes first
                rates.setdefault(side, []).append(capture(side, f"r{round_}"))

    def ratio(ours: str) -> float:
        return round(statistics.median(o / t for o, t in zip(rates[ours], rates["connect"], strict=True)), 3)

    def median(side: str) -> int:
        return round(statistics.median(rates[side]))

    for side in ("connect.cold", "connect", "ours", "confluent"):
        listed = ", ".join(f"{r:,.0f}" for r in rates[side])
        print(f"kafka {side:<14} {median(side):>10,} events/s (median of {listed})")
    client = choose_client(None, {}).name  # what the sink runs with when sink.kafka.client is unset
    return {
        "vs_debezium": ratio("ours"),
        "vs_debezium_default": ratio("confluent" if client == "confluent" else "ours"),
        "kafka_default_client": client,
        "poll_interval_ms": POLL_INTERVAL_MS,
        "vs_debezium_confluent": ratio("confluent"),
        "kafka_events_per_s": median("ours"),
        "kafka_confluent_events_per_s": median("confluent"),
        "debezium_connect_events_per_s": median("connect"),
        "debezium_connect_events_per_s_cold": median("connect.cold"),
    }


def create_topics(bootstrap: str, prefix: str, bench: Any) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [
                NewTopic(
                    f"{prefix}.{bench.DATABASE}.{table}",
                    1,
                    1,
                    topic_configs={"message.timestamp.type": "LogAppendTime"},
                )
                for table in (bench.TABLE, bench.MARKER_TABLE)
            ]
        )
    finally:
        admin.close()


def wait_for_marker(bootstrap: str, prefix: str, bench: Any, expected: int, alive: Any) -> None:
    """Until the marker landed and then the load's topic holds ``expected`` records (a producer
    may deliver the marker's topic before the other's last batches), or nothing more landed for
    30 s after the marker (a side that lost events: the counts will say so). Fails once nothing
    landed for ``STALL_S``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    orders = TopicPartition(f"{prefix}.{bench.DATABASE}.{bench.TABLE}", 0)
    marker = TopicPartition(f"{prefix}.{bench.DATABASE}.{bench.MARKER_TABLE}", 0)
    try:
        progress_at, last = time.monotonic(), -1
        while True:
            alive()
            ends = consumer.end_offsets([orders, marker])
            now = time.monotonic()
            if ends[orders] != last:
                progress_at, last = now, ends[orders]
            if ends[marker] and (last >= expected or now - progress_at > 30):
                return
            if now - progress_at > STALL_S:
                raise TimeoutError(f"{orders.topic}: stuck at {last:,} records for {STALL_S}s")
            time.sleep(0.2)
    finally:
        consumer.close()


def run_connect(client: Any, server: Any, load: Any, prefix: str, bench: Any, bootstrap: str) -> None:
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "tasks.max": 1,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password or "",
        "database.ssl.mode": "disable",
        "database.server.id": 90_100 + len(client.connectors()),
        "database.include.list": bench.DATABASE,
        "topic.prefix": prefix,
        "snapshot.mode": "recovery",  # the schema history from the tables; stream from the offset
        "include.schema.changes": "false",
        "tombstones.on.delete": "false",
        "heartbeat.interval.ms": 0,
        "poll.interval.ms": POLL_INTERVAL_MS,
        "schema.history.internal.kafka.bootstrap.servers": bootstrap,
        "schema.history.internal.kafka.topic": f"{prefix}-history",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    body = {"name": prefix, "config": {k: str(v) for k, v in config.items()}, "initial_state": "STOPPED"}
    client._send(Call("POST", "/connectors", body=body))
    try:
        offset = {"gtids": load.start_gtids, "file": load.start_file, "pos": load.start_pos}
        client.alter_offsets(prefix, [{"partition": {"server": prefix}, "offset": offset}])
        client.resume(prefix)
        client.wait_running(prefix, timeout=120)
        checked = [time.monotonic()]

        def alive() -> None:  # every 2 s: the worker being measured answers each call
            if time.monotonic() - checked[0] > 2:
                checked[0] = time.monotonic()
                failures = client.status(prefix).failures
                if failures:
                    raise RuntimeError(f"connector {prefix} failed: {failures}")

        wait_for_marker(bootstrap, prefix, bench, load.changes, alive)
    finally:
        client.delete(prefix)


def run_ours(server: Any, load: Any, work: Path, prefix: str, bench: Any, bootstrap: str, side: str) -> None:
    from airflow_cdc.engine import Engine, JsonSerializer
    from airflow_cdc.engine.sinks import KafkaSink

    client = "confluent" if side == "confluent" else "kafka-python"
    sink = KafkaSink({"sink.kafka.producer.bootstrap.servers": bootstrap, "sink.kafka.client": client})
    config = {
        **bench.engine_config(server, prefix, bench.seed_offset(work, prefix, load, server=prefix)),
        "topic.prefix": prefix,
        "poll.interval.ms": POLL_INTERVAL_MS,
    }
    engine = Engine(config, batch_handler=sink, serializer=JsonSerializer())
    with sink:
        thread = threading.Thread(target=engine.run, name=prefix)
        thread.start()

        def alive() -> None:
            if not thread.is_alive():
                raise RuntimeError(f"our engine {prefix} stopped: {engine.error!r}")

        try:
            wait_for_marker(bootstrap, prefix, bench, load.changes, alive)
        finally:
            engine.close(60)
            thread.join(60)


def read_landed(bootstrap: str, topic: str) -> dict[str, Any]:
    """Every record of ``topic`` (one partition): op counts and the broker's append instants."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mysql-stream", "enable.auto.commit": False})
    ops: Counter[str] = Counter()
    stamps: list[int] = []
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        while len(stamps) < end:
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error():
                    raise RuntimeError(f"reading {topic}: {message.error()}")
                kind, stamp = message.timestamp()
                if kind != TIMESTAMP_LOG_APPEND_TIME:
                    raise RuntimeError(f"{topic} does not carry LogAppendTime: the timing would be wrong")
                stamps.append(stamp)
                value = message.value()
                ops[orjson.loads(value)["op"] if value is not None else "tombstone"] += 1
    finally:
        consumer.close()
    if not stamps:
        raise RuntimeError(f"nothing landed in {topic}")
    window = (stamps[-1] - stamps[0]) / 1000
    rate = (len(stamps) - stamps.count(stamps[0])) / window if window > 0 else 0.0
    return {"records": len(stamps), "ops": ops, "window_s": window, "rate": rate}
