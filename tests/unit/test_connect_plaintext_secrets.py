"""Starting a connector on Kafka Connect warns when a secret would reach Connect's config topic as
plain text (ADR 0017): the source connection's password added to a config file that gives none,
or a password written in the file, is named with the config provider form that keeps it out; a
``${file:...}``, ``${env:...}`` or ``${directory:...}`` reference is not warned about.

The warning is logged before Connect is asked anything, so these start the backend against an
address where nothing listens (the start then fails as unreachable)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_cdc.backends import open_backend
from airflow_cdc.backends.protocol import StartRequest
from airflow_cdc.engine.errors import ApiUnavailableError
from airflow_cdc.hooks.engine_connection import KAFKA_CONNECT, engine_connection
from airflow_cdc.hooks.source_config import SourceConfig, source_config
from airflow_cdc.local.ports import free_port

SECRET = "s3cret-Value"
PG = {
    "name": "shop",
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "topic.prefix": "shop",
    "table.include.list": "public.orders",
}


def start(tmp_path: Path, config: dict[str, Any], source: SourceConfig | None, caplog: pytest.LogCaptureFixture) -> str:
    """What ``start`` logged at WARNING for this config file (and source connection)."""
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump(config))
    settings = engine_connection(
        "cdc_shop",
        conn_type=KAFKA_CONNECT,
        host=f"http://127.0.0.1:{free_port()}",
        extra={"config_path": str(path), "bootstrap_servers": "127.0.0.1:9"},
    )
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="airflow_cdc.backends.connect"),
        open_backend(settings, "cdc_shop", lambda: None) as backend,
        pytest.raises(ApiUnavailableError),
    ):
        backend.start(StartRequest(source=source, timeout=1))
    return caplog.text


def pg_source(password: str | None = SECRET) -> SourceConfig:
    return source_config(
        "pg_shop", conn_type="postgres", host="db", port=5432, login="cdc", password=password, schema="shop"
    )


def test_the_source_connections_password_added_to_the_connector_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logged = start(tmp_path, PG, pg_source(), caplog)
    assert "connector 'shop': database.password go to Kafka Connect as plain text" in logged
    assert "its config topic (config.storage.topic)" in logged
    # The fix, in the exact form: the file's line and the worker's settings.
    assert "database.password: ${file:/etc/kafka-connect/secrets/shop.properties:database.password}" in logged
    assert "config.providers=file" in logged
    assert "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider" in logged
    assert SECRET not in logged


def test_every_secret_written_in_the_file_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'
    config = {**PG, "database.password": SECRET, "schema.history.internal.producer.sasl.jaas.config": jaas}
    logged = start(tmp_path, config, None, caplog)  # no source connection: the file's password stays
    assert "database.password, schema.history.internal.producer.sasl.jaas.config go to Kafka Connect" in logged
    assert SECRET not in logged


@pytest.mark.parametrize(
    "reference",
    [
        "${file:/etc/kafka-connect/secrets/shop.properties:password}",
        "${env:CDC_PG_PASSWORD}",
        "${directory:/run/secrets:pg-password}",
    ],
)
def test_a_config_provider_reference_is_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reference: str
) -> None:
    # The file's reference wins over the source connection's password, which is not sent.
    assert start(tmp_path, {**PG, "database.password": reference}, pg_source(), caplog) == ""


def test_no_secret_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert start(tmp_path, PG, pg_source(password=None), caplog) == ""
