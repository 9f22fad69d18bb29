"""Where a person sees that an instance retries a fault: the control API's models (and an older
server's answers without ``health``), a Debezium connector on Kafka Connect (what its status API
gives, mapped honestly), the view the CDC page and ``airflow-cdc status`` share, and the terminal."""

from __future__ import annotations

import io
import json
from datetime import datetime
from typing import Any

import httpx
from rich.console import Console, RenderableType

from airflow_cdc import console
from airflow_cdc.engine.server.control import status as control_status
from airflow_cdc.engine.server.instance_files import STATUS
from airflow_cdc.engine.server.models import InstanceStatus, Retrying, TaskStatus
from airflow_cdc.monitoring import Monitor
from tests.unit.test_connect_backend import Worker, body_of, ok
from tests.unit.test_monitoring import ReplayedInstance

LOST = "replication connection lost: server closed the connection unexpectedly"
SINCE_MS = 1_700_000_000_000
RETRY = Retrying(LOST, "poll", attempt=4, since_ms=SINCE_MS, next_attempt_ms=SINCE_MS + 4_000)


def retrying_status(**changes: Any) -> InstanceStatus:
    fields: dict[str, Any] = {
        "name": "shop",
        "run_id": "run-1",
        "state": "POLLING_TASKS",
        "phase": "streaming",
        "uptime_s": 60.0,
        "tasks": (TaskStatus("shop-0", polled=10, committed_records=10, retrying=RETRY),),
        "health": "RETRYING",
        "cause": f"task shop-0 poll: {LOST}",
        **changes,
    }
    return InstanceStatus(**fields)


def test_the_status_model_carries_health_cause_and_each_tasks_retry_through_json() -> None:
    status = retrying_status()
    data = status.to_json()
    assert (data["health"], data["cause"], data["state"]) == ("RETRYING", f"task shop-0 poll: {LOST}", "POLLING_TASKS")
    assert data["tasks"][0]["retrying"] == {
        "cause": LOST,
        "what": "poll",
        "attempt": 4,
        "since_ms": 1_700_000_000_000,
        "next_attempt_ms": 1_700_000_004_000,
    }
    assert InstanceStatus.from_json(data) == status


def test_an_answer_without_health_is_judged_from_its_state_error_and_retries() -> None:
    """A server of the previous version sends no ``health``: the client judges it the same way."""
    data = retrying_status().to_json()
    del data["health"], data["cause"]
    judged = InstanceStatus.from_json(data)
    assert (judged.health, judged.cause) == ("RETRYING", f"task shop-0 poll: {LOST}")
    plain = {"name": "shop", "state": "POLLING_TASKS", "tasks": [{"id": "shop-0"}]}
    assert InstanceStatus.from_json(plain).health == "RUNNING"
    assert InstanceStatus.from_json({**plain, "paused": True}).health == "PAUSED"
    assert InstanceStatus.from_json({**plain, "state": "STARTING_TASKS"}).health == "STARTING"
    assert InstanceStatus.from_json({**plain, "state": "STOPPED"}).health == "STOPPED"
    failed = InstanceStatus.from_json({**data, "error": "task shop-0: DecodeError: bad bytes"})
    assert (failed.health, failed.cause) == ("FAILED", "task shop-0: DecodeError: bad bytes")


def test_an_instance_killed_while_it_retried_is_not_shown_retrying(tmp_path: Any) -> None:
    """``engine status`` of an instance whose process is gone: the last status it wrote said
    RETRYING; what it says now is FAILED (DEAD), not that stale health."""
    state = tmp_path / "state"
    state.mkdir()
    (state / STATUS).write_text(json.dumps(retrying_status(pid=1, state_dir=str(state)).to_json()))
    shown = control_status({"name": "shop", "state.dir": str(state)})
    assert (shown["state"], shown["health"]) == ("DEAD", "FAILED")
    assert shown["cause"].startswith("the instance's process ended without stopping"), shown


# -- Debezium on Kafka Connect ----------------------------------------------------------------------


def connector(status: dict[str, Any]) -> InstanceStatus:
    worker = Worker(
        {
            ("GET", "/connectors/orders/status"): ok(status),
            ("GET", "/connectors/orders/config"): "config",
            ("GET", "/connectors/orders/offsets"): "offsets",
        }
    )
    with worker.client() as client:
        return client.status()


def connect_status(connector_state: str, *tasks: dict[str, Any]) -> dict[str, Any]:
    """Connect's status document (built: these states cannot be provoked on demand on a worker)."""
    running = body_of("status_running")
    return {**running, "connector": {**running["connector"], "state": connector_state}, "tasks": list(tasks)}


