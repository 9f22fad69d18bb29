"""The provider metadata Airflow reads through the ``apache_airflow_provider`` entry point.

Connection forms are declared here (``conn-fields``, ``ui-field-behaviour``: Airflow 3.2+ reads
them from the metadata; the hook methods of older versions are deprecated). A test imports every
class path named here.
"""

from __future__ import annotations

from typing import Any

from airflow_cdc import __version__

INTEGRATION = "Change data capture (airflow-cdc)"

ENGINE_CONNECTION: dict[str, Any] = {
    "hook-class-name": "airflow_cdc.hooks.engine.CdcEngineHook",
    "hook-name": "CDC engine (airflow-cdc)",
    "connection-type": "cdc_engine",
    "conn-fields": {
        "config_path": {
            "label": "Instance config file",
            "description": "An engine instance's config file on the worker: the hook can start the instance from "
            "it and find its API without a host.",
            "schema": {"type": ["string", "null"]},
        },
        "timeout": {
            "label": "API timeout (s)",
            "schema": {"type": ["number", "null"], "default": 10, "minimum": 0.1},
        },
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "extra"],
        "relabeling": {"host": "Control API URL", "login": "Instance name", "password": "API token"},
        "placeholders": {
            "host": "http://127.0.0.1:8765 (empty: use the instance config file)",
            "login": "shop",
            "password": "the instance's api.token",
            "config_path": "/opt/airflow/cdc/shop.yaml",
        },
    },
}


CONNECT_CONNECTION: dict[str, Any] = {
    "hook-class-name": "airflow_cdc.hooks.engine.CdcKafkaConnectHook",
    "hook-name": "Debezium on Kafka Connect (airflow-cdc)",
    "connection-type": "kafka_connect",
    "conn-fields": {
        "config_path": {
            "label": "Engine config file",
            "description": "The config file the connector is created from (the one an embedded instance runs).",
            "schema": {"type": ["string", "null"]},
        },
        "connector": {
            "label": "Connector name",
            "description": "Default: the config file's name.",
            "schema": {"type": ["string", "null"]},
        },
        "bootstrap_servers": {
            "label": "Kafka bootstrap servers",
            "description": "Where the sensors read Debezium's notification topic.",
            "schema": {"type": ["string", "null"]},
        },
        "notification_topic": {
            "label": "Notification topic",
            "description": "Default: the config's notification.sink.topic.name, else <topic.prefix>.notifications.",
            "schema": {"type": ["string", "null"]},
        },
        "source_conn_id": {
            "label": "Source connection",
            "description": "The captured database's connection: its current position for the offset sensor, and "
            "the signal table for signals sent without a channel (Debezium has no API channel).",
            "schema": {"type": ["string", "null"]},
        },
        "timeout": {
            "label": "REST timeout (s)",
            "schema": {"type": ["number", "null"], "default": 30, "minimum": 0.1},
        },
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "extra"],
        "relabeling": {"host": "Kafka Connect REST URL", "login": "User (basic auth)", "password": "Password"},
        "placeholders": {
            "host": "http://connect:8083",
            "config_path": "/opt/airflow/cdc/shop.yaml",
            "bootstrap_servers": "kafka:9092",
            "source_conn_id": "pg_shop",
        },
    },
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-cdc",
        "name": "airflow-cdc",
        "description": "Change-data-capture pipelines: an embedded Debezium-compatible CDC engine, incremental "
        "snapshots driven by signals, and Spark jobs that apply the changes.",
        "versions": [__version__],
        "integrations": [{"integration-name": INTEGRATION, "tags": ["software"]}],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_cdc.hooks.engine", "airflow_cdc.hooks.signal"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_cdc.operators.engine",
                    "airflow_cdc.operators.snapshot",
                    "airflow_cdc.operators.offsets",
                    "airflow_cdc.operators.capture",
                    "airflow_cdc.operators.spark",
                    "airflow_cdc.operators.health",
                    "airflow_cdc.operators.validate",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_cdc.sensors.snapshot", "airflow_cdc.sensors.offset"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_cdc.triggers.snapshot",
                    "airflow_cdc.triggers.offset",
                    "airflow_cdc.triggers.table_changes",
                ],
            }
        ],
        "extra-links": ["airflow_cdc.links.CdcInstanceLink", "airflow_cdc.links.CdcSnapshotLink"],
        "connection-types": [ENGINE_CONNECTION, CONNECT_CONNECTION],
    }
