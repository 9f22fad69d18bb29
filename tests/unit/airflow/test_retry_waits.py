"""Sensors and triggers while the instance retries a fault (health RETRYING, against the recorded
control API of ``test_triggers``): they keep waiting - it recovers on its own - and a wait that
ends meanwhile (a stalled snapshot, the sensor's timeout) names the cause being retried."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from airflow.sdk.bases.operator import TriggerFailureReason
from airflow.sdk.exceptions import AirflowSensorTimeout
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_cdc.engine.server.models import InstanceStatus, Retrying
from airflow_cdc.sensors.offset import CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor
from airflow_cdc.triggers.offset import CdcOffsetTrigger
from airflow_cdc.triggers.progress import retry_note
from airflow_cdc.triggers.snapshot import CdcSnapshotTrigger
from tests.unit.airflow.test_triggers import CONN, SIGNAL_ID, FakeApi, api  # noqa: F401 - fixture

#: What the scheduler hands a deferred task whose trigger timed out (Airflow 3's own value, read
#: back from the database as a plain string).
TIMEOUT = TriggerFailureReason.TRIGGER_TIMEOUT.value
LOST = "replication connection lost: server closed the connection unexpectedly"
SINCE_MS = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
NOTE = f"the instance is RETRYING since 22:13:20 UTC (attempt 4): task shop-0 poll: {LOST}"


def retrying(api: FakeApi) -> None:  # noqa: F811 - the fixture's type
    """From now on the instance answers RETRYING: its task retries a lost connection."""
    healthy = api.status

    def status() -> InstanceStatus:
        now = healthy()
        retry = Retrying(LOST, "poll", attempt=4, since_ms=SINCE_MS, next_attempt_ms=SINCE_MS + 4000)
        tasks = tuple(replace(task, retrying=retry) for task in now.tasks)
        return replace(now, tasks=tasks, health="RETRYING", cause=f"task shop-0 poll: {LOST}")

    api.status = status  # type: ignore[method-assign]


def test_the_retry_note_names_the_cause_since_when_and_the_attempt(api: FakeApi) -> None:  # noqa: F811
    assert retry_note(api.status()) == ""
    retrying(api)
    assert retry_note(api.status()) == NOTE


def test_a_snapshot_wait_goes_on_while_the_instance_retries_and_a_stall_names_the_cause(
    api: FakeApi,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
) -> None:
    api.publish("STARTED", data_collections="public.orders")
    retrying(api)
    trigger = CdcSnapshotTrigger(CONN, SIGNAL_ID, stall_timeout=3600, poll_interval=0.01)

    async def waiting() -> list[Any]:
        try:
            return [await trigger.poll() for _ in range(3)]
        finally:
            await trigger.cleanup()

    assert asyncio.run(waiting()) == [None, None, None]  # it keeps waiting
    logged = "".join(capfd.readouterr())
    assert logged.count(f"{NOTE}; still waiting: it recovers on its own") == 1  # logged once, not at every look

    trigger.watch.stall_timeout = 0  # the snapshot stalls (nothing moves while the connection is lost)

    async def stalled() -> Any:
        try:
            return await trigger.poll()
        finally:
            await trigger.cleanup()

    event = asyncio.run(stalled())
    assert event["status"] == "failed"
    assert event["message"].startswith(f"snapshot {SIGNAL_ID}: no progress for ")
    assert event["message"].endswith(f"Raise stall_timeout for slow tables; {NOTE}")


def test_an_offset_wait_goes_on_while_the_instance_retries(api: FakeApi, capfd: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    retrying(api)
    trigger = CdcOffsetTrigger(CONN, target="0/30", poll_interval=0.01)

    async def look() -> Any:
        try:
            return await trigger.poll()
        finally:
            await trigger.cleanup()

    assert asyncio.run(look()) is None
    assert NOTE in "".join(capfd.readouterr())
    api.committed = api.delivered = "0/30"  # it recovered and committed
    assert asyncio.run(look())["status"] == "success"


def test_a_sensor_timing_out_while_the_instance_retries_names_the_cause(api: FakeApi) -> None:  # noqa: F811
    retrying(api)
    poking = CdcOffsetSensor(
        task_id="caught_up", cdc_conn_id=CONN, target="0/30", deferrable=False, poke_interval=0.01, timeout=0.05
    )
    with pytest.raises(AirflowSensorTimeout) as poked:
        poking.execute({"outlet_events": OutletEventAccessors()})  # type: ignore[arg-type]
    assert str(poked.value).startswith("Sensor has timed out; run duration of ")
    assert str(poked.value).endswith(f"; {NOTE}")

    deferred = CdcSnapshotSensor(task_id="snapshot_done", cdc_conn_id=CONN, signal_id=SIGNAL_ID, timeout=60)
    with pytest.raises(AirflowSensorTimeout) as timed_out:  # the triggerer's timeout, as Airflow resumes the task
        deferred.resume_execution("__fail__", {"error": TIMEOUT}, {})  # type: ignore[arg-type]
    assert str(timed_out.value) == f"{TIMEOUT}; {NOTE}"


def test_a_sensor_timing_out_on_a_healthy_instance_says_only_airflows_words(api: FakeApi) -> None:  # noqa: F811
    deferred = CdcSnapshotSensor(task_id="snapshot_done", cdc_conn_id=CONN, signal_id=SIGNAL_ID, timeout=60)
    with pytest.raises(AirflowSensorTimeout, match=r"^Trigger timeout$"):
        deferred.resume_execution("__fail__", {"error": TIMEOUT}, {})  # type: ignore[arg-type]
