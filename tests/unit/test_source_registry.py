"""The connector registry: every name of a connector resolves to it and to its codec, the names
the engine took before stay, and what outside tools need of a source database is the source's -
which database a signal table's name means, libpq's parameters with the TLS settings."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.engine.connector import (
    CONNECTOR_CLASSES,
    DEBEZIUM_CONNECTORS,
    KINDS,
    load_connector_class,
    source_database,
    source_kind,
)
from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.sources.database import check_signal_table
from airflow_cdc.engine.sources.mysql.database import MARIADB_DATABASE, MYSQL_DATABASE
from airflow_cdc.engine.sources.postgres.database import POSTGRES_DATABASE, connect_params
from airflow_cdc.kafka_connect.source_position import position_reader
from airflow_cdc.local.connect import REQUIRED_PLUGINS


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_every_name_of_a_connector_resolves_to_it_and_its_codec(kind: Any) -> None:
    connector = load_connector_class(kind.name)
    assert kind.codec() is connector.positions
    for name in kind.names:
        assert load_connector_class(name) is connector, name
        assert source_kind(name) is kind and source_kind(name.upper()) is kind, name


def test_the_connector_class_names_the_engine_took_before_stay() -> None:
    pg, my, maria = (
        "airflow_cdc.engine.sources.postgres.connector:PostgresConnector",
        "airflow_cdc.engine.sources.mysql.connector:MySqlConnector",
        "airflow_cdc.engine.sources.mysql.connector:MariaDbConnector",
    )
    before = {
        "synthetic": "airflow_cdc.engine.sources.synthetic:SyntheticConnector",
        "postgres": pg,
        "postgresql": pg,
        "io.debezium.connector.postgresql.PostgresConnector": pg,
        "mysql": my,
        "mariadb": maria,
        "io.debezium.connector.mysql.MySqlConnector": my,
        "io.debezium.connector.mariadb.MariaDbConnector": maria,
    }
    assert before == CONNECTOR_CLASSES
    assert (
        REQUIRED_PLUGINS
        == DEBEZIUM_CONNECTORS
        == (
            "io.debezium.connector.postgresql.PostgresConnector",
            "io.debezium.connector.mysql.MySqlConnector",
            "io.debezium.connector.mariadb.MariaDbConnector",
        )
    )


def test_each_database_kind_has_its_database_and_others_none() -> None:
    assert source_database("io.debezium.connector.postgresql.PostgresConnector") is POSTGRES_DATABASE
    assert source_database("mysql") is MYSQL_DATABASE and source_database("MariaDB") is MARIADB_DATABASE
    for other in ("synthetic", "io.debezium.connector.oracle.OracleConnector", "my.plugin:Connector", "", None):
        assert source_database(other) is None, other


@pytest.mark.parametrize("connector_class", ["synthetic", "io.debezium.connector.sqlserver.SqlServerConnector", None])
def test_a_source_without_a_database_has_no_position_reader(connector_class: str | None) -> None:
    with pytest.raises(ConfigError) as refused:
        position_reader({"connector.class": connector_class}, None)
    [problem] = refused.value.problems
    assert problem.key == "connector.class" and "no way to read its database's position" in problem.message
    assert "give the offset sensor a target position" in problem.fix


@pytest.mark.parametrize(
    ("collection", "running", "connection", "target"),
    [
        (
            "public.debezium_signal",
            {"database.dbname": "shop"},
            {"database.dbname": "x"},
            ("shop", "public.debezium_signal"),
        ),
        ("debezium_signal", {}, {"database.dbname": "x"}, ("x", "debezium_signal")),
        ("ops.public.debezium_signal", {"database.names": "shop,ops"}, {}, ("ops", "public.debezium_signal")),
        ("public.debezium_signal", {}, {}, (None, "public.debezium_signal")),
    ],
)
def test_postgres_signal_table_names_a_schema_unless_it_has_three_parts(
    collection: str, running: dict[str, Any], connection: dict[str, Any], target: tuple[str | None, str]
) -> None:
    assert POSTGRES_DATABASE.signal_target(collection, running, connection) == target


@pytest.mark.parametrize(
    ("collection", "running", "connection", "target"),
    [
        ("ops.debezium_signal", {"database.include.list": "shop"}, {}, ("ops", "debezium_signal")),
        ("debezium_signal", {"database.include.list": "shop"}, {}, ("shop", "debezium_signal")),
        (
            "debezium_signal",
            {"database.include.list": "shop,ops"},
            {"database.include.list": "ops"},
            ("ops", "debezium_signal"),
        ),
        ("debezium_signal", {"database.include.list": "shop.*"}, {}, (None, "debezium_signal")),
    ],
)
def test_mysql_signal_table_names_its_database(
    collection: str, running: dict[str, Any], connection: dict[str, Any], target: tuple[str | None, str]
) -> None:
    assert MYSQL_DATABASE.signal_target(collection, running, connection) == target


@pytest.mark.parametrize("name", ["signal; drop table x", "a.b.c.d", "1signal", "public.sig nal", ""])
def test_a_signal_table_name_that_is_more_than_a_name_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="is not a plain table name"):
        check_signal_table(name)


def test_libpq_parameters_carry_debeziums_tls_settings_and_leave_the_rest_to_libpq() -> None:
    config = {
        "database.hostname": "db",
        "database.port": "6432",
        "database.sslmode": "verify-full",
        "database.sslrootcert": "/ca.pem",
        "database.sslcert": "/cdc.crt",
        "database.sslkey": "/cdc.key",
        "database.sslpassword": "key-pw",
    }
    assert connect_params(config, "pw", "shop") == {
        "host": "db",
        "port": 6432,
        "user": None,
        "password": "pw",
        "dbname": "shop",
        "sslmode": "verify-full",
        "sslrootcert": "/ca.pem",
        "sslcert": "/cdc.crt",
        "sslkey": "/cdc.key",
        "sslpassword": "key-pw",
    }
    assert connect_params({}, None, None) == {
        "host": "127.0.0.1",
        "port": 5432,
        "user": None,
        "password": None,
        "dbname": None,
        "sslmode": None,
    }
