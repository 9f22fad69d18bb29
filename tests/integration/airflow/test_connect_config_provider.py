"""The source password kept out of Kafka Connect's config topic (ADR 0017): the config file of a
``kafka_connect`` connection names it as a Connect config provider reference,
``database.password: ${file:/path/secret.properties:password}``, and the worker (its
``config.providers=file``, as ``airflow_cdc.local.connect`` and ``docker/connect`` configure it)
reads the file when it starts the task. Against the real Connect worker with Debezium's
PostgreSQL connector and a role that must give its password: the connector captures (so the
worker resolved the reference), and Connect's stored configuration holds the reference, not the
password - even though the start task was given the source connection, whose password would
otherwise be sent."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.operators.engine import CdcStartEngineOperator
from tests.integration.airflow.conftest import CDC_CONN, PG_CONN, Source, write_config
from tests.integration.airflow.support import task_context

pytestmark = pytest.mark.integration


@dataclass
class Connector:
    name: str
    reference: str  # what the config file gives as database.password
    topic: str  # where the orders table's changes go


@pytest.fixture
def connector(
    tmp_path: Path, source: Source, connect_worker: Any, kafka_broker: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Connector]:
    """``cdc_test`` (kafka_connect) whose config file takes the password from a properties file
    on the worker's machine; ``pg_test`` the source with its password. The connector and its
    slot are gone afterwards."""
    name = f"provider-{source.database[-8:]}"
    slot = f"slot_p_{source.database}"
    prefix = f"prov{source.database[-8:]}"
    secrets = tmp_path / "secret.properties"
    secrets.write_text(f"password={source.password}\n")
    secrets.chmod(0o600)
    reference = f"${{file:{secrets}:password}}"
    config = tmp_path / "shop.yaml"
    write_config(
        config,
        {
            "name": name,
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "topic.prefix": prefix,
            "database.password": reference,
            "slot.name": slot,
            "publication.name": f"pub_p_{source.database}",
            "table.include.list": "public.orders",
            "signal.data.collection": "public.debezium_signal",
            "snapshot.mode": "no_data",
        },
    )
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CDC_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "kafka_connect",
                "host": connect_worker.url,
                "extra": {
                    "config_path": str(config),
                    "bootstrap_servers": kafka_broker.bootstrap_servers,
                    "source_conn_id": PG_CONN,
                },
            }
        ),
    )
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{PG_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": source.server.host,
                "port": source.server.port,
                "login": source.user,
                "password": source.password,
                "schema": source.database,
            }
        ),
    )
    client = ConnectClient(connect_worker.url)
    try:
        yield Connector(name, reference, f"{prefix}.public.orders")
    finally:
        with contextlib.suppress(Exception):
            client.delete(name)
        client.close()  # its slot goes with the test's database (pg_database drops both)


def changed_ids(bootstrap: str, topic: str) -> set[int]:
    """The ``after.id`` of every change on the topic so far."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=2000)
    try:
        return {json.loads(m.value)["after"]["id"] for m in consumer if m.value and json.loads(m.value).get("after")}
    finally:
        consumer.close()


def test_a_file_reference_reaches_debezium_and_connect_keeps_only_the_reference(
    connector: Connector, source: Source, connect_worker: Any, kafka_broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_cdc.backends.connect")
    started = CdcStartEngineOperator(
        task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, timeout=120
    ).execute(task_context())
    # Streaming: Debezium logged in with the password the worker read from the file.
    assert (started["name"], started["started"], started["phase"]) == (connector.name, True, "streaming")

    with ConnectClient(connect_worker.url) as client:
        stored = client.config(connector.name)
    assert stored["database.password"] == connector.reference
    assert source.password not in json.dumps(stored)
    assert "as plain text" not in caplog.text  # nothing to warn about

    with source.connect() as conn:
        conn.execute("insert into orders values (100, 'new', date '2026-02-01')")
    wait_until(lambda: 100 in changed_ids(kafka_broker.bootstrap_servers, connector.topic), 60, "the change captured")
