"""The sensors' triggers against a recorded control API (httpx's MockTransport answering with the
engine's own models): serialization, exactly one final event, failure paths, an instance that
does not answer, and no secret in kwargs, events or logs."""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from airflow_cdc.backends.api import AsyncApiBackend
from airflow_cdc.engine.notifications import INCREMENTAL, Notification, NotificationPage
from airflow_cdc.engine.server.client import AsyncEngineClient
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, TaskPosition, TaskStatus
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.triggers.base import CdcEngineTrigger
from airflow_cdc.triggers.kafka_lag import ConsumerLag, GroupLag
from airflow_cdc.triggers.offset import CdcConsumerLagTrigger, CdcOffsetTrigger
from airflow_cdc.triggers.snapshot import CdcSnapshotTrigger

TOKEN = f"tok-{uuid.uuid4().hex}"
CONN = "cdc_unit"
SIGNAL_ID = "snap-1"


class FakeApi:
    """An instance's control API as recorded: answers built from the engine's models."""

    def __init__(self, name: str = "shop", tasks: int = 1) -> None:
        self.name = name
        self.tasks = tasks
        self.notifications: list[Notification] = []
        self.committed = "0/10"
        self.current = "0/20"
        #: Delivered but not committed yet (``offset.flush.interval.ms``); a flush commits it.
        self.delivered = self.committed
        self.flushable = False
        #: Requests until the instance answers (it "restarts"); -1: never.
        self.down_for = 0
        self.requests: list[httpx.Request] = []

    def publish(self, kind: str, **data: str) -> None:
        self.notifications.append(Notification(INCREMENTAL, kind, {"connector_name": self.name, **data}, id=SIGNAL_ID))

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down_for:
            self.down_for -= 1
            raise httpx.ConnectError("connection refused", request=request)
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return httpx.Response(401, json={"error_code": 401, "message": "missing or wrong bearer token"})
        path, params = request.url.path, request.url.params
        if path == "/status":
            return httpx.Response(200, json=self.status().to_json())
        if path == "/notifications":
            return httpx.Response(200, json=self.page(params.get("cursor"), int(params.get("limit", 1000))).to_json())
        if path == "/position":
            return httpx.Response(200, json=self.position(params.get("target")).to_json())
        if path == "/offsets":
            entries = [OffsetEntry({"server": "shop"}, {"lsn": 16})]
            return httpx.Response(200, json={"offsets": [e.to_json() for e in entries]})
        if path == "/offsets/flush" and request.method == "POST" and self.flushable:
            self.committed = self.delivered  # what was delivered is committed at once
            return httpx.Response(200, json={"committed": True, "offsets": []})
        if path == f"/connectors/{self.name}":
            return httpx.Response(200, json={"name": self.name, "config": {"topic.prefix": "shop", "name": self.name}})
        return httpx.Response(404, json={"error_code": 404, "message": f"no route {path}"})

    def status(self) -> InstanceStatus:
        tasks = tuple(TaskStatus(f"{self.name}-{i}") for i in range(self.tasks))
        return InstanceStatus(self.name, "run-1", "POLLING_TASKS", "streaming", tasks=tasks)

    def page(self, cursor: str | None, limit: int) -> NotificationPage:
        start = int(cursor.rpartition(":")[2]) if cursor else 0
        items = self.notifications[start : start + limit]
        return NotificationPage("run-1", f"run-1:{start + len(items)}", tuple(items))

    def position(self, target: str | None) -> InstancePosition:
        def lsn(text: str) -> int:
            return int(text.split("/")[1], 16)

        reached = None if target is None else lsn(self.committed) >= lsn(target)
        caught_up = lsn(self.committed) >= lsn(self.current)
        task = TaskPosition(
            f"{self.name}-0",
            "streaming",
            {"server": "shop"},
            self.committed,
            self.current,
            lsn(self.current) - lsn(self.committed),
            caught_up,
            reached,
        )
        return InstancePosition("streaming", "bytes", task.lag, caught_up, target, reached, (task,))


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    """The recorded API behind connection ``cdc_unit`` (its password is the API's token)."""
    fake = FakeApi()
    connect(monkeypatch, fake, TOKEN)
    return fake


