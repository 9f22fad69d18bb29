"""PostgreSQL -> engine -> Kafka sink -> the real broker: every change arrives, in order per key,
and a broker that goes away (and comes back empty, as the test broker does) costs nothing."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.pg_support import WriteLoad, apply, create_load_table, engine_config, image_diff, source_image

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def consume_until(
    bootstrap: str, topic: str, done: Any, timeout: float, already: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Read ``topic`` from the beginning until ``done(already + read)``; events in partition order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=500)
    events: list[dict[str, Any]] = []
    try:
        partitions = wait_until(lambda: consumer.partitions_for_topic(topic), 30, f"topic {topic}")
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while True:
            polled = consumer.poll(timeout_ms=200)
            for batch in polled.values():
                for message in batch:
                    events.append(
                        {
                            "partition": message.partition,
                            "key": json.loads(message.key),
                            "value": None if message.value is None else json.loads(message.value),
                        }
                    )
            # Checking replays everything read so far: only when caught up with the topic.
            if not polled and done((already or []) + events):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"not everything arrived: {len(events)} events read")
    finally:
        consumer.close()
    return events


def kafka_engine(pg_server: Any, database: str, bootstrap: str, prefix: str) -> tuple[Engine, KafkaSink]:
    sink = KafkaSink(
        {
            "sink.kafka.producer.bootstrap.servers": bootstrap,
            "topic.creation.default.partitions": 3,
            "errors.retry.delay.max.ms": 500,
        }
    )
    config = engine_config(pg_server, database, **{"topic.prefix": prefix, "max.queue.size": 4096})
    return Engine(config, batch_handler=sink, serializer=JsonSerializer()), sink


def test_100k_changes_arrive_in_order_per_key(
    pg_server: Any, pg_database: str, kafka_broker: Any, topic_prefix: str
) -> None:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 20_000)  # snapshot: 20k op=r
    engine, sink = kafka_engine(pg_server, pg_database, kafka_broker.bootstrap_servers, topic_prefix)
    with sink, EngineRunner(engine):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("update t set n = n + 1")  # 20k
            conn.execute("insert into t select g, 'v' || g, g from generate_series(20001, 50000) g")  # 30k
            conn.execute("update t set v = v || 'u' where id % 2 = 0")  # 25k
            conn.execute("delete from t where id % 5 = 0")  # 10k deletes (+ 10k tombstones)
            expected = source_image(conn)
        events = consume_until(
            kafka_broker.bootstrap_servers, f"{topic_prefix}.public.t", lambda e: apply(e) == expected, 180
        )
    changes = [e for e in events if e["value"] is not None]
    assert len(changes) >= 105_000
    assert apply(events) == expected
    # In order per key: within each key's partition the source positions never go back.
    last: dict[str, tuple[int, int]] = {}
    for event in changes:
        key = json.dumps(event["key"], sort_keys=True)
        source = event["value"]["source"]
        position = (int(source["lsn"]), 0 if event["value"]["op"] == "r" else 1)
        assert position >= last.get(key, (0, 0)), f"key {key} went back from {last[key]} to {position}"
        last[key] = position
    assert {e["partition"] for e in events} == {0, 1, 2}
    assert sink.metrics()["delivered"] == len(events)


def test_broker_down_and_back_loses_nothing(
    pg_server: Any, pg_database: str, restartable_kafka_broker: Any, topic_prefix: str
) -> None:
    broker = restartable_kafka_broker
    dsn = pg_server.dsn(pg_database)
    topic = f"{topic_prefix}.public.t"
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 500)
    engine, sink = kafka_engine(pg_server, pg_database, broker.bootstrap_servers, topic_prefix)
    with sink, EngineRunner(engine):
        with WriteLoad(dsn, 501, seed=3) as load:
            wait_until(lambda: load.transactions >= 300, 30, "writes before the stop")
        with psycopg.connect(dsn) as conn:
            before_stop = source_image(conn)
        # Collect what was delivered before the stop (the test broker forgets it on restart).
        collected = consume_until(broker.bootstrap_servers, topic, lambda e: apply(e) == before_stop, 60)
        broker.stop()
        with WriteLoad(dsn, 100_000, seed=4) as load:
            wait_until(lambda: load.transactions >= 300, 30, "writes while the broker is down")
            # The producer holds what it cannot deliver, and keeps retrying.
            wait_until(lambda: sink.metrics()["in_flight"] > 0, 30, "records waiting for the broker")
            # Bounded memory: the engine stops polling once max.queue.size records wait.
            assert engine.tasks[0].status()["pending"] <= 4096 + 2048
            assert engine.state.value == "POLLING_TASKS"
            broker.start()
            wait_until(lambda: load.transactions >= 600, 30, "writes after the broker is back")
        with psycopg.connect(dsn) as conn:
            expected = source_image(conn)
        try:
            consume_until(broker.bootstrap_servers, topic, lambda e: apply(e) == expected, 120, already=collected)
        except AssertionError:
            after = consume_until(broker.bootstrap_servers, topic, lambda e: True, 5)
            raise AssertionError(image_diff(expected, apply(collected + after))) from None
        assert engine.state.value == "POLLING_TASKS"
        assert engine.error is None
    assert sink.recoveries >= 1
