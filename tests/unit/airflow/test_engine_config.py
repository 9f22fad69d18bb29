"""Assembling an instance's configuration: config file < source connection < operator config;
secrets and the instance's identity cannot come from a DAG; lineage names."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.hooks.source_config import engine_config, lineage_namespace, redact, source_config
from airflow_cdc.operators.engine import config_differences

FILE = {
    "name": "shop",
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "old-host",
    "database.password": "file-password",
    "topic.prefix": "shop",
    "snapshot.mode": "initial",
}


def test_precedence_file_then_connection_then_operator() -> None:
    source = source_config("pg", conn_type="postgres", host="db", port=5432, login="cdc", password="pw", schema="shop")
    merged = engine_config(FILE, source=source, overrides={"snapshot.mode": "no_data", "database.port": 6432})
    assert merged["database.hostname"] == "db" and merged["database.user"] == "cdc"
    assert merged["snapshot.mode"] == "no_data" and merged["database.port"] == 6432
    assert "database.password" not in merged  # the connection's password wins, through the environment
    assert engine_config(FILE) == FILE  # without a source connection the file is taken as it is


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("database.password", "is a secret"),
        ("sink.kafka.producer.sasl.jaas.config", "is a secret"),
        ("api.token", "is a secret"),
        ("name", "names the instance"),
        ("state.dir", "names the instance"),
    ],
)
def test_a_dag_cannot_set_secrets_or_the_instance(key: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        engine_config(FILE, overrides={key: "x"})
    assert refused.value.problems[0].key == key and says in refused.value.problems[0].message


def test_redact_and_lineage_namespace() -> None:
    assert redact(FILE)["database.password"] == "***" and redact(FILE)["database.hostname"] == "old-host"
    assert lineage_namespace(FILE | {"database.dbname": "shop"}) == ("postgres://old-host:5432", "shop")
    assert lineage_namespace({"connector.class": "synthetic"}) is None


def test_config_differences_compare_as_a_config_file_reads_and_never_show_secrets() -> None:
    requested = {
        "name": "shop",
        "state.dir": "/var/lib/cdc/shop",
        "table.include.list": ["public.a", "public.b"],
        "slot.drop.on.stop": True,
        "database.port": 5432,
        "database.password": "pw-1",
    }
    running = {
        "name": "shop",
        "state.dir": "/var/lib/cdc/shop",
        "offset.storage.file.filename": "/var/lib/cdc/shop/offsets.json",
        "sink.changelog.dir": "/var/lib/cdc/shop/changelog",
        "table.include.list": "public.a,public.b",
        "slot.drop.on.stop": "true",
        "database.port": "5432",
        "api.token": "tok",
    }
    assert config_differences(requested, running) == []
    assert config_differences({**requested, "database.port": 5433}, running) == [
        "database.port: running '5432', asked '5433'"
    ]