def connect(monkeypatch: pytest.MonkeyPatch, fake: FakeApi, token: str, login: str = "shop") -> None:
    conn = {"conn_type": "cdc_engine", "host": "http://127.0.0.1:8765", "login": login, "password": token}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps(conn))

    async def backend(hook: CdcEngineHook) -> AsyncApiBackend:
        settings = await hook.asettings()
        assert settings.url is not None
        client = AsyncEngineClient(settings.url, settings.token, transport=httpx.MockTransport(fake.handler))
        return AsyncApiBackend(client, expected=settings.instance, conn_id=hook.cdc_conn_id)

    monkeypatch.setattr(CdcEngineHook, "get_async_backend", backend)


def events(trigger: CdcEngineTrigger) -> list[dict[str, Any]]:
    """Every event the trigger yields (it must be exactly one)."""

    async def collect() -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    return asyncio.run(asyncio.wait_for(collect(), 30))


def snapshot_trigger(**kwargs: Any) -> CdcSnapshotTrigger:
    return CdcSnapshotTrigger(CONN, SIGNAL_ID, **{"poll_interval": 0.01, **kwargs})


# -- serialization -----------------------------------------------------------------------------
TRIGGERS: list[Callable[[], CdcEngineTrigger]] = [
    lambda: CdcSnapshotTrigger(CONN, SIGNAL_ID, stall_timeout=30, accept_statuses=["SUCCEEDED", "EMPTY"], cursor="r:3"),
    lambda: CdcOffsetTrigger(CONN, target="current", poll_interval=2),
    lambda: CdcOffsetTrigger(CONN, target="0/16B3748"),
    lambda: CdcConsumerLagTrigger(
        CONN, "spark-apply", max_lag=10, topics=["shop.public.orders"], kafka_conn_id="kafka"
    ),
]


@pytest.mark.parametrize("build", TRIGGERS)
def test_a_trigger_serializes_to_its_own_class_and_json_kwargs_without_secrets(
    build: Callable[[], CdcEngineTrigger], api: FakeApi
) -> None:
    trigger = build()
    path, kwargs = trigger.serialize()
    module, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(module), name) is type(trigger)
    assert json.loads(json.dumps(kwargs)) == kwargs  # JSON primitives only
    assert type(trigger)(**kwargs).serialize() == (path, kwargs)
    assert kwargs["cdc_conn_id"] == CONN and TOKEN not in json.dumps(kwargs)


# -- the snapshot trigger ----------------------------------------------------------------------
def test_a_completed_snapshot_is_one_success_event_with_rows_prefix_and_offsets(
    api: FakeApi, capfd: pytest.CaptureFixture[str]
) -> None:
    api.publish("STARTED", data_collections="public.orders")
    api.publish(
        "IN_PROGRESS",
        current_collection_in_progress="public.orders",
        rows_scanned="100",
        estimated_total_rows="200",
        eta_seconds="3",
    )
    api.publish(
        "TABLE_SCAN_COMPLETED", scanned_collection="public.orders", total_rows_scanned="200", status="SUCCEEDED"
    )
    api.publish("COMPLETED")
    [event] = events(snapshot_trigger())
    assert event["status"] == "success"
    assert event["rows"] == {"public.orders": 200} and event["topic_prefix"] == "shop"
    assert event["offsets"] == [{"partition": {"server": "shop"}, "offset": {"lsn": 16}, "position": "0/10"}]
    logged = "".join(capfd.readouterr())  # Airflow's structlog writes the trigger's log lines there
    assert "public.orders, 100 of ~200 rows, ETA 3s" in logged
    assert TOKEN not in logged + json.dumps(event)


