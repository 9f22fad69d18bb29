"""The Kafka Connect worker of the test services runs Debezium for real (ADR 0002): a PostgreSQL
connector created through ``ConnectClient`` reaches RUNNING and its change events land in the
broker; a bad config and a failing task are reported in Connect's and PostgreSQL's own words; a
worker that cannot start fails within its timeout with its log tail."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.kafka_connect import ConnectClient, ConnectRestError
from airflow_cdc.kafka_connect.client import validation_errors
from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.ports import free_port
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.local.process import ServiceError
from tests.conftest import deleting_new_connectors

pytestmark = pytest.mark.integration

PG = "io.debezium.connector.postgresql.PostgresConnector"
#: A connector's first start takes a snapshot; the machine may be busy.
RUNNING_TIMEOUT = 120


def postgres_connector(pg_server: PostgresServer, database: str, prefix: str, **extra: Any) -> dict[str, Any]:
    return {
        "database.hostname": pg_server.host,
        "database.port": pg_server.port,
        "database.user": pg_server.user,
        "database.password": pg_server.password or "unused",  # trust authentication
        "database.dbname": database,
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "slot.name": f"slot_{prefix}",  # slots are per server: one per test
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.orders",
        "tasks.max": 1,
        **extra,
    }


def read_events(broker: KafkaBroker, topic: str, count: int, timeout: float = 60) -> list[tuple[Any, Any]]:
    """The first ``count`` records of ``topic`` as JSON ``(key, value)`` (value None for a
    tombstone), waiting for the topic and the records until the deadline."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    deadline = time.monotonic() + timeout
    events: list[tuple[Any, Any]] = []
    try:
        while not consumer.partitions_for_topic(topic):
            assert time.monotonic() < deadline, f"no topic {topic} after {timeout}s"
            consumer.topics()  # a metadata refresh
            time.sleep(0.1)
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        while len(events) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                events += [(json.loads(m.key), None if m.value is None else json.loads(m.value)) for m in batch]
    finally:
        consumer.close()
    assert len(events) >= count, f"{len(events)} of {count} events in {topic} after {timeout}s: {events}"
    return events


def test_a_debezium_postgres_connector_runs_and_its_events_land_in_the_broker(
    pg_server: PostgresServer,
    pg_database: str,
    kafka_broker: KafkaBroker,
    connect: ConnectClient,
    kafka_topic_prefix: str,
) -> None:
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table orders (id int primary key, item text not null, qty int)")
        conn.execute("alter table orders replica identity full")  # updates and deletes carry 'before'
        conn.execute("insert into orders values (1, 'apple', 3), (2, 'pear', null)")
    name = f"{kafka_topic_prefix}-pg"
    created = connect.create(
        name, {"connector.class": PG, **postgres_connector(pg_server, pg_database, kafka_topic_prefix)}
    )
    assert created["name"] == name and created["config"]["database.port"] == str(pg_server.port)
    status = connect.wait_running(name, timeout=RUNNING_TIMEOUT)
    assert status.running and [t.state for t in status.tasks] == ["RUNNING"]
    assert name in connect.connectors()

    topic = f"{kafka_topic_prefix}.public.orders"
    snapshot = read_events(kafka_broker, topic, 2)
    by_id = sorted(snapshot, key=lambda event: event[0]["id"])
    assert [(key, value["op"], value["before"], value["after"]) for key, value in by_id] == [
        ({"id": 1}, "r", None, {"id": 1, "item": "apple", "qty": 3}),
        ({"id": 2}, "r", None, {"id": 2, "item": "pear", "qty": None}),
    ]
    source = snapshot[0][1]["source"]
    assert (source["connector"], source["name"], source["db"], source["schema"], source["table"]) == (
        "postgresql",
        kafka_topic_prefix,
        pg_database,
        "public",
        "orders",
    )
    assert source["snapshot"] in ("first", "true", "last", "first_in_data_collection", "last_in_data_collection")

    with pg_server.connect(pg_database) as conn:
        conn.execute("insert into orders values (3, 'plum', 7)")
        conn.execute("update orders set qty = 4 where id = 1")
        conn.execute("delete from orders where id = 2")
    events = read_events(kafka_broker, topic, 6)
    streamed = [(key, value and (value["op"], value["before"], value["after"])) for key, value in events[2:]]
    assert streamed == [
        ({"id": 3}, ("c", None, {"id": 3, "item": "plum", "qty": 7})),
        ({"id": 1}, ("u", {"id": 1, "item": "apple", "qty": 3}, {"id": 1, "item": "apple", "qty": 4})),
        ({"id": 2}, ("d", {"id": 2, "item": "pear", "qty": None}, None)),
        ({"id": 2}, None),  # the tombstone that lets compaction drop the key
    ]
    assert all(value["source"]["snapshot"] == "false" for _, value in events[2:5])
    assert events[2][1]["source"]["lsn"] < events[3][1]["source"]["lsn"] < events[4][1]["source"]["lsn"]


