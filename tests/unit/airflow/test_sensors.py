"""The sensors: deferrable by default (``execute()`` only defers), poke mode on the same rules,
``execute_complete()`` only judging the event, asset events, templates, cheap argument checks."""

from __future__ import annotations

import inspect
import json
from datetime import timedelta
from typing import Any

import pytest
from airflow.sdk import AssetAlias, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.base import CdcOperatorError, CdcUnavailableError
from airflow_cdc.sensors.base import CdcBaseSensor
from airflow_cdc.sensors.offset import CdcConsumerLagSensor, CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor
from airflow_cdc.triggers.offset import CdcConsumerLagTrigger, CdcOffsetTrigger
from airflow_cdc.triggers.snapshot import CdcSnapshotTrigger
from tests.unit.airflow.test_triggers import CONN, SIGNAL_ID, TOKEN, FakeApi, api  # noqa: F401 - fixture

ORDERS = table_asset("shop", "public.orders")
OFFSETS = [{"partition": {"server": "shop"}, "offset": {"lsn": 16}, "position": "0/10"}]
SUCCESS = {
    "status": "success",
    "message": "snapshot snap-1 completed",
    "signal_id": SIGNAL_ID,
    "topic_prefix": "shop",
    "rows": {"public.orders": 200},
    "offsets": OFFSETS,
}


def context() -> dict[str, Any]:
    return {"outlet_events": OutletEventAccessors()}


def snapshot_sensor(**kwargs: Any) -> CdcSnapshotSensor:
    return CdcSnapshotSensor(task_id="snapshot_done", cdc_conn_id=CONN, signal_id=SIGNAL_ID, **kwargs)


def test_sensors_defer_by_default_whatever_the_operators_default_deferrable_setting() -> None:
    """A CDC wait lasts minutes to hours: it waits in the triggerer unless told to poke (Airflow's
    own default, False, suits short waits)."""
    assert conf.getboolean("operators", "default_deferrable", fallback=False) is False
    assert inspect.signature(CdcBaseSensor.__init__).parameters["deferrable"].default is True
    assert snapshot_sensor().deferrable is True
    assert snapshot_sensor(deferrable=False).deferrable is False


@pytest.mark.parametrize(
    ("sensor", "trigger_class", "expected"),
    [
        (
            lambda: snapshot_sensor(deferrable=True, stall_timeout=30, poke_interval=2, timeout=3600, defer_after=0),
            CdcSnapshotTrigger,
            {
                "signal_id": SIGNAL_ID,
                "stall_timeout": 30,
                "poll_interval": 2.0,
                "accept_statuses": ["SUCCEEDED", "EMPTY"],
            },
        ),
        (
            lambda: CdcOffsetSensor(
                task_id="caught_up", cdc_conn_id=CONN, target="current", deferrable=True, defer_after=0
            ),
            CdcOffsetTrigger,
            {"target": "current", "poll_interval": 5.0},
        ),
        (
            lambda: CdcConsumerLagSensor(
                task_id="lag",
                cdc_conn_id=CONN,
                group_id="apply",
                max_lag=3,
                topics="shop.public.orders",
                deferrable=True,
                defer_after=0,
            ),
            CdcConsumerLagTrigger,
            {"group_id": "apply", "max_lag": 3, "topics": ["shop.public.orders"], "kafka_conn_id": None},
        ),
    ],
)
def test_a_deferrable_sensor_with_defer_after_0_only_defers(
    sensor: Any, trigger_class: type, expected: dict[str, Any]
) -> None:
    task = sensor()
    with pytest.raises(TaskDeferred) as deferred:
        task.execute(context())
    trigger = deferred.value.trigger
    assert type(trigger) is trigger_class and deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout == timedelta(seconds=task.timeout)
    _, kwargs = trigger.serialize()
    assert kwargs["cdc_conn_id"] == CONN and expected.items() <= kwargs.items()


def test_execute_complete_returns_the_xcom_and_emits_an_asset_event_per_table() -> None:
    sensor = snapshot_sensor(outlets=[ORDERS, AssetAlias("snapshotted")])
    ctx = context()
    assert sensor.execute_complete(ctx, dict(SUCCESS)) == {
        "signal_id": SIGNAL_ID,
        "topic_prefix": "shop",
        "rows": {"public.orders": 200},
        "offsets": OFFSETS,
    }
    events = ctx["outlet_events"]
    assert events[ORDERS].extra == {"rows": 200, "signal_id": SIGNAL_ID, "offsets": OFFSETS}
    [alias_event] = events[AssetAlias("snapshotted")].asset_alias_events
    assert alias_event.dest_asset_key.uri == "cdc://shop/public.orders"


@pytest.mark.parametrize(
    ("event", "error"),
    [
        ({"status": "failed", "message": "snapshot snap-1 was ABORTED", "retriable": False}, CdcOperatorError),
        ({"status": "error", "message": "refused the token", "retriable": False}, CdcOperatorError),
        ({"status": "error", "message": "does not answer", "retriable": True}, CdcUnavailableError),
    ],
)
def test_execute_complete_fails_with_the_events_message(event: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match=event["message"]) as raised:
        snapshot_sensor().execute_complete(context(), event)
    # Failures the task's retries cannot mend fail at once; an unanswering instance stays retriable.
    assert isinstance(raised.value, AirflowFailException) == (error is CdcOperatorError)
    assert isinstance(raised.value, AirflowException)


