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
                "python-modules": ["airflow_cdc.triggers.snapshot", "airflow_cdc.triggers.offset"],
            }
        ],
        "extra-links": ["airflow_cdc.links.CdcInstanceLink", "airflow_cdc.links.CdcSnapshotLink"],
        "connection-types": [ENGINE_CONNECTION],
    }
