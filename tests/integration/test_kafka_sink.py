"""PostgreSQL -> engine -> Kafka sink -> the real broker, with either producer library: every
change arrives, in order per key, and a broker that goes away - stopped, or killed with SIGKILL,
mid-stream - costs nothing. The broker keeps its log across a restart, so the topic is simply
read from the beginning afterwards."""

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
from tests.requirements import require_module

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: What the engine may hold unacknowledged: max.queue.size plus one batch it is working on.
QUEUE = 4096
BOUND = QUEUE + 2048


@pytest.fixture(params=["kafka-python", "confluent"])
def kafka_client(request: pytest.FixtureRequest) -> str:
    """The value of ``sink.kafka.client``."""
    if request.param == "confluent":
        require_module("confluent_kafka", extra="confluent")
    return str(request.param)


def consume_until(bootstrap: str, topic: str, done: Any, timeout: float) -> list[dict[str, Any]]:
    """Read ``topic`` from the beginning until ``done(events)``; events in partition order."""
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
            if not polled and done(events):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"not everything arrived: {len(events)} events read")
    finally:
        consumer.close()
    return events


def assert_target_equals_source(bootstrap: str, topic: str, expected: dict[str, Any], timeout: float) -> None:
    try:
        consume_until(bootstrap, topic, lambda e: apply(e) == expected, timeout)
    except AssertionError:
        events = consume_until(bootstrap, topic, lambda e: True, 60)
        raise AssertionError(image_diff(expected, apply(events))) from None


def assert_in_order_per_key(events: list[dict[str, Any]]) -> None:
    """Within each key's partition the source positions never go back."""
    last: dict[str, tuple[int, int]] = {}
    for event in events:
        if event["value"] is None:
            continue
        key = json.dumps(event["key"], sort_keys=True)
        source = event["value"]["source"]
        position = (int(source["lsn"]), 0 if event["value"]["op"] == "r" else 1)
        assert position >= last.get(key, (0, 0)), f"key {key} went back from {last[key]} to {position}"
        last[key] = position


def kafka_engine(
    pg_server: Any, database: str, bootstrap: str, prefix: str, client: str, **producer: Any
) -> tuple[Engine, KafkaSink]:
    sink = KafkaSink(
        {
            "sink.kafka.client": client,
            "sink.kafka.producer.bootstrap.servers": bootstrap,
            **{f"sink.kafka.producer.{name}": value for name, value in producer.items()},
            "topic.creation.default.partitions": 3,
            "errors.retry.delay.max.ms": 500,
        }
    )
    config = engine_config(pg_server, database, **{"topic.prefix": prefix, "max.queue.size": QUEUE})
    return Engine(config, batch_handler=sink, serializer=JsonSerializer()), sink


def test_100k_changes_arrive_in_order_per_key(
    pg_server: Any, pg_database: str, kafka_broker: Any, topic_prefix: str, kafka_client: str
) -> None:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 20_000)  # snapshot: 20k op=r
    engine, sink = kafka_engine(pg_server, pg_database, kafka_broker.bootstrap_servers, topic_prefix, kafka_client)
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
    assert_in_order_per_key(events)
    assert {e["partition"] for e in events} == {0, 1, 2}
    assert sink.metrics()["delivered"] == len(events)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_broker_down_and_back_mid_stream_loses_nothing(
    pg_server: Any, pg_database: str, restartable_kafka_broker: Any, topic_prefix: str, kafka_client: str, how: str
) -> None:
    """Stopped (SIGTERM) or crashed (SIGKILL) while changes stream in: the producer holds what it
    cannot deliver, memory stays bounded, and after the restart every change is there, in order
    per key - the broker kept its log and the producer's state, so nothing is even replaced."""
    broker = restartable_kafka_broker
    dsn = pg_server.dsn(pg_database)
    topic = f"{topic_prefix}.public.t"
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 500)
    engine, sink = kafka_engine(pg_server, pg_database, broker.bootstrap_servers, topic_prefix, kafka_client)
    with sink, EngineRunner(engine):
        with WriteLoad(dsn, 501, seed=3, per_second=500) as load:
            wait_until(lambda: load.transactions >= 300 and sink.metrics()["delivered"] > 0, 30, "writes delivered")
            broker.kill() if how == "kill" else broker.stop()
            down_at = load.transactions
            wait_until(lambda: load.transactions >= down_at + 300, 30, "writes while the broker is down")
            wait_until(lambda: sink.metrics()["in_flight"] > 0, 30, "records waiting for the broker")
            # Bounded memory: the engine stops polling once max.queue.size records wait.
            assert engine.tasks[0].status()["pending"] <= BOUND
            assert engine.state.value == "POLLING_TASKS"
            broker.start()
            back_at = load.transactions
            wait_until(lambda: load.transactions >= back_at + 300, 30, "writes after the broker is back")
        with psycopg.connect(dsn) as conn:
            expected = source_image(conn)
        assert_target_equals_source(broker.bootstrap_servers, topic, expected, 120)
        assert engine.state.value == "POLLING_TASKS"
        assert engine.error is None
    assert sink.recoveries == 0
    assert_in_order_per_key(consume_until(broker.bootstrap_servers, topic, lambda e: True, 60))


