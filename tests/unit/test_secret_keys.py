"""One rule for which configuration keys are secrets (``airflow_cdc.engine.secret_keys``), shared
by the engine, its control API and the Airflow hooks, and the ways a configuration is shown
without its secrets."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.config import Config, is_secret_key
from airflow_cdc.engine.secret_keys import MASK, masked, masked_value, without_secrets

SECRET = [
    # passwords, wherever the word sits
    "database.password",
    "offset.storage.jdbc.password",
    "offset.storage.jdbc.connection.password",
    "database.sslpassword",
    "database.ssl.keystore.password",
    "database.ssl.truststore.password",
    "sasl.password",
    "sink.kafka.producer.sasl.password",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "PGPASSWORD",
    "sasl_plain_password",
    "db.passwd",
    "private.key.passphrase",
    # secrets, JAAS (it holds the login's password)
    "client.secret",
    "aws.secret.access.key",
    "sasl.jaas.config",
    "sink.kafka.producer.sasl.jaas.config",
    "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
    # key material given inline
    "ssl.key",
    "ssl.key.pem",
    "sink.kafka.producer.ssl.key.pem",
    "ssl.keystore.key",
    "ssh.private.key",
    "snowflake.private_key",
    "privatekey",
    # tokens, credentials and API keys: the last word of the key
    "api.token",
    "access_token",
    "sasl.oauthbearer.token",
    "credentials",
    "aws.credentials",
    "gcp.credential",
    "api.key",
    "apikey",
]

NOT_SECRET = [
    "snapshot.max.threads",
    "token.count",  # a number, not a token: only a key that ends in token holds one
    "max.tokens",
    "sasl.oauthbearer.token.endpoint.url",
    "aws.credentials.provider",  # a class name
    "config.providers.secrets.class",  # a provider named "secrets"
    "database.user",
    "sasl.username",
    "offset.storage.jdbc.user",
    # paths to key material: a reader elsewhere needs them, and a DAG may set them
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.truststore.location",
    "ssl.keystore.certificate.chain",
    "database.sslkey",
    "database.sslcert",
    "database.sslrootcert",
    "database.ssl.keystore",
    "api.ssl.keyfile",
    "key.converter",
    "message.key.columns",
    "synthetic.keys",
    "offset.storage.jdbc.url",  # by name; its value decides (below)
    "security.protocol",
    "sasl.mechanism",
]


@pytest.mark.parametrize("key", SECRET)
def test_keys_that_name_a_secret(key: str) -> None:
    assert is_secret_key(key)
    assert is_secret_key(key.upper())


@pytest.mark.parametrize("key", NOT_SECRET)
def test_keys_that_do_not(key: str) -> None:
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("jdbc:postgresql://app:pw@db:5432/shop", f"jdbc:postgresql://app:{MASK}@db:5432/shop"),
        (
            "jdbc:postgresql://db/shop?user=app&password=pw&sslmode=require",
            f"jdbc:postgresql://db/shop?user=app&password={MASK}&sslmode=require",
        ),
        ("jdbc:mariadb://db/shop?sslpassword=kp", f"jdbc:mariadb://db/shop?sslpassword={MASK}"),
        ("Server=db;Database=shop;User Id=app;Password=pw;", f"Server=db;Database=shop;User Id=app;Password={MASK};"),
        ("host=db PWD='a b' dbname=shop", f"host=db PWD={MASK} dbname=shop"),
        ("postgresql://:pw@db/shop", f"postgresql://:{MASK}@db/shop"),
    ],
)
def test_a_value_that_carries_a_password_makes_any_key_a_secret_and_only_the_password_is_masked(
    value: str, shown: str
) -> None:
    assert not is_secret_key("offset.storage.jdbc.url")
    assert is_secret_key("offset.storage.jdbc.url", value)
    assert is_secret_key("database.initial.statements", value)
    assert masked_value("offset.storage.jdbc.url", value) == shown


@pytest.mark.parametrize(
    "value",
    [
        "jdbc:postgresql://app@db:5432/shop?sslmode=require",
        "http://registry:8081/subjects@latest",
        "https://db:5432/path",
        "jdbc:postgresql://db/shop?user=app&password=",  # nothing to hide
        "shop.public.orders",
        42,
        None,
    ],
)
def test_values_without_a_password(value: object) -> None:
    assert not is_secret_key("offset.storage.jdbc.url", value)
    assert masked_value("offset.storage.jdbc.url", value) == value


def test_shown_configurations() -> None:
    config = {
        "database.password": "pw",
        "database.sslpassword": "",
        "sink.kafka.producer.ssl.keystore.key": "-----BEGIN PRIVATE KEY-----",
        "offset.storage.jdbc.url": "jdbc:postgresql://app:pw@db/shop",
        "database.hostname": "db",
    }
    # the control API's answer: secrets by name left out, a URL's password masked
    assert without_secrets(config) == {
        "offset.storage.jdbc.url": f"jdbc:postgresql://app:{MASK}@db/shop",
        "database.hostname": "db",
    }
    # a repr or a log line: every key, an empty secret shown empty
    assert masked(config) == {
        "database.password": MASK,
        "database.sslpassword": "",
        "sink.kafka.producer.ssl.keystore.key": MASK,
        "offset.storage.jdbc.url": f"jdbc:postgresql://app:{MASK}@db/shop",
        "database.hostname": "db",
    }
    shown = repr(Config(config))
    assert "'pw'" not in shown and ":pw@" not in shown and "PRIVATE KEY" not in shown


def test_the_hooks_use_the_engines_rule() -> None:
    from airflow_cdc.engine import config
    from airflow_cdc.hooks import source_config

    assert source_config.is_secret_key is config.is_secret_key