def test_the_trigger_waits_for_a_snapshot_still_running(api: FakeApi) -> None:
    api.publish("STARTED", data_collections="public.orders")
    trigger = snapshot_trigger()

    async def scenario() -> tuple[Any, Any]:
        first = await trigger.poll()
        api.publish(
            "TABLE_SCAN_COMPLETED", scanned_collection="public.orders", total_rows_scanned="1", status="SUCCEEDED"
        )
        api.publish("COMPLETED")
        second = await trigger.poll()
        await trigger.cleanup()
        return first, second

    first, second = asyncio.run(scenario())
    assert first is None and second["status"] == "success"
    # The second look read only what followed the first one's cursor.
    cursors = [r.url.params.get("cursor") for r in api.requests if r.url.path == "/notifications"]
    assert cursors[0] is None and "run-1:1" in cursors


@pytest.mark.parametrize(
    ("kind", "data", "expected"),
    [
        ("ABORTED", {}, "was ABORTED"),
        (
            "TABLE_SCAN_COMPLETED",
            {"scanned_collection": "public.orders", "status": "SQL_EXCEPTION"},
            "table public.orders ended with status SQL_EXCEPTION",
        ),
    ],
)
def test_an_aborted_or_failed_table_is_one_failed_event(
    api: FakeApi, kind: str, data: dict[str, str], expected: str
) -> None:
    api.publish("STARTED")
    api.publish(kind, **data)
    [event] = events(snapshot_trigger())
    assert event["status"] == "failed" and expected in event["message"] and event["retriable"] is False


def test_a_stalled_snapshot_is_one_failed_event(api: FakeApi) -> None:
    api.publish("STARTED")
    [event] = events(snapshot_trigger(stall_timeout=0.2))
    assert event["status"] == "failed" and "no progress for" in event["message"]


