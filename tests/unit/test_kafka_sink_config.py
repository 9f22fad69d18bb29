"""The Kafka sink's configuration: choosing the client, and ``sink.kafka.producer.*`` (Java names)
mapped to each library's settings, with every problem named with its fix. No broker needed."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.errors import ConfigError, MissingDependencyError
from airflow_cdc.engine.sinks import KafkaSink, build_sink
from airflow_cdc.engine.sinks import kafka_confluent as confluent
from airflow_cdc.engine.sinks.kafka_python import KafkaPythonClient, producer_settings
from tests.requirements import require_module

BOOTSTRAP = {"sink.kafka.producer.bootstrap.servers": "127.0.0.1:1"}


def producer(**settings: object) -> dict[str, object]:
    return {**BOOTSTRAP, **{f"sink.kafka.producer.{k.replace('_', '.')}": v for k, v in settings.items()}}


def problems(error: pytest.ExceptionInfo[ConfigError]) -> dict[str, str]:
    return {p.key: f"{p.message} / {p.fix}" for p in error.value.problems}


# --- choosing the client --------------------------------------------------------------------


def test_kafka_python_is_chosen_by_sink_kafka_client() -> None:
    # The choice when it is unset (what can be imported): tests/unit/test_kafka_client_choice.py.
    assert isinstance(KafkaSink({"sink.kafka.client": "kafka-python", **BOOTSTRAP}).client, KafkaPythonClient)


@pytest.mark.parametrize("spelling", ["confluent", "Confluent", "confluent-kafka", "librdkafka"])
def test_confluent_is_chosen_by_sink_kafka_client(spelling: str) -> None:
    require_module("confluent_kafka", extra="confluent")
    sink = build_sink({"sink.type": "kafka", "sink.kafka.client": spelling, **BOOTSTRAP})
    assert isinstance(sink, KafkaSink)
    assert isinstance(sink.client, confluent.ConfluentClient)


def test_an_unknown_client_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError) as error:
        KafkaSink({"sink.kafka.client": "pykafka", **BOOTSTRAP})
    assert "kafka-python, confluent" in problems(error)["sink.kafka.client"]


def test_confluent_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confluent, "_MISSING", ImportError("No module named 'confluent_kafka'"))
    with pytest.raises(MissingDependencyError, match=r"airflow-cdc\[confluent\]"):
        KafkaSink({"sink.kafka.client": "confluent", **BOOTSTRAP})


# --- kafka-python ----------------------------------------------------------------------------


def test_kafka_python_settings_take_java_names_and_keep_the_sinks_defaults() -> None:
    kwargs = producer_settings(producer(linger_ms="20", compression_type="gzip", acks="-1"))
    assert kwargs["linger_ms"] == 20
    assert kwargs["compression_type"] == "gzip"
    assert kwargs["acks"] == "all"
    assert kwargs["max_block_ms"] == 10_000


def test_kafka_python_refuses_a_name_it_does_not_know() -> None:
    with pytest.raises(ConfigError) as error:
        producer_settings(producer(**{"queue.buffering.max.kbytes": 1024}))
    assert "sink.kafka.producer.queue.buffering.max.kbytes" in problems(error)


# --- confluent-kafka (librdkafka) -----------------------------------------------------------


@pytest.fixture
def needs_confluent() -> None:
    require_module("confluent_kafka", extra="confluent")


def test_confluent_defaults_are_acks_all_idempotence_and_the_java_key_hash() -> None:
    config = confluent.producer_config(BOOTSTRAP)
    assert config == {
        "bootstrap.servers": "127.0.0.1:1",
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "partitioner": "murmur2_random",
    }


def test_confluent_takes_java_names_as_they_are() -> None:
    config = confluent.producer_config(
        producer(linger_ms="20", compression_type="lz4", delivery_timeout_ms="600000", client_id="cdc")
    )
    assert config["linger.ms"] == "20"
    assert config["compression.type"] == "lz4"
    assert config["delivery.timeout.ms"] == "600000"
    assert config["client.id"] == "cdc"


def test_confluent_renames_the_java_names_librdkafka_spells_differently() -> None:
    config = confluent.producer_config(
        producer(buffer_memory="33554432", max_request_size=2_000_000, send_buffer_bytes="131072")
    )
    assert config["queue.buffering.max.kbytes"] == 32_768
    assert config["message.max.bytes"] == 2_000_000
    assert config["socket.send.buffer.bytes"] == 131_072
    assert "buffer.memory" not in config


def test_confluent_refuses_every_java_only_setting_at_once_with_its_fix() -> None:
    with pytest.raises(ConfigError) as error:
        confluent.producer_config(
            producer(
                max_block_ms=1000,
                **{"sasl.jaas.config": "x", "ssl.truststore.location": "/t.jks", "buffer.memory": "lots"},
            )
        )
    found = problems(error)
    assert set(found) == {
        "sink.kafka.producer.max.block.ms",
        "sink.kafka.producer.sasl.jaas.config",
        "sink.kafka.producer.ssl.truststore.location",
        "sink.kafka.producer.buffer.memory",
    }
    assert "queue.buffering.max.messages" in found["sink.kafka.producer.max.block.ms"]
    assert "sasl.username" in found["sink.kafka.producer.sasl.jaas.config"]
    assert "ssl.ca.location" in found["sink.kafka.producer.ssl.truststore.location"]
    assert "not an integer" in found["sink.kafka.producer.buffer.memory"]


def test_confluent_without_idempotence_needs_one_request_in_flight() -> None:
    with pytest.raises(ConfigError) as error:
        confluent.producer_config(producer(enable_idempotence="false"))
    assert "max.in.flight.requests.per.connection=1" in problems(error)["sink.kafka.producer.enable.idempotence"]
    config = confluent.producer_config(
        producer(enable_idempotence="false", **{"max.in.flight.requests.per.connection": 1})
    )
    assert config["enable.idempotence"] == "false"


def test_the_admin_client_gets_only_the_connection_settings() -> None:
    config = confluent.producer_config(
        producer(security_protocol="SASL_SSL", sasl_username="u", ssl_ca_location="/ca.pem", linger_ms=20)
    )
    assert confluent.admin_config(config) == {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_SSL",
        "sasl.username": "u",
        "ssl.ca.location": "/ca.pem",
    }


@pytest.mark.usefixtures("needs_confluent")
@pytest.mark.parametrize(
    ("setting", "value", "key"),
    [
        ("no.such.setting", "1", "sink.kafka.producer.no.such.setting"),
        ("linger.ms", "soon", "sink.kafka.producer.linger.ms"),  # librdkafka says queue.buffering.max.ms
        ("partitioner", "nope", "sink.kafka.producer.partitioner"),
    ],
)
def test_what_librdkafka_refuses_is_a_config_error_on_the_users_key(setting: str, value: str, key: str) -> None:
    client = confluent.ConfluentClient(producer(**{setting: value}))
    with pytest.raises(ConfigError) as error:
        client.new_producer()
    assert list(problems(error)) == [key]
    assert "librdkafka refuses" in problems(error)[key]
