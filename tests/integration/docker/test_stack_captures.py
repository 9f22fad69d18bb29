"""The docker stack's captures on the test servers: the engine service's instance (docker/cdc/
shop.yaml) served as compose.yaml's engine service serves it - its certificate made by the same
command, its secrets from the service's environment, its API over HTTPS with the connection's
token -, and the Debezium connectors of docker/connect on the test Connect worker. Only host
names are pointed at the test servers, topics at a prefix of the test's own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from airflow_cdc.engine.server.client import EngineClient, tls_context
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.kafka_connect.client import validation_errors
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from tests.integration.docker.stack_support import (
    connector_config,
    keys_read,
    read_topic,
    running,
    signal_snapshot,
    slot_active,
)
from tests.unit.docker import stack

pytestmark = pytest.mark.integration


ENGINE_CONFIG, ENGINE_TLS = "/etc/airflow-cdc/engine.yaml", "/etc/airflow-cdc/tls"


def serve_like_the_stack(config_path: Path, tls_dir: Path) -> subprocess.Popen[bytes]:
    """compose.yaml's engine service command, its container paths pointed at the test's, in the
    service's environment (this venv's ``python`` and ``airflow-cdc`` as the image's)."""
    service = stack.services()["engine"]
    assert service["entrypoint"] == ["sh", "-c"]
    [command] = service["command"]
    command = command.replace(ENGINE_TLS, str(tls_dir)).replace(ENGINE_CONFIG, str(config_path))
    env = {**os.environ, **stack.environment("engine"), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    log = open(config_path.with_suffix(".log"), "ab")  # noqa: SIM115 - the child writes to it
    return subprocess.Popen(["sh", "-c", command], env=env, stdout=log, stderr=subprocess.STDOUT)


def test_the_engine_service_captures_the_stacks_database_into_kafka(
    stack_postgres: PostgresServer, kafka_broker: KafkaBroker, topic_prefix: str, tmp_path: Path
) -> None:
    """docker/cdc/shop.yaml served as the engine service serves it: the service makes its
    certificate, reads its password and token from its environment, and answers over HTTPS the
    cdc_shop connection's token, its certificate checked with the CA it made. It streams, runs an
    incremental snapshot signalled through the signal table, delivers it to Kafka, and its
    engine stops through the API dropping its slot, the process staying until SIGTERM."""
    conn = stack.connections()["cdc_shop"]
    config = load_config_file(stack.mounted_file("engine", ENGINE_CONFIG))
    tls_dir = tmp_path / "tls"
    config.update(
        {
            "database.hostname": stack_postgres.host,
            "database.port": stack_postgres.port,
            "state.dir": str(tmp_path / "state"),
            "sink.kafka.producer.bootstrap.servers": kafka_broker.bootstrap_servers,
            "topic.prefix": topic_prefix,
            "api.host": "127.0.0.1",  # the container's 0.0.0.0, kept to this machine
            "api.port": 0,
            "api.ssl.certfile": config["api.ssl.certfile"].replace(ENGINE_TLS, str(tls_dir)),
            "api.ssl.keyfile": config["api.ssl.keyfile"].replace(ENGINE_TLS, str(tls_dir)),
        }
    )
    path = tmp_path / "engine.yaml"
    path.write_text(yaml.safe_dump(config))
    process = serve_like_the_stack(path, tls_dir)
    try:
        state = tmp_path / "state"
        wait_until(lambda: process.poll() is not None or (read_status(state) or {}).get("pid"), 60, "the service up")
        assert process.poll() is None, path.with_suffix(".log").read_text()
        port = urlsplit(str(read_status(state)["api"])).port  # type: ignore[index]
        ca = f"{tls_dir}/{Path(conn['extra']['ssl_ca']).name}"
        with EngineClient(f"https://localhost:{port}", conn["password"], tls=tls_context(ca)) as client:
            wait_until(lambda: client.status().phase == "streaming", 120, "streaming")
            signal_snapshot(stack_postgres, "docker-stack-1", ["public.orders", "public.customers"])
            seen: list[Any] = []

            def finished() -> bool:
                page = client.notifications(seen[-1].cursor if seen else None)
                seen.append(page)
                types = {n.type for p in seen for n in p.notifications if n.id == "docker-stack-1"}
                assert "ABORTED" not in types, types
                return "COMPLETED" in types

            wait_until(finished, 180, "the incremental snapshot's COMPLETED notification", 0.2)
            with stack_postgres.connect("shop") as db:
                db.execute("update customers set name = 'renamed' where id = 1")
            orders = read_topic(kafka_broker, f"{topic_prefix}.public.orders", lambda v: len(keys_read(v)) >= 5000)
            assert keys_read(orders) == set(range(1, 5001))
            customers = read_topic(kafka_broker, f"{topic_prefix}.public.customers", lambda v: bool(keys_read(v, "u")))
            assert keys_read(customers) == set(range(1, 101)) and keys_read(customers, "u") == {1}
            client.stop()
            wait_until(lambda: client.status().state == "STOPPED", 60, "the engine stopped")
        with stack_postgres.connect() as db:
            slots = db.execute("select count(*) from pg_replication_slots where slot_name = %s", (config["slot.name"],))
            assert slots.fetchone() == (0,)  # slot.drop.on.stop, for example_cdc_teardown
        assert process.poll() is None  # the service stays, its engine stopped
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, path.with_suffix(".log").read_text()


def test_the_debezium_postgres_connector_captures_the_stacks_database(
    stack_postgres: PostgresServer, kafka_broker: KafkaBroker, connect: ConnectClient, topic_prefix: str
) -> None:
    """connect/shop-postgres.json on the test Connect worker: valid, runs as the cdc role, and an
    incremental snapshot signalled through the signal table (Debezium writes its watermarks
    there) delivers every customer."""
    name, config = connector_config(
        "shop-postgres.json",
        **{
            "database.hostname": stack_postgres.host,
            "database.port": str(stack_postgres.port),
            "topic.prefix": topic_prefix,
        },
    )
    answer = connect.validate(config["connector.class"], config)
    assert answer["error_count"] == 0, validation_errors(answer)
    name = f"{topic_prefix}-{name}"
    connect.create(name, config)
    connect.wait_running(name, timeout=120)
    # The signal is read from the stream: write it once the connector's slot streams.
    wait_until(lambda: slot_active(stack_postgres, config["slot.name"]), 120, "Debezium's slot streaming", 0.1)
    signal_snapshot(stack_postgres, "docker-dbz-1", ["public.customers"])
    customers = read_topic(
        kafka_broker,
        f"{topic_prefix}.public.customers",
        lambda v: len(keys_read(v)) >= 100,
        alive=running(connect, name),
    )
    assert keys_read(customers) == set(range(1, 101))


def test_the_debezium_mariadb_connector_captures_the_stacks_database(
    stack_mariadb: MariaDBServer, kafka_broker: KafkaBroker, connect: ConnectClient, topic_prefix: str
) -> None:
    """connect/shop-mariadb.json on the test Connect worker: valid, and its initial snapshot, run
    as the cdc user, delivers every customer and order."""
    name, config = connector_config(
        "shop-mariadb.json",
        **{
            "database.hostname": stack_mariadb.host,
            "database.port": str(stack_mariadb.port),
            "topic.prefix": topic_prefix,
            "schema.history.internal.kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
            "schema.history.internal.kafka.topic": f"{topic_prefix}.schema-history",
        },
    )
    answer = connect.validate(config["connector.class"], config)
    assert answer["error_count"] == 0, validation_errors(answer)
    name = f"{topic_prefix}-{name}"
    connect.create(name, config)
    connect.wait_running(name, timeout=120)
    database = config["database.include.list"]
    alive = running(connect, name)
    orders = read_topic(
        kafka_broker, f"{topic_prefix}.{database}.orders", lambda v: len(keys_read(v)) >= 5000, alive=alive
    )
    assert keys_read(orders) == set(range(1, 5001))
    # Then it follows the binlog (as a replica: REPLICATION SLAVE).
    with stack_mariadb.connect(database=database) as conn, conn.cursor() as cur:
        cur.execute("update customers set name = 'renamed' where id = 1")
    customers = read_topic(
        kafka_broker, f"{topic_prefix}.{database}.customers", lambda v: bool(keys_read(v, "u")), alive=alive
    )
    assert keys_read(customers) == set(range(1, 101)) and keys_read(customers, "u") == {1}
