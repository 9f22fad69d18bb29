"""Helpers of the docker stack's tests: the stack's connections and connector configs pointed at
the test servers, and reading what a capture delivered to Kafka."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import psycopg
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer
from tests.unit.docker import stack


def connect_as(server: PostgresServer, conn_id: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """A connection with an Airflow connection of the stack, its host pointed at the test server."""
    conn = stack.connections()[conn_id]
    return psycopg.connect(
        host=server.host,
        port=server.port,
        user=conn["login"],
        password=conn["password"],
        dbname=conn["schema"],
        connect_timeout=10,
        **kwargs,
    )


def columns(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, str, int | None, bool]]:
    return [
        (name, "varchar" if kind == "character varying" else kind, length, nullable == "YES")
        for name, kind, length, nullable in conn.execute(
            "select column_name, data_type, character_maximum_length, is_nullable from information_schema.columns"
            " where table_schema = 'public' and table_name = %s order by ordinal_position",
            (table,),
        )
    ]


def primary_key(conn: psycopg.Connection[Any], table: str) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid"
            " and a.attnum = any(i.indkey) where i.indrelid = %s::regclass and i.indisprimary",
            (f"public.{table}",),
        )
    ]


def resolve_providers(config: dict[str, str]) -> dict[str, str]:
    """``${env:NAME}`` in a connector config, read from the connect service's environment as the
    worker's EnvVarConfigProvider reads its own."""
    env = stack.environment("connect")
    return {key: re.sub(r"\$\{env:(\w+)\}", lambda m: env[m.group(1)], value) for key, value in config.items()}


def read_topic(
    broker: KafkaBroker,
    topic: str,
    done: Callable[[list[Any]], bool],
    timeout: float = 120,
    alive: Callable[[], None] = lambda: None,
) -> list[Any]:
    """The JSON values of ``topic`` from its beginning, read until ``done(values)``; ``alive()``
    raises, between polls, when what writes the topic has failed."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    values: list[Any] = []
    try:
        wait_until(lambda: topic in consumer.topics(), timeout, f"topic {topic}", 0.1)
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + timeout
        while not done(values):
            assert time.monotonic() < deadline, f"{topic}: {len(values)} records after {timeout}s"
            alive()
            for batch in consumer.poll(timeout_ms=200).values():
                values += [None if record.value is None else json.loads(record.value) for record in batch]
    finally:
        consumer.close()
    return values


def keys_read(values: list[Any], op: str = "r") -> set[Any]:
    return {v["after"]["id"] for v in values if v and v["op"] == op}


def signal_snapshot(server: PostgresServer, signal_id: str, tables: list[str]) -> None:
    """An incremental snapshot through the signal table, written as the capturing role."""
    data = json.dumps({"data-collections": tables, "type": "incremental"})
    with connect_as(server, "pg_shop", autocommit=True) as conn:
        conn.execute("insert into debezium_signal values (%s, 'execute-snapshot', %s)", (signal_id, data))


def running(connect: ConnectClient, name: str) -> Callable[[], None]:
    """A check that fails as soon as the connector or one of its tasks has failed."""

    def check() -> None:
        failures = connect.status(name).failures
        assert not failures, failures

    return check


def slot_active(server: PostgresServer, slot: str) -> bool:
    with server.connect() as conn:
        row = conn.execute("select active from pg_replication_slots where slot_name = %s", (slot,)).fetchone()
    return bool(row and row[0])


def connector_config(name: str, **overrides: str) -> tuple[str, dict[str, str]]:
    data = json.loads((stack.DOCKER / "connect" / name).read_text())
    return data["name"], {**resolve_providers(data["config"]), **overrides}
