"""The events of bench/apply_vs_jdbc_sink.py: one source table, one change load, two captures.

The table and the load are bench/spark_apply.py's (``fill_source``; each 1000-change transaction
updates hot keys, inserts, updates the previous inserts, deletes), plus key changes: each
transaction also moves 20 untouched keys to new ids, which Debezium (and our engine) emits as a
delete of the old key, its tombstone, and a create of the new one.

Two captures of the very same snapshot and WAL, each through a slot of its own:

- ours: the engine (``EngineInstance``, Kafka sink) into ``<db>.public.items``, 3 partitions,
  ``message.timestamp.type=LogAppendTime``. It snapshots, catches up and stops; the load runs
  while it is stopped; it starts again and streams the backlog. Its capture rate is timed by the
  broker: events / (snapshot's first-to-last append + backlog's first-to-last append), so it
  is the engine's own speed, not the load generator's.
- Debezium's PostgreSQL connector on the Connect worker into ``dbz_<db>.public.items`` (3
  partitions, keyed like ours), with the JSON converter's ``schemas.enable=true``: Debezium's JDBC
  sink needs a Connect schema on every record, and our engine writes JSON without one
  (``serialization.py``). On our topic its task fails at the first record: "Configured primary
  key mode 'record_key' cannot have null schema".

Both topics must hold the number of records the load made, or the bench stops.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from spark_apply import DELETE, FILL, FRESH_UPDATE, HOT_UPDATE, engine_props, fill_source, topic_size

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient, ConnectRestError
from airflow_cdc.local.postgres import PostgresServer

PARTITIONS = 3
#: Keys moved to a new id per transaction, and where the new ids start.
TXN_KEY_CHANGES, MOVED_BASE = 20, 10_000_000
#: Records a transaction makes: 600 + 200 + 100 changes, 100 deletes with their tombstones, and
#: per key change a delete, a tombstone and a create.
TXN_RECORDS = 600 + 200 + 100 + 2 * 100 + 3 * TXN_KEY_CHANGES
KEY_CHANGE = "update items set id = id + %s where id between %s and %s"
#: The JSON converter with schemas, for Debezium's topic (the JDBC sink reads it the same way).
SCHEMA_JSON = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}


@dataclass
class Captured:
    ours: str
    theirs: str
    events: int
    ops: dict[str, int]
    #: The engine's capture: broker-timed windows (snapshot + backlog), and wall time with its
    #: start-ups and waits.
    capture_s: float
    capture_wall_s: float
    value_bytes: dict[str, int] = field(default_factory=dict)


def transaction(rows: int, txn: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """spark_apply's transaction, then 20 keys of the third quarter (never otherwise touched)
    moved to fresh ids."""
    hot = rows // 4
    first = 1 + (txn * 600) % (hot - 600)
    new = rows + txn * 200
    cold = rows // 2 + txn * 90
    moved = rows * 3 // 4 + txn * TXN_KEY_CHANGES
    statements = [
        ("u", HOT_UPDATE, (first, first + 599)),
        ("c", FILL, (new + 1, new + 200)),
        ("u", FRESH_UPDATE, (new - 199, new - 100)),
        ("d", DELETE, (first, first + 9, cold + 1, cold + 90)),
        ("k", KEY_CHANGE, (MOVED_BASE, moved + 1, moved + TXN_KEY_CHANGES)),
    ]
    return statements if txn else statements[:2] + statements[3:]


def change_load(pg: PostgresServer, database: str, rows: int, transactions: int) -> Counter[str]:
    counts = Counter[str]()
    with pg.connect(database, autocommit=False) as conn:
        for txn in range(transactions):
            for op, statement, params in transaction(rows, txn):
                counts[op] += conn.execute(statement, params).rowcount
            conn.commit()
    return counts


def create_topic(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=configs)]).values():
        future.result(60)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "apply-bench-ends"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, limits: dict[int, int] | None = None) -> list[Any]:
    """Every record of ``topic`` (or the first ``limits[p]`` of partition p), partition by partition."""
    ends = limits or end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "apply-bench-read", "enable.auto.commit": False})
    out: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS) if ends[p]])
        want = sum(ends.values())
        taken = Counter[int]()
        while sum(taken.values()) < want:
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error():
                    raise RuntimeError(f"reading {topic}: {message.error()}")
                if message.offset() < ends[message.partition()]:
                    taken[message.partition()] += 1
                    out.append(message)
    finally:
        consumer.close()
    return out


def windows(records: list[Any], split: dict[int, int]) -> float:
    """Seconds of the snapshot's appends (offsets below ``split``) plus the backlog's."""
    phases: list[list[int]] = [[], []]
    for message in records:
        kind, stamp = message.timestamp()
        if kind != TIMESTAMP_LOG_APPEND_TIME:
            raise RuntimeError(f"{message.topic()} does not carry LogAppendTime: the capture timing would be wrong")
        phases[message.offset() >= split[message.partition()]].append(stamp)
    return sum((max(p) - min(p)) / 1000 for p in phases if p)


def ops_of(records: list[Any]) -> Counter[str]:
    return Counter(orjson.loads(m.value())["op"] if m.value() is not None else "tombstone" for m in records)


def run_engine(props: dict[str, Any], until: Any) -> None:
    """The engine on a thread until ``until(instance)`` holds, then a clean stop."""
    instance = EngineInstance(props)
    thread = threading.Thread(target=instance.run, name="bench-engine", daemon=True)
    thread.start()
    try:
        wait_until(lambda: until(instance), 900, "the engine's capture", interval=0.2)
    finally:
        instance.request_stop()
        thread.join(60)


def current_lsn(pg: PostgresServer, database: str) -> str:
    with pg.connect(database) as conn:
        return str(conn.execute("select pg_current_wal_lsn()::text").fetchone()[0])  # type: ignore[index]


def debezium_source(pg: PostgresServer, database: str, prefix: str) -> dict[str, Any]:
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": 1,
        "database.hostname": pg.host,
        "database.port": pg.port,
        "database.user": pg.user,
        "database.password": pg.password or "unused",
        "database.dbname": database,
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "slot.name": prefix,
        "publication.name": prefix,
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.items",
        "snapshot.mode": "initial",
        **SCHEMA_JSON,
    }


def check_connector(client: ConnectClient, name: str) -> None:
    """Raise with the trace of a FAILED connector or task; a status not there yet is no failure."""
    try:
        failures = client.status(name).failures
    except ConnectRestError as exc:
        if exc.status in (404, 409):  # just created, or the worker is rebalancing
            return
        raise
    if failures:
        raise RuntimeError(f"connector {name} failed: {failures}")


def wait_topic(client: ConnectClient, name: str, bootstrap: str, topic: str, count: int) -> None:
    def landed() -> bool:
        check_connector(client, name)
        return topic_size(bootstrap, topic) >= count

    wait_until(landed, 900, f"{count:,} records in {topic}", interval=1.0)


def capture(
    pg: PostgresServer, bootstrap: str, client: ConnectClient, database: str, events: int, work: Path
) -> Captured:
    rows = events // 2
    transactions = (events - rows) // TXN_RECORDS
    fill_source(pg, database, rows)
    ours, prefix = f"{database}.public.items", f"dbz_{database}"
    theirs = f"{prefix}.public.items"
    create_topic(bootstrap, ours, **{"message.timestamp.type": "LogAppendTime"})
    create_topic(bootstrap, theirs)
    # Debezium first, alone: its snapshot done, its slot holds the WAL from before the load.
    client.create(prefix, debezium_source(pg, database, prefix))
    wait_topic(client, prefix, bootstrap, theirs, rows)
    props = {**engine_props(pg, database, bootstrap, work / "state"), "slot.drop.on.stop": False}
    started = time.perf_counter()
    lsn = current_lsn(pg, database)
    run_engine(props, lambda instance: instance.position(target=lsn).reached and topic_size(bootstrap, ours) >= rows)
    wall = time.perf_counter() - started
    split = end_offsets(bootstrap, ours)
    changes = change_load(pg, database, rows, transactions)
    keys = changes.pop("k")
    expected = rows + changes.total() + changes["d"] + 3 * keys
    wait_topic(client, prefix, bootstrap, theirs, expected)  # Debezium caught up: ours runs alone
    lsn = current_lsn(pg, database)
    started = time.perf_counter()
    run_engine(props, lambda instance: instance.position(target=lsn).reached)
    wall += time.perf_counter() - started
    records = read_topic(bootstrap, ours)
    ops = ops_of(records)
    want = {"r": rows, "c": changes["c"] + keys, "u": changes["u"], "d": changes["d"] + keys}
    want["tombstone"] = want["d"]
    theirs_count = topic_size(bootstrap, theirs)
    if len(records) != expected or dict(ops) != want or theirs_count != expected:
        raise SystemExit(
            f"apply_vs_jdbc_sink: the load made {expected:,} records {want}; our topic holds {len(records):,} "
            f"{dict(ops)}, Debezium's {theirs_count:,}"
        )
    sample = read_topic(bootstrap, theirs, {p: min(1, n) for p, n in end_offsets(bootstrap, theirs).items()})
    sizes = {
        "ours": sum(len(m.value() or b"") for m in records) // len(records),
        "debezium_r_event": len(sample[0].value()),
    }
    return Captured(ours, theirs, expected, dict(ops), windows(records, split), wall, sizes)


def warm_copy(bootstrap: str, topic: str, per_partition: int) -> str:
    """``<topic>.warm``: the first ``per_partition`` records of each partition, keys and values as
    they are (an untimed warm-up run reads it: a fresh JVM path loads and compiles as it goes)."""
    warm = f"{topic}.warm"
    create_topic(bootstrap, warm)
    ends = end_offsets(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for message in read_topic(bootstrap, topic, {p: min(per_partition, n) for p, n in ends.items()}):
        producer.produce(warm, key=message.key(), value=message.value(), partition=message.partition())
        producer.poll(0)
    producer.flush(60)
    return warm
