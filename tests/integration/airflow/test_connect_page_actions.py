"""The CDC page's actions and health figures on Debezium on Kafka Connect (ADR 0028), against the
real Connect worker: the page's filtered snapshot goes into the signal table over the
connection's ``source_conn_id`` (Debezium on Connect has no API channel) and completes with the
filter's rows; the health figures read the slot and Connect's offsets; stop and start drive the
connector. The guards in front of these calls: tests/system/test_ui.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.health import read_health
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor
from airflow_cdc.ui.actions import ActionRequest, perform
from airflow_cdc.ui.instances import client_for
from tests.integration.airflow.conftest import CDC_CONN, Source
from tests.integration.airflow.support import task_context
from tests.integration.airflow.test_connect_operators import connector, start  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def test_the_pages_actions_drive_a_connector(connector: str, source: Source, connect_worker: Any) -> None:  # noqa: F811
    start().execute(task_context())
    done = perform(CDC_CONN, "snapshot", ActionRequest(tables=["public.orders"], filter="id <= 5"))
    signal_id = done["signal_id"]
    with source.connect() as conn:
        row = conn.execute("select type, data from debezium_signal where id = %s", (signal_id,)).fetchone()
    assert row is not None and row[0] == "execute-snapshot"
    assert json.loads(row[1])["additional-conditions"] == [{"data-collection": "public.orders", "filter": "id <= 5"}]
    sensor = CdcSnapshotSensor(task_id="done", cdc_conn_id=CDC_CONN, signal_id=signal_id, deferrable=False)
    wait_until(lambda: sensor.poke(task_context()), 180, "the filtered snapshot completed")

    with client_for(CDC_CONN) as backend:
        reading = read_health(backend, source.password)
    assert reading.retained_bytes is not None and reading.health == "RUNNING", reading

    assert "stopped" in perform(CDC_CONN, "stop", ActionRequest())["message"]
    with client_for(CDC_CONN) as backend:
        wait_until(lambda: backend.status().health == "STOPPED", 60, "the connector stopped")
    assert "started" in perform(CDC_CONN, "start", ActionRequest())["message"]
    with client_for(CDC_CONN) as backend:
        wait_until(lambda: backend.status().health == "RUNNING", 120, "the connector running again")
