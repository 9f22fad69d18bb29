"""The control API's ``GET /connectors/<name>`` shows the configuration without its secrets: a key
that names one is left out (readers take credentials from their own connections), a password
inside another value - a JDBC URL's - is masked and the rest of the value kept. A real serving
instance (booted stopped: no database is needed to ask for its configuration) and its real API."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from airflow_cdc.engine.secret_keys import MASK
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until

SECRETS = {
    "database.password": "pw-database",
    "database.sslpassword": "pw-sslkey",
    "api.token": "t0k-api-token",
    "sink.kafka.producer.sasl.jaas.config": 'ScramLoginModule required username="u" password="pw-jaas";',
    "sink.kafka.producer.ssl.keystore.key": "-----BEGIN PRIVATE KEY----- pw-inline-key",
    "sink.kafka.producer.ssl.key.pem": "-----BEGIN PRIVATE KEY----- pw-inline-pem",
}


def test_get_connector_config_leaves_secrets_out_and_masks_a_urls_password(tmp_path: Path) -> None:
    props = {
        "name": "shop",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": "shop",
        "database.hostname": "127.0.0.1",
        "database.dbname": "shop",
        "database.user": "app",
        "database.sslkey": "/etc/cdc/client.key",  # a path: shown
        "state.dir": str(tmp_path / "state"),
        "sink.type": "changelog",
        "offset.storage": "jdbc",
        "offset.storage.jdbc.url": "jdbc:postgresql://cdc:pw-url-userinfo@db:5432/cdc?sslmode=require",
        "schema.history.internal.jdbc.url": "jdbc:postgresql://db:5432/cdc?user=cdc&password=pw-url-query",
        **SECRETS,
    }
    instance = EngineInstance(props, serve=True, start_stopped=True)
    thread = threading.Thread(target=instance.run, name="serving-instance")
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("api"), 30, "the API is up")
        with EngineClient(str(read_status(instance.directory)["api"]), SECRETS["api.token"]) as client:
            shown = client.connector("shop")["config"]
    finally:
        instance.stop_requested.set()  # a serving instance: the process, as SIGTERM does
        thread.join(30)
    assert not thread.is_alive()

    assert "pw-" not in json.dumps(shown)
    assert not set(SECRETS) & set(shown)
    assert shown["offset.storage.jdbc.url"] == f"jdbc:postgresql://cdc:{MASK}@db:5432/cdc?sslmode=require"
    assert shown["schema.history.internal.jdbc.url"] == f"jdbc:postgresql://db:5432/cdc?user=cdc&password={MASK}"
    assert shown["database.sslkey"] == "/etc/cdc/client.key" and shown["database.user"] == "app"
