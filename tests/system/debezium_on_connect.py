"""``cdc_shop`` as Debezium's PostgreSQL connector on the session's real Kafka Connect worker and
broker: the connector's config file, the ``kafka_connect`` connection that names it, and the
cleanup - connector deleted, its ``shop.*`` topics dropped (the session's broker is shared, and
the example DAGs all use topic prefix ``shop``); its slot goes with the test's database
(``pg_database``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from airflow_cdc.kafka_connect import ConnectClient
from tests.system.conftest import WITH_SCHEMAS
from tests.system.support import Source, drop_topics


@contextlib.contextmanager
def debezium_shop(
    tmp_path: Path, source: Source, connect_worker: Any, kafka_broker: Any, label: str, **settings: Any
) -> Iterator[str]:
    """Yields the ``AIRFLOW_CONN_CDC_SHOP`` value: a connector capturing ``orders`` and
    ``customers`` (schemas in the events; signals through the signal table, notifications on a
    topic) with ``settings`` over those. The connector is created by the DAG's start task."""
    name, slot = f"{label}-{source.database[-8:]}", f"slot_{label.replace('-', '_')}_{source.database}"
    config = tmp_path / f"{label}-connect.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "plugin.name": "pgoutput",
                "topic.prefix": "shop",
                "slot.name": slot,
                "publication.name": f"pub_{label.replace('-', '_')}_{source.database}",
                "table.include.list": "public.orders,public.customers",
                "signal.data.collection": "public.debezium_signal",
                "notification.sink.topic.name": "shop.notifications",
                **WITH_SCHEMAS,
                **settings,
            }
        )
    )
    extra = {
        "config_path": str(config),
        "bootstrap_servers": kafka_broker.bootstrap_servers,
        "source_conn_id": "pg_shop",
    }
    drop_topics(kafka_broker, "shop")  # another test's connector may have written shop.* before
    client = ConnectClient(connect_worker.url)
    try:
        yield json.dumps({"conn_type": "kafka_connect", "host": connect_worker.url, "extra": extra})
    finally:
        with contextlib.suppress(Exception):  # never created: the test failed before
            client.delete(name)
        client.close()
        drop_topics(kafka_broker, "shop")  # the next test's connector writes shop.* too
        # Its slot goes with the test's database (pg_database drops both).
