"""Every Kafka client of the package against a broker that only lets SASL_SSL clients in
(SCRAM-SHA-512 over TLS, a throwaway CA): the engine's sink with either library and its topic
creation, the Kafka offset store, the Kafka signal channel, the notification and lag readers
of the Airflow side and the Spark apply job's kafka-python source. The readers get what the
instance's API gives (its configuration without passwords) plus the password, as they do in
Airflow from a ``kafka`` connection. A wrong password fails at once, naming the setting."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.config import is_secret_key
from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.kafka_settings import kafka_python_config
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.storage import build_offset_store
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.kafka_connect.notification_topic import read_page
from airflow_cdc.triggers.kafka_lag import ConsumerLag, client_settings
from tests.integration.pg_support import create_load_table, engine_config
from tests.requirements import require_module

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SINK = "sink.kafka.producer."
SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"
ROWS = 40


@pytest.fixture(params=["kafka-python", "confluent"])
def kafka_client(request: pytest.FixtureRequest) -> str:
    if request.param == "confluent":
        require_module("confluent_kafka", extra="confluent")
    return str(request.param)


def secured(broker: Any, prefix: str = "", **changes: str) -> dict[str, str]:
    """The broker's SASL_SSL client settings under ``prefix``, with ``changes``."""
    return {f"{prefix}{k}": v for k, v in {**broker.client_security(), **changes}.items()}


def client(broker: Any) -> dict[str, Any]:
    """kafka-python arguments for the SASL_SSL listener (the tests' own clients)."""
    return kafka_python_config(broker.client_security(), KafkaConsumer.DEFAULT_CONFIG)


def read_topic(broker: Any, topic: str, count: int, timeout: float = 60) -> list[dict[str, Any]]:
    consumer = KafkaConsumer(**client(broker), enable_auto_commit=False)
    values: list[dict[str, Any]] = []
    try:
        partitions = wait_until(lambda: consumer.partitions_for_topic(topic), 30, f"topic {topic}")
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while len(values) < count:
            assert time.monotonic() < deadline, f"{len(values)} of {count} records arrived on {topic}"
            for batch in consumer.poll(timeout_ms=200).values():
                values += [json.loads(m.value) for m in batch if m.value is not None]
    finally:
        consumer.close()
    return values


def capture_config(pg_server: Any, database: str, broker: Any, prefix: str) -> dict[str, Any]:
    """Offsets in a Kafka topic, signals on a Kafka topic, notifications through the sink: every
    engine-side Kafka client on the SASL_SSL listener."""
    servers = broker.secure_bootstrap_servers
    return engine_config(
        pg_server,
        database,
        **{
            "topic.prefix": prefix,
            "snapshot.mode": "no_data",
            "signal.data.collection": "public.debezium_signal",
            "signal.enabled.channels": "source,kafka",
            "signal.kafka.topic": f"{prefix}.signals",
            "signal.kafka.bootstrap.servers": servers,
            **{k: v for k, v in secured(broker, "signal.consumer.").items() if not k.endswith("bootstrap.servers")},
            "notification.enabled.channels": "log,api,sink",
            "notification.sink.topic.name": f"{prefix}.notifications",
            "offset.storage": "kafka",
            "offset.storage.topic": f"{prefix}.offsets",
            **secured(broker),  # Kafka Connect's worker keys: bootstrap.servers, security.protocol, ...
        },
    )


def sink_settings(broker: Any, kafka_client: str, **changes: str) -> dict[str, Any]:
    return {"sink.kafka.client": kafka_client, **secured(broker, SINK, **changes), "errors.retry.delay.max.ms": 500}


