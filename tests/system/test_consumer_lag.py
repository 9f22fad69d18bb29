"""CdcConsumerLagSensor against a real Kafka broker and an engine instance writing its topics."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.sdk.execution_time.context import OutletEventAccessors
from kafka import KafkaConsumer
from kafka.errors import KafkaError

from airflow_cdc.engine.server import control
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.sensors.offset import CdcConsumerLagSensor
from airflow_cdc.triggers.kafka_lag import ConsumerLag
from airflow_cdc.triggers.offset import CdcConsumerLagTrigger
from tests.system.conftest import TOKEN, connect_source
from tests.system.support import Source

pytestmark = pytest.mark.integration

ROWS = 2050  # orders and customers of the source fixture


def unread(bootstrap: str, prefix: str, group: str) -> int:
    """The group's lag, once the broker's group coordinator answers (a fresh broker creates its
    offsets topic on the first group request)."""
    lag = ConsumerLag({"bootstrap_servers": bootstrap}, group, topic_prefix=prefix)
    deadline = time.monotonic() + 30
    seen: object = None
    try:
        while time.monotonic() < deadline:
            try:
                measured = lag.measure()
            except KafkaError as exc:
                seen = exc
                continue
            if measured is not None:
                return measured.total
            seen = "no topic yet"
        raise AssertionError(f"no lag measured within 30s: {seen}")
    finally:
        lag.close()


@pytest.fixture
def kafka_instance(
    tmp_path: Path,
    source: Source,
    kafka_broker: KafkaBroker,
    kafka_topic_prefix: str,
    airflow_db: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """A running instance (connection ``cdc_kafka``) whose initial snapshot went to Kafka."""
    state = tmp_path / "state"
    config = {
        "name": f"lag-{source.database[-8:]}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": kafka_topic_prefix,
        "slot.name": f"slot_lag_{source.database}",
        "publication.name": f"pub_lag_{source.database}",
        "table.include.list": "public.orders,public.customers",
        "state.dir": str(state),
        "api.token": TOKEN,
        "offset.flush.interval.ms": 100,
        "sink.type": "kafka",
        "sink.kafka.producer.bootstrap.servers": kafka_broker.bootstrap_servers,
    }
    path = tmp_path / "lag.yaml"
    path.write_text(yaml.safe_dump(config))
    conn = {"conn_type": "cdc_engine", "password": TOKEN, "extra": {"config_path": str(path)}}
    monkeypatch.setenv("AIRFLOW_CONN_CDC_KAFKA", json.dumps(conn))
    kafka = {"conn_type": "kafka", "extra": {"bootstrap.servers": kafka_broker.bootstrap_servers}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_LOCAL", json.dumps(kafka))
    connect_source(monkeypatch, source)
    try:
        CdcStartEngineOperator(task_id="start", cdc_conn_id="cdc_kafka", source_conn_id="pg_shop", timeout=120).execute(
            {"outlet_events": OutletEventAccessors()}  # type: ignore[arg-type]
        )
        yield config
    finally:
        control.stop({"name": config["name"], "state.dir": str(state)}, timeout=30)


def consume_all(bootstrap: str, prefix: str, group: str, expected: int) -> int:
    """Read every record of the instance's topics as ``group`` and commit; how many were read."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
    )
    try:
        consumer.subscribe(pattern=f"^{prefix}\\..*")
        read = 0
        for _ in consumer:
            read += 1
            if read >= expected:
                break
        consumer.commit()
        return read
    finally:
        consumer.close()


def test_the_sensor_waits_until_the_group_has_read_the_instances_topics(
    kafka_instance: dict[str, Any], kafka_broker: KafkaBroker
) -> None:
    prefix = kafka_instance["topic.prefix"]
    group = f"apply-{prefix}"

    # Nothing read yet: the whole snapshot is the group's lag (brokers from the instance's sink).
    trigger = CdcConsumerLagTrigger("cdc_kafka", group, max_lag=0)

    async def look() -> Any:
        try:
            return await trigger.poll()
        finally:
            await trigger.cleanup()

    assert asyncio.run(look()) is None
    assert unread(kafka_broker.bootstrap_servers, prefix, group) == ROWS

    reader = threading.Thread(target=consume_all, args=(kafka_broker.bootstrap_servers, prefix, group, ROWS))
    reader.start()
    sensor = CdcConsumerLagSensor(
        task_id="consumed",
        cdc_conn_id="cdc_kafka",
        group_id=group,
        kafka_conn_id="kafka_local",  # brokers from a Kafka connection this time
        deferrable=False,
        poke_interval=0.5,
        timeout=120,
    )
    lag = sensor.execute({"outlet_events": OutletEventAccessors()})  # type: ignore[arg-type]
    reader.join(30)
    assert lag["group_id"] == group and lag["total"] == 0
    assert set(lag["partitions"]) == {f"{prefix}.public.orders:0", f"{prefix}.public.customers:0"}