def test_a_wrong_token_fails_naming_the_fix_and_not_the_token(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    connect(monkeypatch, api, wrong)
    [event] = events(snapshot_trigger())
    assert event["status"] == "error" and event["retriable"] is False
    assert "refused the token of connection 'cdc_unit'" in event["message"] and "api.token" in event["message"]
    logged = "".join(capfd.readouterr())
    assert wrong not in json.dumps(event) + logged and TOKEN not in logged


def test_another_instance_at_the_address_fails_naming_both(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    connect(monkeypatch, api, TOKEN, login="orders")
    [event] = events(snapshot_trigger())
    assert event["status"] == "error"
    assert "serves instance 'shop', not 'orders'" in event["message"]


def test_an_instance_that_comes_back_is_waited_for(api: FakeApi) -> None:
    api.down_for = 3
    api.publish("STARTED")
    api.publish("COMPLETED")
    [event] = events(snapshot_trigger(unavailable_timeout=30))
    assert event["status"] == "success"


def test_an_instance_that_does_not_answer_ends_in_a_retriable_error_naming_the_fix(api: FakeApi) -> None:
    api.down_for = -1
    [event] = events(snapshot_trigger(unavailable_timeout=0.2))
    assert event["status"] == "error" and event["retriable"] is True
    assert "does not answer at http://127.0.0.1:8765" in event["message"]
    assert "CdcStartEngineOperator" in event["message"]
    assert len(api.requests) >= 2  # asked again meanwhile


def test_an_undefined_connection_fails_naming_the_fix(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(f"AIRFLOW_CONN_{CONN.upper()}")
    [event] = events(snapshot_trigger())
    assert event["status"] == "error" and "AIRFLOW_CONN_" in event["message"]


def test_cleanup_closes_the_client(api: FakeApi) -> None:
    api.publish("STARTED")
    trigger = snapshot_trigger()

    async def scenario() -> tuple[bool, bool]:
        await trigger.poll()
        client = trigger._client
        assert client is not None
        await trigger.cleanup()
        return trigger._client is None, client.client._http.is_closed  # type: ignore[attr-defined]

    assert asyncio.run(scenario()) == (True, True)


# -- the offset trigger ------------------------------------------------------------------------
def test_current_is_fixed_at_the_first_look_and_reached_later(api: FakeApi) -> None:
    trigger = CdcOffsetTrigger(CONN, target="current", poll_interval=0.01)

    async def scenario() -> list[Any]:
        looks = [await trigger.poll()]
        api.current = "0/40"  # the source moves on: the target does not
        looks.append(await trigger.poll())
        api.committed = "0/20"
        looks.append(await trigger.poll())
        await trigger.cleanup()
        return looks

    first, second, third = asyncio.run(scenario())
    assert first is None and second is None
    assert third["status"] == "success" and third["positions"][0]["target"] == "0/20"
    targets = [r.url.params.get("target") for r in api.requests if r.url.path == "/position"]
    assert targets == [None, "0/20", "0/20", "0/20"]


def test_a_position_target_goes_to_the_engine_as_written(api: FakeApi) -> None:
    api.committed = "0/30"
    [event] = events(CdcOffsetTrigger(CONN, target="0/2A", poll_interval=0.01))
    assert event["status"] == "success" and event["target"] == "0/2A"
    assert [r.url.params.get("target") for r in api.requests if r.url.path == "/position"] == ["0/2A"]


# -- the consumer-lag trigger ------------------------------------------------------------------
def test_the_lag_is_measured_off_the_event_loop(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    measured_in: list[threading.Thread] = []
    lags = iter([20, 3])

    def measure(self: ConsumerLag) -> GroupLag:
        measured_in.append(threading.current_thread())
        total = next(lags)
        return GroupLag(self.group_id, total, {"shop.public.orders:0": total})

    monkeypatch.setattr(ConsumerLag, "measure", measure)
    monkeypatch.setattr(ConsumerLag, "close", lambda self: None)
    api_config = {"topic.prefix": "shop", "sink.kafka.producer.bootstrap.servers": "127.0.0.1:9092"}
    original = api.handler

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/connectors/shop":
            return httpx.Response(200, json={"name": "shop", "config": api_config})
        return original(request)

    api.handler = handler  # type: ignore[method-assign]
    [event] = events(CdcConsumerLagTrigger(CONN, "apply", max_lag=5, poll_interval=0.01))
    assert event["status"] == "success" and event["lag"]["total"] == 3
    assert measured_in and all(t is not threading.main_thread() for t in measured_in)


def test_brokers_that_do_not_answer_end_in_a_retriable_error_naming_the_fix(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka.errors import KafkaTimeoutError

    def measure(self: ConsumerLag) -> GroupLag:
        raise KafkaTimeoutError("no broker answered")

    monkeypatch.setattr(ConsumerLag, "measure", measure)
    monkeypatch.setattr(ConsumerLag, "close", lambda self: None)
    kafka = {"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:1"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_UNIT", json.dumps(kafka))
    trigger = CdcConsumerLagTrigger(
        CONN, "apply", kafka_conn_id="kafka_unit", poll_interval=0.01, unavailable_timeout=0.2
    )
    [event] = events(trigger)
    assert event["status"] == "error" and event["retriable"] is True
    assert "no broker answered" in event["message"] and "check the brokers" in event["message"]


def test_the_offset_trigger_asks_the_instance_to_commit_what_it_delivered(api: FakeApi) -> None:
    """Everything up to the target is delivered but not committed (the flush interval is a
    minute by default): the trigger asks for a commit (POST /offsets/flush) and succeeds at
    its first look instead of waiting for the interval."""
    api.delivered, api.flushable = "0/30", True
    [event] = events(CdcOffsetTrigger(CONN, target="0/20", poll_interval=3600))
    assert event["status"] == "success"
    assert any(r.url.path == "/offsets/flush" and r.method == "POST" for r in api.requests)