def test_poke_mode_follows_the_same_rules(api: FakeApi) -> None:  # noqa: F811 - fixture
    api.publish("STARTED", data_collections="public.orders")
    sensor = snapshot_sensor(deferrable=False, poke_interval=0.01, outlets=[ORDERS])
    ctx = context()
    assert sensor.poke(ctx) is False  # still running: the next poke goes on from its cursor
    api.publish("TABLE_SCAN_COMPLETED", scanned_collection="public.orders", total_rows_scanned="7", status="SUCCEEDED")
    api.publish("COMPLETED")
    done = sensor.poke(ctx)
    assert done and done.xcom_value["rows"] == {"public.orders": 7}  # type: ignore[union-attr]
    assert ctx["outlet_events"][ORDERS].extra["rows"] == 7
    cursors = [r.url.params.get("cursor") for r in api.requests if r.url.path == "/notifications"]
    assert cursors == [None, "run-1:1", "run-1:1", "run-1:3"]


def test_poke_mode_fails_on_an_aborted_snapshot(api: FakeApi) -> None:  # noqa: F811 - fixture
    api.publish("STARTED")
    api.publish("ABORTED")
    with pytest.raises(CdcOperatorError, match="ABORTED"):
        snapshot_sensor(deferrable=False, poke_interval=0.01, timeout=30).execute(context())


def test_an_offset_sensor_in_poke_mode(api: FakeApi) -> None:  # noqa: F811 - fixture
    api.committed = api.current = "0/20"
    sensor = CdcOffsetSensor(
        task_id="caught_up", cdc_conn_id=CONN, target="current", deferrable=False, poke_interval=0.01
    )
    xcom = sensor.execute(context())
    assert xcom["target"] == "current" and xcom["positions"][0]["committed"] == "0/20"


def test_signal_id_is_templated() -> None:
    sensor = CdcSnapshotSensor(task_id="s", cdc_conn_id="{{ params.conn }}", signal_id="{{ params.signal }}")
    sensor.render_template_fields({"params": {"conn": CONN, "signal": "snap-9"}})
    assert (sensor.cdc_conn_id, sensor.signal_id) == (CONN, "snap-9")


def test_an_empty_signal_id_fails_naming_where_it_comes_from() -> None:
    with pytest.raises(CdcOperatorError, match=r"snapshot\.output"):
        CdcSnapshotSensor(task_id="s", cdc_conn_id=CONN, signal_id=" ", deferrable=True).execute(context())


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: snapshot_sensor(stall_timeout=0), "stall_timeout"),
        (lambda: snapshot_sensor(accept_statuses="SUCCEEDED"), "accept_statuses"),
        (lambda: snapshot_sensor(unavailable_timeout=-1), "unavailable_timeout"),
        (
            lambda: CdcOffsetSensor(task_id="o", target="current", mode="reschedule", deferrable=False),
            "mode='reschedule' forgets",
        ),
        (lambda: CdcConsumerLagSensor(task_id="l", group_id="g", max_lag=-1), "max_lag"),
        (lambda: CdcConsumerLagSensor(task_id="l", group_id=""), "group_id"),
    ],
)
def test_arguments_are_checked_when_the_dag_is_parsed(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_no_secret_in_what_a_deferred_sensor_hands_the_triggerer(api: FakeApi) -> None:  # noqa: F811 - fixture
    with pytest.raises(TaskDeferred) as deferred:
        snapshot_sensor(deferrable=True, defer_after=0).execute(context())
    assert TOKEN not in json.dumps(deferred.value.trigger.serialize()[1])


def test_a_wait_over_within_defer_after_ends_in_the_task(api: FakeApi) -> None:  # noqa: F811 - fixture
    """Airflow 3.3 fails a deferred task whose trigger fires before the deferring worker's exit is
    processed (apache/airflow#67287, #72716): a wait that ends within seconds never defers."""
    api.committed = api.current = "0/20"
    sensor = CdcOffsetSensor(task_id="caught_up", cdc_conn_id=CONN, target="current", poke_interval=0.01)
    assert sensor.deferrable and sensor.defer_after == 15.0
    xcom = sensor.execute(context())  # no TaskDeferred
    assert xcom["positions"][0]["committed"] == "0/20"


def test_a_wait_not_over_after_defer_after_defers(api: FakeApi) -> None:  # noqa: F811 - fixture
    api.publish("STARTED", data_collections="public.orders")
    with pytest.raises(TaskDeferred) as deferred:
        snapshot_sensor(poke_interval=0.01, defer_after=0.3).execute(context())
    assert type(deferred.value.trigger) is CdcSnapshotTrigger
    assert sum(r.url.path == "/notifications" for r in api.requests) >= 2  # it looked more than once first
