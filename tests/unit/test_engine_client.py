"""The control-API client on recorded answers (httpx.MockTransport): typed models, the API's
error messages in the engine's error hierarchy, retriable versus not, sync and async alike.
Against a real instance: tests/integration/test_engine_client.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest

from airflow_cdc.engine.errors import ApiError, ApiRefusedError, ApiUnavailableError, RefusedError, RetriableError
from airflow_cdc.engine.server.api import create_app
from airflow_cdc.engine.server.client import AsyncEngineClient, EngineClient
from airflow_cdc.engine.server.models import (
    InstancePosition,
    InstanceStatus,
    OffsetEntry,
    StateChange,
    TaskPosition,
    TaskStatus,
)

POSITION = InstancePosition(
    phase="streaming",
    lag_unit="bytes",
    lag=40,
    caught_up=False,
    target="0/16B3748",
    reached=True,
    tasks=(
        TaskPosition(
            "pg-0", "streaming", {"server": "shop"}, "0/16B3748", "0/16B3770", 40, caught_up=False, reached=True
        ),
    ),
)
STATUS = InstanceStatus(
    name="pg",
    run_id="0123456789abcdef",
    state="POLLING_TASKS",
    phase="streaming",
    pid=42,
    started_at=1.5,
    uptime_s=2.0,
    connector_class="postgres",
    tasks=(TaskStatus("pg-0", polled=10, committed_records=9, commits=2, source={"lag_bytes": 40.0}),),
    sink={"type": "changelog", "delivered": 9},
    api="http://127.0.0.1:1",
    state_dir="/tmp/pg",
    position=POSITION,
)


def roundtrip(value: dict[str, Any]) -> Any:
    return orjson.loads(orjson.dumps(value))


def test_models_read_back_what_the_server_writes() -> None:
    assert InstanceStatus.from_json(roundtrip(STATUS.to_json())) == STATUS
    assert InstancePosition.from_json(roundtrip(POSITION.to_json())) == POSITION
    entry = OffsetEntry({"server": "shop"}, {"lsn": 1})
    assert OffsetEntry.from_json(roundtrip(entry.to_json())) == entry
    assert StateChange.from_json({"name": "pg", "state": "PAUSED"}) == StateChange("pg", "PAUSED")


def test_a_status_from_an_older_or_newer_server_is_still_read() -> None:
    older = {"name": "pg", "state": "STOPPED", "tasks": [{"id": "pg-0", "polled": 3}], "later": {"x": 1}}
    status = InstanceStatus.from_json(older)
    assert (status.run_id, status.phase, status.position, status.tasks[0].polled) == ("", "", None, 3)
    assert not status.running


Handler = Callable[[httpx.Request], httpx.Response]


def answer(status: int, body: Any = None, text: str | None = None) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        if text is not None:
            return httpx.Response(status, text=text)
        return httpx.Response(status, json=body)

    return handle


def sync_client(handler: Handler) -> EngineClient:
    return EngineClient("http://engine:1/", "t0k", transport=httpx.MockTransport(handler))


def test_each_operation_sends_its_request_and_reads_the_model() -> None:
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        bodies: dict[str, Any] = {
            "/status": STATUS.to_json(),
            "/position": POSITION.to_json(),
            "/offsets": {"offsets": [{"partition": {"server": "shop"}, "offset": {"lsn": 5}}]},
            "/notifications": {"run_id": "r", "cursor": "r:1", "notifications": [], "reset": False},
            "/signals": {"id": "sig-1"},
            "/pause": {"name": "pg", "state": "PAUSED"},
            "/health": {"status": "UP"},
        }
        if request.url.path == "/metrics":
            return httpx.Response(200, text="airflow_cdc_engine_state 1.0\n")
        return httpx.Response(200, json=bodies[request.url.path])

    with sync_client(handle) as client:
        assert client.status() == STATUS
        assert client.position(target="0/16B3748") == POSITION
        assert client.offsets() == [OffsetEntry({"server": "shop"}, {"lsn": 5})]
        assert client.notifications("r:0", limit=5).cursor == "r:1"
        assert client.signal("execute-snapshot", {"data-collections": ["public.t"]}, signal_id="sig-1") == "sig-1"
        assert client.pause() == StateChange("pg", "PAUSED")
        assert client.health() == "UP"
        assert client.metrics().startswith("airflow_cdc_engine_state")
    assert all(r.headers["Authorization"] == "Bearer t0k" for r in sent)
    assert sent[1].url.params["target"] == "0/16B3748"
    assert dict(sent[3].url.params) == {"cursor": "r:0", "limit": "5"}
    assert json.loads(sent[4].content) == {
        "type": "execute-snapshot",
        "data": {"data-collections": ["public.t"]},
        "id": "sig-1",
    }
    assert (sent[5].method, sent[5].url.path) == ("POST", "/pause")


@pytest.mark.parametrize(
    ("status", "error", "retriable"),
    [
        (400, ApiError, False),
        (401, ApiError, False),
        (404, ApiError, False),
        (409, ApiRefusedError, False),
        (500, ApiError, False),
        (502, ApiUnavailableError, True),
        (503, ApiUnavailableError, True),
    ],
)
def test_errors_carry_the_apis_message_and_say_whether_to_try_again(
    status: int, error: type[ApiError], retriable: bool
) -> None:
    client = sync_client(answer(status, {"error_code": status, "message": "unknown signal type 'explode'"}))
    with pytest.raises(error) as raised:
        client.signal("explode")
    assert type(raised.value) is error
    assert raised.value.status == status and raised.value.message == "unknown signal type 'explode'"
    assert isinstance(raised.value, RetriableError) is retriable
    assert isinstance(raised.value, RefusedError) is (status == 409)
    assert f"POST http://engine:1/signals -> {status}: unknown signal type" in str(raised.value)


def test_an_answer_that_is_not_the_apis_is_reported_with_its_text() -> None:
    with pytest.raises(ApiUnavailableError, match="Bad Gateway: '<html>proxy</html>'"):
        sync_client(answer(502, text="<html>proxy</html>")).status()


def test_an_instance_that_does_not_answer_is_retriable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    for handler in (refuse, slow):
        with pytest.raises(ApiUnavailableError) as raised:
            sync_client(handler).status()
        assert raised.value.status == 0 and isinstance(raised.value, RetriableError)
        assert "GET http://engine:1/status: " in str(raised.value)


def test_the_async_client_has_the_same_operations_and_errors() -> None:
    async def scenario() -> None:
        async with AsyncEngineClient(
            "http://engine:1", "t0k", transport=httpx.MockTransport(answer(200, STATUS.to_json()))
        ) as client:
            assert await client.status() == STATUS
        failing = AsyncEngineClient(
            "http://engine:1", transport=httpx.MockTransport(answer(409, {"error_code": 409, "message": "running"}))
        )
        with pytest.raises(ApiRefusedError, match="running"):
            await failing.stop()
        await failing.aclose()

    asyncio.run(scenario())


def test_importing_the_client_loads_no_kafka_client_nor_database_driver() -> None:
    code = (
        "import sys\n"
        "import airflow_cdc.engine.server.client\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('kafka', 'confluent_kafka', 'psycopg', 'pymysql')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_generated_openapi_document_asks_a_bearer_token_of_every_route_but_two() -> None:
    """The document is generated from the routes (no hand-kept copy to drift): every route but
    /health and /openapi.json is documented with the bearer scheme."""
    instance = SimpleNamespace(name="shop", status=dict)
    document = create_app(instance, "a-token", lambda: "http://127.0.0.1:1").openapi()  # type: ignore[arg-type]
    operations = {(method.upper(), path): op for path, item in document["paths"].items() for method, op in item.items()}
    assert ("POST", "/signals") in operations and ("GET", "/connectors/{name}/status") in operations
    assert ("POST", "/offsets/flush") in operations and ("GET", "/metrics") in operations
    public = {key for key, op in operations.items() if not op.get("security")}
    assert public == {("GET", "/health")}  # /openapi.json is served outside the document
    with pytest.raises(Exception, match="needs a token"):
        create_app(instance, "", lambda: "")  # type: ignore[arg-type]