TRACE = (
    "org.apache.kafka.connect.errors.RetriableException: An exception occurred in the change event producer.\n"
    "\tat io.debezium.pipeline.ErrorHandler.setProducerThrowable(ErrorHandler.java:68)\n"
    "Caused by: org.postgresql.util.PSQLException: Database connection failed when reading from copy\n"
)


def test_a_connect_task_restarting_or_running_with_a_trace_is_retrying() -> None:
    restarting = connector(connect_status("RUNNING", {"id": 0, "state": "RESTARTING", "worker_id": "w:8083"}))
    assert (restarting.health, restarting.state) == ("RETRYING", "POLLING_TASKS")
    assert restarting.cause is not None and restarting.cause.startswith("task orders-0 restart: Kafka Connect does not")
    assert restarting.tasks[0].retrying is not None and restarting.tasks[0].retrying.attempt is None  # not known

    traced = connector(connect_status("RUNNING", {"id": 0, "state": "RUNNING", "worker_id": "w:8083", "trace": TRACE}))
    assert traced.health == "RETRYING" and traced.error is None
    assert traced.cause == (
        "task orders-0 poll: org.apache.kafka.connect.errors.RetriableException: An exception occurred in the change "
        "event producer. (caused by: org.postgresql.util.PSQLException: Database connection failed when reading "
        "from copy)"
    )

    whole = connector(connect_status("RESTARTING"))
    assert whole.health == "RETRYING" and whole.cause is not None and whole.cause.startswith("connector orders restart")


def test_a_connect_connector_running_unassigned_or_failed_is_not_retrying() -> None:
    assert connector(body_of("status_running")).health == "RUNNING"
    unassigned = connector(connect_status("RUNNING", {"id": 0, "state": "UNASSIGNED", "worker_id": "w:8083"}))
    assert unassigned.health == "RUNNING"  # the connector runs; Connect does not say why its task waits
    assert connector(connect_status("UNASSIGNED")).health == "STARTING"
    failed = connector(connect_status("RUNNING", {"id": 0, "state": "FAILED", "worker_id": "w:8083", "trace": TRACE}))
    assert failed.health == "FAILED" and failed.cause is not None and failed.cause.startswith("task 0: ")


# -- what the page and the terminal show ------------------------------------------------------------


def text(renderable: RenderableType) -> str:
    screen = Console(file=io.StringIO(), record=True, width=200, force_terminal=False, color_system=None)
    screen.print(renderable)
    return screen.export_text()


def test_a_retrying_instance_as_the_page_and_the_terminal_show_it() -> None:
    instance = ReplayedInstance()
    instance.status = retrying_status(
        sink={
            "type": "kafka",
            "retrying": Retrying("NoBrokersAvailable", "recovery", 1, 1_700_000_003_000, 0).to_json(),
        }
    )
    view = Monitor("shop", instance.client).observe()
    assert (view.health, view.cause, view.error) == ("retrying", f"task shop-0 poll: {LOST}", None)
    assert view.retrying == RETRY  # the oldest retry: the task's (the sink's began later)
    assert view.tasks[0].retrying == RETRY
    shown = view.to_json()
    assert (shown["health"], shown["cause"], shown["tasks"][0]["retrying"]["attempt"]) == ("retrying", view.cause, 4)

    since = f"{datetime.fromtimestamp(SINCE_MS / 1000):%H:%M:%S}"  # the terminal shows its local time
    table = text(console.instances_table([view]))
    assert table.splitlines()[1].split()[:3] == ["shop", "retrying", "streaming"]
    assert f"shop: retrying since {since}: task shop-0 poll: {LOST} (if it persists: is the database server" in table
    details = text(console.instance_details(view)).splitlines()
    assert details[0] == "shop retrying  POLLING_TASKS · streaming · "
    assert details[2].startswith(f"retrying since {since}: task shop-0 poll: {LOST} (if it persists:")


def test_an_older_instance_without_health_is_judged_for_the_page() -> None:
    data = retrying_status().to_json()
    del data["health"], data["cause"]

    def older(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/status":
            return httpx.Response(200, json=data)
        return httpx.Response(200, json={"run_id": "run-1", "cursor": "run-1:0", "notifications": []})

    from airflow_cdc.engine.server.client import EngineClient

    view = Monitor("shop", lambda: EngineClient("http://e:1", "t", transport=httpx.MockTransport(older))).observe()
    assert view.health == "retrying" and view.cause == f"task shop-0 poll: {LOST}"