def test_records_that_time_out_are_sent_again_in_order(
    pg_server: Any, pg_database: str, restartable_kafka_broker: Any, topic_prefix: str, kafka_client: str
) -> None:
    """A broker away longer than delivery.timeout.ms: the producer fails its records, the sink
    replaces it and, once the broker is back, sends again everything from the oldest batch not
    acknowledged - so the target still ends equal to the source, row by row."""
    broker = restartable_kafka_broker
    dsn = pg_server.dsn(pg_database)
    topic = f"{topic_prefix}.public.t"
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 500)
    timeouts = {"delivery.timeout.ms": 3000, "request.timeout.ms": 1000, "linger.ms": 5}
    engine, sink = kafka_engine(
        pg_server, pg_database, broker.bootstrap_servers, topic_prefix, kafka_client, **timeouts
    )
    with sink, EngineRunner(engine):
        with WriteLoad(dsn, 501, seed=5, per_second=500) as load:
            wait_until(lambda: load.transactions >= 300 and sink.metrics()["delivered"] > 0, 30, "writes delivered")
            broker.stop()
            wait_until(lambda: sink.last_error is not None, 60, "records timing out while the broker is down")
            assert engine.tasks[0].status()["pending"] <= BOUND
            broker.start()
            wait_until(lambda: sink.recoveries >= 1 and sink.resent > 0, 60, "a new producer sending again")
            back_at = load.transactions
            wait_until(lambda: load.transactions >= back_at + 300, 30, "writes after the broker is back")
        with psycopg.connect(dsn) as conn:
            expected = source_image(conn)
        assert_target_equals_source(broker.bootstrap_servers, topic, expected, 120)
        assert engine.error is None


def test_a_record_kafka_refuses_for_good_stops_the_engine_saying_what_to_change(
    pg_server: Any, pg_database: str, kafka_broker: Any, topic_prefix: str, kafka_client: str
) -> None:
    """Sent again it is refused again: the engine stops with the reason and the fix instead of
    retrying forever, and nothing from the refused record on is acknowledged."""
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 10)
    engine, sink = kafka_engine(
        pg_server, pg_database, kafka_broker.bootstrap_servers, topic_prefix, kafka_client, **{"max.request.size": 4000}
    )
    with sink, EngineRunner(engine):
        wait_until(lambda: sink.metrics()["delivered"] >= 10, 60, "the snapshot delivered")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("update t set v = repeat('x', 20000) where id = 3")
            conn.execute("update t set v = 'after' where id = 4")
        wait_until(lambda: engine.error is not None, 60, "the engine stopped")
    message = str(engine.error)
    assert "Kafka refuses a record for good" in message and "max.request.size" in message, message
    assert sink.metrics()["delivered"] == 10  # neither the large record nor the one after it


def test_an_unset_client_is_chosen_by_what_is_installed_and_logged_at_start(
    kafka_broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        import confluent_kafka  # noqa: F401 - only whether it can be imported

        expected = "confluent"
    except ImportError:
        expected = "kafka-python"
    sink = KafkaSink({"sink.kafka.producer.bootstrap.servers": kafka_broker.bootstrap_servers})
    with caplog.at_level("INFO", logger="airflow_cdc.engine.sinks.kafka"), sink:
        pass
    assert sink.client.name == expected
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Kafka sink: client")]
    assert started == [f"Kafka sink: client {expected} ({sink.choice.reason})"], started
