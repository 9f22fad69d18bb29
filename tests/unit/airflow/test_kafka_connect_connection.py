"""A ``kafka_connect`` connection drives a Debezium connector through the same hook and
operators as a ``cdc_engine`` one (ADR 0017): what the connection's fields mean, the client the
hook hands out, where a DAG's ``api`` signal goes, and the Spark master from a ``spark``
connection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.hooks.engine_connection import KAFKA_CONNECT, engine_connection
from airflow_cdc.hooks.signal import CdcSignalHook
from airflow_cdc.kafka_connect.backend import ConnectorEngineClient
from airflow_cdc.operators.spark import CdcSparkApplyOperator


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump({"name": "shop", "connector.class": "postgres", "topic.prefix": "shop"}))
    return path


def test_the_connection_names_connects_url_the_connector_and_where_notifications_are(config_file: Path) -> None:
    settings = engine_connection(
        "cdc_shop",
        conn_type=KAFKA_CONNECT,
        host="connect",
        port=8083,
        login="admin",
        password="secret",
        extra={"config_path": str(config_file), "bootstrap_servers": "kafka:9092", "source_conn_id": "pg_shop"},
    )
    assert settings.kafka_connect and settings.url == "http://connect:8083"
    assert (settings.instance, settings.login, settings.token) == ("shop", "admin", "secret")  # name from the file
    assert (settings.bootstrap_servers, settings.source_conn_id, settings.timeout) == ("kafka:9092", "pg_shop", 30.0)
    assert "secret" not in repr(settings)
    named = engine_connection("c", conn_type=KAFKA_CONNECT, host="http://connect:8083", extra={"connector": "other"})
    assert named.instance == "other" and named.config_path is None


def test_the_kafka_extra_gives_the_notification_readers_their_security_settings(
    monkeypatch: pytest.MonkeyPatch, config_file: Path
) -> None:
    security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "cdc"}
    connect_connection(
        monkeypatch, config_file, bootstrap_servers="kafka:9093", kafka={**security, "sasl.password": "pw"}
    )
    with CdcEngineHook("cdc_shop").get_client() as client:
        assert client.kafka_options == {
            "bootstrap_servers": "kafka:9093",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "cdc",
            "sasl_plain_password": "pw",
        }
    settings = engine_connection(
        "c", conn_type=KAFKA_CONNECT, host="connect", extra={"connector": "x", "kafka": security}
    )
    assert "sasl" not in repr(settings)
    with pytest.raises(ConfigError, match=r"extra\.kafka"):
        engine_connection("c", conn_type=KAFKA_CONNECT, host="connect", extra={"connector": "x", "kafka": [1]})


def test_a_connection_without_host_or_connector_says_what_to_set() -> None:
    with pytest.raises(ConfigError, match="REST URL"):
        engine_connection("c", conn_type=KAFKA_CONNECT, extra={"connector": "shop"})
    with pytest.raises(ConfigError, match="names no connector"):
        engine_connection("c", conn_type=KAFKA_CONNECT, host="http://connect:8083")


def connect_connection(monkeypatch: pytest.MonkeyPatch, config_file: Path, **extra: Any) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_SHOP",
        json.dumps(
            {
                "conn_type": "kafka_connect",
                "host": "http://connect:8083",
                "extra": {"config_path": str(config_file), **extra},
            }
        ),
    )


def test_the_hook_hands_out_the_connectors_client(monkeypatch: pytest.MonkeyPatch, config_file: Path) -> None:
    connect_connection(monkeypatch, config_file, bootstrap_servers="kafka:9092")
    hook = CdcEngineHook("cdc_shop")
    with hook.get_client() as client:
        assert isinstance(client, ConnectorEngineClient)
        assert (client.url, client.name, client.kafka_options["bootstrap_servers"]) == (
            "http://connect:8083",
            "shop",
            "kafka:9092",
        )
        assert client.source_position is None  # no source_conn_id: Debezium's "current" is unknown
    with hook.get_backend() as backend:  # what a connector on Connect cannot do, declared
        assert not backend.capabilities.api_signals and not backend.capabilities.current_position
        assert not backend.capabilities.bounded_capture
        assert backend.status_url() == "http://connect:8083/connectors/shop/status"


def test_an_api_signal_goes_into_the_signal_table_over_the_source_connection(
    monkeypatch: pytest.MonkeyPatch, config_file: Path
) -> None:
    running = {"name": "shop", "signal.enabled.channels": "source", "signal.data.collection": "public.sig"}
    monkeypatch.setattr(CdcEngineHook, "running_config", lambda self: running)
    connect_connection(monkeypatch, config_file, source_conn_id="pg_shop")
    hook = CdcSignalHook("cdc_shop")
    assert hook._connect_channel() == "source" and hook.source_conn_id == "pg_shop"

    connect_connection(monkeypatch, config_file)  # no source connection, no Kafka channel
    with pytest.raises(ConfigError, match=r"no API signal channel.*source_conn_id"):
        CdcSignalHook("cdc_shop")._connect_channel()
    running.update({"signal.enabled.channels": "source,kafka", "signal.kafka.topic": "shop.signals"})
    assert CdcSignalHook("cdc_shop")._connect_channel() == "kafka"


def test_the_spark_master_comes_from_a_spark_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    def operator(conn: dict[str, Any]) -> CdcSparkApplyOperator:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_CDC", json.dumps({"conn_type": "spark", **conn}))
        return CdcSparkApplyOperator(task_id="apply", target_url="delta:/tmp/x", spark_conn_id="spark_cdc")

    assert operator({"host": "spark://master", "port": 7077}).connection_master() == "spark://master:7077"
    assert operator({"host": "local[2]"}).connection_master() == "local[2]"
    assert operator({"host": "yarn"}).connection_master() == "yarn"
    with pytest.raises(AirflowFailException, match=r"spark_cdc.*not a Spark master URL"):
        operator({"host": "http://master:8080"}).connection_master()


def test_the_cdc_page_and_status_find_kafka_connect_connections(
    monkeypatch: pytest.MonkeyPatch, config_file: Path
) -> None:
    from airflow_cdc.ui.instances import client_for, connection_ids

    connect_connection(monkeypatch, config_file, bootstrap_servers="kafka:9092")
    monkeypatch.setenv("AIRFLOW_CONN_PG_ELSEWHERE", json.dumps({"conn_type": "postgres", "host": "db"}))
    assert "cdc_shop" in connection_ids() and "pg_elsewhere" not in connection_ids()
    with client_for("cdc_shop") as client:
        assert isinstance(client.client, ConnectorEngineClient) and client.client.name == "shop"
