"""Regenerates the recorded answers the engine backend's contract tests replay
(tests/unit/test_connect_backend.py) besides those of record.py: a throwaway PostgreSQL, Kafka
broker and Connect worker (airflow_cdc.local), a Debezium PostgreSQL connector with the sink
notification channel, then the answers only the backend asks for and the records Debezium writes
to the notification topic during an incremental snapshot signalled through the signal table.

Run from the repository root after `bash scripts/setup`:
    .venv/bin/python tests/unit/data/connect/record_backend.py

Writes ``backend_*.json`` (request and answer, as record.py does) and
``notification_records.json`` (each record's partition, offset, timestamp and value as text).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from kafka import KafkaConsumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer
from tests.unit.data.connect.record import HERE, PG, save, wait_for

TOPIC = "rec.notifications"


def notification_records(broker: KafkaBroker, until: str) -> list[dict[str, Any]]:
    """The notification topic's records, once one of type ``until`` is there."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    try:
        while not consumer.partitions_for_topic(TOPIC):
            if time.monotonic() > deadline:
                raise SystemExit(f"no topic {TOPIC}")
            consumer.topics()
            time.sleep(0.2)
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        while not any(f'"type":"{until}"' in r["value"] for r in records):
            if time.monotonic() > deadline:
                raise SystemExit(f"no {until} notification: {records}")
            for batch in consumer.poll(timeout_ms=200).values():
                records += [
                    {
                        "partition": m.partition,
                        "offset": m.offset,
                        "timestamp": m.timestamp,
                        "key": m.key.decode(),
                        "value": m.value.decode(),
                    }
                    for m in batch
                ]
    finally:
        consumer.close()
    return records


def record(pg: PostgresServer, database: str, broker: KafkaBroker, worker: KafkaConnectWorker) -> None:
    http = httpx.Client(base_url=worker.url, timeout=120)

    def call(name: str, method: str, path: str, body: Any = None) -> httpx.Response:
        response = http.request(method, path, json=body)
        save(name, response, body)
        return response

    config = {
        "connector.class": PG,
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.password": "unused",
        "database.dbname": database,
        "topic.prefix": "rec",
        "plugin.name": "pgoutput",
        "slot.name": "rec_backend_slot",
        "table.include.list": "public.orders,public.debezium_signal",
        "signal.data.collection": "public.debezium_signal",
        "snapshot.mode": "no_data",
        "notification.enabled.channels": "log,sink",
        "notification.sink.topic.name": TOPIC,
        "tasks.max": "1",
    }
    http.post("/connectors", json={"name": "orders", "config": config}).raise_for_status()
    call("backend_status_just_created", "GET", "/connectors/orders/status")  # usually "No status found"
    wait_for(http, "orders", lambda s: s["tasks"] and all(t["state"] == "RUNNING" for t in s["tasks"]))
    call("backend_info", "GET", "/connectors/orders")
    call("backend_offsets_unknown", "GET", "/connectors/nosuch/offsets")
    call("backend_config_unknown", "GET", "/connectors/nosuch/config")
    with pg.connect(database) as conn:
        conn.execute(
            "insert into debezium_signal values ('snap-1', 'execute-snapshot', "
            """'{"data-collections": ["public.orders"], "type": "incremental"}')"""
        )
    records = notification_records(broker, "COMPLETED")
    (HERE / "notification_records.json").write_text(json.dumps(records, indent=2) + "\n")
    print(f"notification_records: {len(records)}", flush=True)
    http.delete("/connectors/orders")


def main() -> None:
    with PostgresServer() as pg, KafkaBroker() as broker:
        database = pg.create_database()
        with pg.connect(database) as conn:
            conn.execute("create table orders (id int primary key, item text, qty int)")
            conn.execute("insert into orders values (1, 'apple', 3), (2, 'pear', 5)")
            conn.execute(
                "create table debezium_signal (id varchar(42) primary key, type varchar(32), data varchar(2048))"
            )
        with KafkaConnectWorker(broker) as worker:
            record(pg, database, broker, worker)
        pg.drop_database(database)


if __name__ == "__main__":
    main()
