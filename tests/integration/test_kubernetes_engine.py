"""The engine's pod of deploy/kubernetes/engine.yaml, without a cluster: what the kubelet would
give the container - the ConfigMap's file, the Secret's key as a file (api-token) and as an
environment variable (the database password), a kubernetes.io/tls Secret's tls.crt and tls.key -
laid out in directories, and the image's ENTRYPOINT with the Deployment's args run on them.
Only the database's and Kafka's addresses and the mount points are pointed at the test's. The
engine streams a row into Kafka, answers over HTTPS with the Secret's token (and refuses
another), and stops its engine through the API."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
import yaml
from kafka import KafkaConsumer

from airflow_cdc.engine.errors import ApiError
from airflow_cdc.engine.server.client import EngineClient, tls_context
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.local.tls import CertificateAuthority
from tests.unit.deploy import manifests
from tests.unit.docker import stack

pytestmark = pytest.mark.integration
TOKEN, PASSWORD_ENV = "k8s-secret-token", "CDC_DATABASE_PASSWORD"


def test_the_engine_pod_serves_the_configmap_with_its_secrets(
    pg_server: PostgresServer, pg_database: str, kafka_broker: KafkaBroker, topic_prefix: str, tmp_path: Path
) -> None:
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table orders (id int primary key, status text)")
        conn.execute("create table customers (id int primary key, name text)")
        conn.execute("create table debezium_signal (id varchar(42) primary key, type varchar(32), data varchar(2048))")
        conn.execute("create publication dbz_publication for table orders, customers, debezium_signal")
    # The pod's mounts, as directories of this test.
    where = {m.mount_path: tmp_path / m.mount_path.strip("/").replace("/", "_") for m in manifests.mounts()}
    for directory in where.values():
        directory.mkdir()
    secret_dir = next(where[m.mount_path] for m in manifests.mounts() if m.volume.get("secret", {}).get("items"))
    (secret_dir / "api-token").write_text(TOKEN)
    tls_dir = next(
        where[m.mount_path]
        for m in manifests.mounts()
        if m.volume.get("secret", {}).get("secretName", "").endswith("-tls")
    )
    ca = CertificateAuthority(tmp_path / "ca")
    issued = ca.issue("engine", ["localhost"])
    (tls_dir / "tls.crt").write_bytes(issued.cert.read_bytes())
    (tls_dir / "tls.key").write_bytes(issued.key.read_bytes())

    text = manifests.config_text()
    paths = re.compile("|".join(re.escape(p) + r"(?=[/:])" for p in sorted(where, key=len, reverse=True)))
    text = paths.sub(lambda m: str(where[m.group(0)]), text)  # in one pass: /tmp is a mount too
    config = yaml.safe_load(text)
    config.update(
        {
            "database.hostname": pg_server.host,
            "database.port": pg_server.port,
            "database.user": pg_server.user,
            "database.dbname": pg_database,
            "slot.name": f"slot_{pg_database}",
            "sink.kafka.producer.bootstrap.servers": kafka_broker.bootstrap_servers,
            "topic.prefix": topic_prefix,
            "api.host": "127.0.0.1",  # the pod's 0.0.0.0, kept to this machine
            "api.port": 0,
        }
    )
    path_in_pod, key = manifests.config_path()
    config_file = tmp_path / key
    config_file.write_text(yaml.safe_dump(config))
    args = [str(config_file) if a == path_in_pod else a for a in manifests.container()["args"]]
    entrypoint = next(
        i.arguments for i in stack.instructions(stack.DOCKER / "engine" / "Dockerfile") if i.keyword == "ENTRYPOINT"
    )
    command = [str(Path(sys.executable).parent / yaml.safe_load(entrypoint)[0]), *yaml.safe_load(entrypoint)[1:], *args]
    [env] = [e for e in manifests.container()["env"] if e["name"] == PASSWORD_ENV]
    log = open(tmp_path / "engine.log", "ab")  # noqa: SIM115 - the child writes to it
    process = subprocess.Popen(
        command, env={**os.environ, env["name"]: pg_server.password or ""}, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        state = Path(config["state.dir"])
        wait_until(lambda: process.poll() is not None or (read_status(state) or {}).get("pid"), 60, "the pod up")
        assert process.poll() is None, (tmp_path / "engine.log").read_text()
        port = urlsplit(str(read_status(state)["api"])).port  # type: ignore[index]
        url, tls = f"https://localhost:{port}", tls_context(str(ca.cert))
        with EngineClient(url, "not-the-token", tls=tls) as stranger, pytest.raises(ApiError) as refused:
            stranger.status()
        assert refused.value.status == 401
        with EngineClient(url, TOKEN, tls=tls) as client:
            wait_until(lambda: client.status().phase == "streaming", 120, "streaming")
            with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
                conn.execute("insert into orders values (1, 'open')")
            consumer = KafkaConsumer(
                f"{topic_prefix}.public.orders",
                bootstrap_servers=kafka_broker.bootstrap_servers,
                auto_offset_reset="earliest",
                consumer_timeout_ms=1000,
            )
            try:
                values = wait_until(lambda: [json.loads(r.value) for r in consumer if r.value], 60, "the row in Kafka")
            finally:
                consumer.close()
            assert (
                values[0]["payload"]["after"] == {"id": 1, "status": "open"}
                if "payload" in values[0]
                else values[0]["after"] == {"id": 1, "status": "open"}
            )
            client.stop()
            wait_until(lambda: client.status().state == "STOPPED", 60, "the engine stopped")
    finally:
        process.send_signal(signal.SIGTERM)  # as the kubelet does, then waits the grace period
        assert process.wait(manifests.pod()["terminationGracePeriodSeconds"]) == 0