def test_the_engine_captures_into_a_sasl_ssl_broker_and_airflow_reads_it(
    pg_server: Any, pg_database: str, secure_kafka_broker: Any, topic_prefix: str, kafka_client: str
) -> None:
    broker, dsn = secure_kafka_broker, pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SIGNAL_DDL)
        create_load_table(conn, ROWS)
    config = capture_config(pg_server, pg_database, broker, topic_prefix)
    sink = KafkaSink(sink_settings(broker, kafka_client))
    engine = Engine(config, batch_handler=sink, serializer=JsonSerializer())
    signals = KafkaProducer(**kafka_python_config(broker.client_security(), KafkaProducer.DEFAULT_CONFIG))
    try:
        with sink, EngineRunner(engine):
            # The signal channel's consumer is assigned once the task streams; a signal sent
            # before would be skipped (it reads from the end), so send until one is taken.
            value = json.dumps({"type": "execute-snapshot", "data": {"data-collections": ["public.t"]}}).encode()

            def completed() -> bool:
                items, _ = engine.notifications.since(0)
                if not any(n["type"] == "STARTED" for n in items):
                    signals.send(f"{topic_prefix}.signals", key=topic_prefix.encode(), value=value).get(30)
                return any(n["type"] == "COMPLETED" for n in items)

            wait_until(completed, 90, "an incremental snapshot signalled over SASL_SSL", interval=1.0)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("insert into t values (%s, 'streamed', 0)", (ROWS + 1,))
            events = read_topic(broker, f"{topic_prefix}.public.t", ROWS + 1)
    finally:
        signals.close()
    assert {e["after"]["id"] for e in events if e.get("after")} == set(range(1, ROWS + 2))

    # The offset store wrote to its compacted topic over SASL_SSL; a fresh store reads it back.
    store = build_offset_store(engine.name, engine.settings)
    store.start()
    try:
        assert store.entries(), "no offset committed to the Kafka offset store"
    finally:
        store.stop()

    # The Airflow side: the instance's configuration as its API gives it (no passwords), and the
    # password from a kafka connection's extra.
    running = {k: v for k, v in {**config, **sink_settings(broker, kafka_client)}.items() if not is_secret_key(k)}
    assert f"{SINK}sasl.password" not in running
    readers = client_settings(running, SINK, overrides={"sasl.password": broker.sasl_ssl.password})
    page = read_page(f"{topic_prefix}.notifications", kafka_options=readers)
    assert {"STARTED", "COMPLETED"} <= {n.type for n in page.notifications}
    lag = ConsumerLag(readers, "nobody-read-yet", topic_prefix=topic_prefix, exclude=[f"{topic_prefix}.notifications"])
    try:
        measured = lag.measure()
    finally:
        lag.close()
    assert measured is not None and measured.partitions.get(f"{topic_prefix}.public.t:0", 0) >= ROWS + 1


def test_the_topic_is_created_with_the_sinks_security_settings(
    secure_kafka_broker: Any, topic_prefix: str, kafka_client: str
) -> None:
    sink = KafkaSink({**sink_settings(secure_kafka_broker, kafka_client), "topic.creation.default.partitions": 3})
    sink.client.create_topic(f"{topic_prefix}.created", 3, -1)
    admin = KafkaAdminClient(
        **kafka_python_config(secure_kafka_broker.client_security(), KafkaAdminClient.DEFAULT_CONFIG)
    )
    try:
        described = admin.describe_topics([f"{topic_prefix}.created"])
    finally:
        admin.close()
    assert len(described[0]["partitions"]) == 3


def assert_names_the_password(failed: pytest.ExceptionInfo[ConfigError], key: str) -> None:
    assert [p.key for p in failed.value.problems] == [key], failed.value
    assert "refused the SASL login" in str(failed.value)


def test_a_wrong_password_fails_at_once_naming_the_setting(
    secure_kafka_broker: Any, topic_prefix: str, kafka_client: str
) -> None:
    broker = secure_kafka_broker
    started = time.monotonic()
    sink = KafkaSink(sink_settings(broker, kafka_client, **{"sasl.password": "wrong"}))
    with pytest.raises(ConfigError) as failed:
        sink.start()
    assert_names_the_password(failed, f"{SINK}sasl.password")

    store = build_offset_store(
        "wrong",
        {
            "offset.storage": "kafka",
            "bootstrap.servers": broker.secure_bootstrap_servers,
            **secured(broker, **{"sasl.password": "wrong"}),
            "offset.storage.topic": f"{topic_prefix}.offsets",
            "offset.storage.partitions": 1,
            "offset.storage.replication.factor": -1,
            "offset.flush.timeout.ms": 5000,
            "request.timeout.ms": 30_000,
        },
    )
    with pytest.raises(ConfigError) as failed:
        store.start()
    assert_names_the_password(failed, "sasl.password")

    readers = client_settings(secured(broker, **{"sasl.password": "wrong"}))
    with pytest.raises(ConfigError) as failed:
        read_page(f"{topic_prefix}.notifications", kafka_options=readers)
    assert_names_the_password(failed, "sasl.password")
    assert time.monotonic() - started < 20, "a refused login took as long as an unreachable broker"