def test_a_wrong_database_port_is_refused_in_connects_words(
    pg_server: PostgresServer, pg_database: str, connect: ConnectClient, kafka_topic_prefix: str
) -> None:
    port = free_port()  # nothing listens there
    config = postgres_connector(pg_server, pg_database, kafka_topic_prefix, **{"database.port": port})
    refused = f"Connection to {pg_server.host}:{port} refused"

    answer = connect.validate(PG, config)
    assert answer["error_count"] == 1
    [error] = validation_errors(answer)
    assert error.startswith("database.hostname: ") and refused in error

    name = f"{kafka_topic_prefix}-bad-port"
    with pytest.raises(ConnectRestError) as caught:
        connect.create(name, {"connector.class": PG, **config})
    assert caught.value.status == 400 and not isinstance(caught.value, RetriableError)
    assert refused in str(caught.value)
    assert name not in connect.connectors()


def test_a_task_that_fails_is_reported_with_the_databases_words(
    pg_server: PostgresServer,
    pg_database: str,
    connect: ConnectClient,
    connect_worker: KafkaConnectWorker,
    kafka_topic_prefix: str,
) -> None:
    """Valid to Connect and to Debezium's validation, fails at run time: a slot with an output
    plugin the server does not have."""
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table orders (id int primary key)")
    name = f"{kafka_topic_prefix}-failing"
    config = postgres_connector(pg_server, pg_database, kafka_topic_prefix, **{"plugin.name": "decoderbufs"})
    connect.create(name, {"connector.class": PG, **config})
    with pytest.raises(ConnectRestError) as caught:
        connect.wait_running(name, timeout=RUNNING_TIMEOUT)
    message = str(caught.value)
    assert "task 0: io.debezium.DebeziumException: Creation of replication slot failed" in message
    assert 'could not access file "decoderbufs"' in message
    if not connect_worker.external:  # the worker logs it too (its log is what a failed test shows)
        assert 'could not access file "decoderbufs"' in connect_worker.log(2000)


def test_the_connect_fixture_deletes_the_connectors_a_test_created(
    pg_server: PostgresServer, pg_database: str, connect: ConnectClient, kafka_topic_prefix: str
) -> None:
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table orders (id int primary key)")

    def create(suffix: str) -> str:
        name = f"{kafka_topic_prefix}-{suffix}"
        config = postgres_connector(
            pg_server, pg_database, f"{kafka_topic_prefix}_{suffix}", **{"snapshot.mode": "no_data"}
        )
        connect.create(name, {"connector.class": PG, **config})
        return name

    kept = create("kept")
    with pytest.raises(RuntimeError, match="the test failed"), deleting_new_connectors(connect):
        created = create("new")
        assert {kept, created} <= set(connect.connectors())
        raise RuntimeError("the test failed")
    names = connect.connectors()
    assert kept in names and created not in names


def test_a_worker_that_cannot_start_fails_within_its_timeout_with_its_log_tail() -> None:
    nowhere = f"127.0.0.1:{free_port()}"  # no broker there
    worker = KafkaConnectWorker(KafkaBroker(external_bootstrap=nowhere), startup_timeout=10)
    started = time.monotonic()
    with pytest.raises(ServiceError) as caught:
        worker.start()
    took = time.monotonic() - started
    message = str(caught.value)
    assert "Kafka Connect worker" in message and "log tail" in message
    assert nowhere in message  # from the worker's log: it kept trying to reach that broker
    assert took < 10 + 15, f"took {took:.1f}s"  # the timeout, then stopping the JVM
    assert not worker.running and worker.directory is None
