"""The one translation of Kafka client settings (Java and librdkafka names) to kafka-python's."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.kafka_settings import (
    java_client_settings,
    kafka_python_config,
    security_fields,
    security_settings,
)
from airflow_cdc.engine.sinks.kafka_python import admin_settings, producer_settings

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="cdc" password="p\\"w";'


def test_librdkafka_names_become_kafka_python_arguments() -> None:
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "cdc",
        "sasl.password": "pw",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/client.pem",
        "ssl.key.location": "/client.key",
        "ssl.key.password": "kp",
        "request.timeout.ms": "5000",
    }
    assert kafka_python_config(settings, KafkaConsumer.DEFAULT_CONFIG) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "cdc",
        "sasl_plain_password": "pw",
        "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/client.pem",
        "ssl_keyfile": "/client.key",
        "ssl_password": "kp",
        "request_timeout_ms": 5000,
    }


def test_java_names_as_kafka_connect_writes_them() -> None:
    settings = {
        "sasl.jaas.config": SCRAM,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/client.pem",
        "ssl.endpoint.identification.algorithm": "",
    }
    assert kafka_python_config(settings, KafkaAdminClient.DEFAULT_CONFIG) == {
        "sasl_plain_username": "cdc",
        "sasl_plain_password": 'p"w',
        "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/client.pem",
        "ssl_check_hostname": False,
    }


def test_what_kafka_python_cannot_honour_is_refused_naming_the_prefixed_key() -> None:
    with pytest.raises(ConfigError) as failed:
        kafka_python_config(
            {
                "p.ssl.truststore.location": "/trust.jks",
                "p.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;",
                "p.ssl.keystore.key": "-----BEGIN",
                "p.no.such.setting": "1",
                "p.request.timeout.ms": "soon",
            },
            KafkaProducer.DEFAULT_CONFIG,
            prefix="p.",
        )
    keys = [p.key for p in failed.value.problems]
    assert keys == [
        "p.ssl.truststore.location",
        "p.sasl.jaas.config",
        "p.ssl.keystore.key",
        "p.no.such.setting",
        "p.request.timeout.ms",
    ]
    assert "PEM" in failed.value.problems[0].message


def test_not_strict_skips_what_the_client_lacks() -> None:
    settings = {"bootstrap.servers": "b:9092", "acks": "all", "linger.ms": "5"}
    assert kafka_python_config(settings, KafkaAdminClient.DEFAULT_CONFIG, strict=False) == {
        "bootstrap_servers": "b:9092"
    }


def test_security_settings_are_the_ones_another_client_needs() -> None:
    config = {
        "sink.kafka.producer.bootstrap.servers": "b:9093",
        "sink.kafka.producer.linger.ms": 20,
        "sink.kafka.producer.security.protocol": "SSL",
        "sink.kafka.producer.ssl.ca.location": "/ca.pem",
        "sink.kafka.producer.sasl.username": None,
        "topic.prefix": "x",
    }
    assert security_settings(config, "sink.kafka.producer.") == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
    }
    assert admin_settings(config) == {
        "bootstrap_servers": "b:9093",
        "security_protocol": "SSL",
        "ssl_cafile": "/ca.pem",
    }
    assert producer_settings(config)["ssl_cafile"] == "/ca.pem"


def test_declared_security_fields_leave_the_host_check_alone_unless_set() -> None:
    fields = {f.name: f for f in security_fields("signal.consumer.", "signals")}
    assert fields["signal.consumer.ssl.endpoint.identification.algorithm"].default is None
    assert "signal.consumer.sasl.password" in fields


def test_java_client_settings_for_sparks_own_kafka_source() -> None:
    java = java_client_settings(
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "p"}
        | {"ssl.ca.location": "/ca.pem"}
    )
    assert java == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM.replace("cdc", "u").replace('p\\"w', "p"),
        "ssl.truststore.location": "/ca.pem",
        "ssl.truststore.type": "PEM",
    }
    plain = java_client_settings({"sasl.username": "u", "sasl.password": "p"})
    assert plain["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule")
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        java_client_settings({"ssl.certificate.location": "/c.pem", "ssl.key.location": "/c.key"})
