"""The map from Airflow's ``postgres`` connection to the engine's PostgreSQL configuration."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.hooks.source_config import POSTGRES, lineage_namespace, source_config

PG = "io.debezium.connector.postgresql.PostgresConnector"


def test_fields_and_extras_become_debeziums_keys_and_the_password_stays_apart() -> None:
    source = source_config(
        "pg",
        conn_type="postgres",
        host="db.internal",
        port=5433,
        login="cdc",
        password="s3cret-pw",
        schema="shop",
        extra='{"sslmode": "require", "sslpassword": "other-secret", "cursor": "named"}',
    )
    assert source.mapping is POSTGRES
    assert source.properties == {
        "connector.class": PG,
        "database.hostname": "db.internal",
        "database.port": 5433,
        "database.user": "cdc",
        "database.dbname": "shop",
        "database.sslmode": "require",
    }
    assert source.environment() == {"PGPASSWORD": "s3cret-pw"}  # libpq reads it: a detached instance's way
    assert source.with_secret({"a": 1}) == {"a": 1, "database.password": "s3cret-pw"}
    assert "s3cret-pw" not in repr(source) and "other-secret" not in repr(source)


def test_what_the_connection_leaves_out_is_left_to_the_config_file() -> None:
    source = source_config("pg", conn_type="postgresql", host="db", extra={})
    assert source.properties == {"connector.class": PG, "database.hostname": "db"}
    assert source.environment() == {} and source.with_secret({}) == {}


def test_a_connection_without_a_host_names_the_field() -> None:
    with pytest.raises(ConfigError) as missing:
        source_config("pg", conn_type="postgres", login="cdc")
    assert [(p.key, p.fix) for p in missing.value.problems] == [("pg.host", "set the connection's host")]


def test_tls_extras_become_debeziums_database_ssl_keys() -> None:
    source = source_config(
        "pg",
        conn_type="postgres",
        host="db",
        extra={"sslmode": "verify-full", "sslrootcert": "/ca.pem", "sslcert": "/cdc.crt", "sslkey": "/cdc.key"},
    )
    assert source.properties == {
        "connector.class": PG,
        "database.hostname": "db",
        "database.sslmode": "verify-full",
        "database.sslrootcert": "/ca.pem",
        "database.sslcert": "/cdc.crt",
        "database.sslkey": "/cdc.key",
    }


def test_lineage_knows_the_source_by_any_of_its_connector_names() -> None:
    for name in ("postgres", "postgresql", PG, "airflow_cdc.engine.sources.postgres.connector:PostgresConnector"):
        config = {"connector.class": name, "database.hostname": "db", "database.dbname": "shop"}
        assert lineage_namespace(config) == ("postgres://db:5432", "shop"), name
    assert lineage_namespace({"connector.class": "mariadb", "database.include.list": "shop"}) == (
        "mysql://localhost:3306",
        "shop",
    )
