"""The map from Airflow's ``mysql`` connection to Debezium's MySQL (and MariaDB) keys."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.hooks.source_config import MYSQL, engine_config, source_config


def test_fields_and_extras_become_debeziums_keys() -> None:
    source = source_config(
        "my",
        conn_type="mysql",
        host="mysql.internal",
        port=3307,
        login="cdc",
        password="my-secret",
        schema="inventory",
        extra={"ssl_mode": "REQUIRED", "charset": "utf8mb4"},
    )
    assert source.mapping is MYSQL
    assert source.properties == {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": "mysql.internal",
        "database.port": 3307,
        "database.user": "cdc",
        "database.include.list": "inventory",  # Debezium's MySQL connector filters databases
        "database.ssl.mode": "required",
    }
    assert source.environment() == {"MYSQL_PWD": "my-secret"}
    assert "my-secret" not in repr(source)


def test_a_mariadb_instance_keeps_its_connector_class() -> None:
    source = source_config("my", conn_type="mysql", host="db")
    merged = engine_config({"connector.class": "io.debezium.connector.mariadb.MariaDbConnector"}, source=source)
    assert merged["connector.class"] == "io.debezium.connector.mariadb.MariaDbConnector"


def test_a_mysql_connection_for_a_postgres_instance_is_refused() -> None:
    source = source_config("my", conn_type="mysql", host="db")
    with pytest.raises(ConfigError, match=r"is a mysql connection; the instance's connector\.class is"):
        engine_config({"connector.class": "io.debezium.connector.postgresql.PostgresConnector"}, source=source)


def test_other_connection_types_are_named() -> None:
    with pytest.raises(ConfigError, match="a source connection is one of: mysql, postgres"):
        source_config("s3", conn_type="aws", host="x")


def test_a_short_connector_name_is_checked_against_the_connection_too() -> None:
    source = source_config("my", conn_type="mysql", host="db")
    with pytest.raises(ConfigError, match=r"is a mysql connection; the instance's connector\.class is postgres"):
        engine_config({"connector.class": "postgres"}, source=source)
    assert engine_config({"connector.class": "mariadb"}, source=source)["connector.class"] == "mariadb"
