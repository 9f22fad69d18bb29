"""The test servers are real and set up the way CDC needs them."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.services.kafka import SESSION_TIMEOUT_MS


def test_postgres_is_ready_for_logical_decoding(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        assert conn.execute("show wal_level").fetchone() == ("logical",)
        conn.execute("create table t (id int primary key)")
        slot = f"s_{uuid.uuid4().hex[:8]}"
        conn.execute("select pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        conn.execute("insert into t values (1)")
        changes = conn.execute(
            "select count(*) from pg_logical_slot_peek_binary_changes(%s, null, null, "
            "'proto_version', '1', 'publication_names', 'none')",
            (slot,),
        )
        assert changes.fetchone()[0] >= 0
        conn.execute("select pg_drop_replication_slot(%s)", (slot,))
    assert (pg_server.bindir / "pg_recvlogical").exists() or pg_server.external_dsn


def test_mariadb_writes_a_full_row_binlog(mariadb_server):
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute("select @@log_bin, @@binlog_format, @@binlog_row_image")
        assert cur.fetchone() == (1, "ROW", "FULL")
        cur.execute("show master status")
        assert cur.fetchone() is not None


def test_kafka_broker_round_trips_keyed_idempotent_messages(kafka_broker, topic_prefix):
    topic = f"{topic_prefix}.services"
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, acks="all", enable_idempotence=True)
    for i in range(20):
        producer.send(topic, key=str(i % 3).encode(), value=f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        consumer_timeout_ms=15000,
    )
    values = []
    for message in consumer:
        values.append(message.value.decode())
        if len(values) == 20:
            break
    consumer.commit()
    consumer.close()
    assert values == [f"v{i}" for i in range(20)]


def test_kafka_broker_can_be_stopped_and_restarted_on_the_same_port(kafka_broker):
    if not kafka_broker.restartable:
        pytest.skip("an external broker cannot be restarted by the tests")
    port = kafka_broker.port
    kafka_broker.stop_broker()
    kafka_broker.start()
    assert kafka_broker.port == port
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        assert isinstance(admin.list_topics(), list)
    finally:
        admin.close()
