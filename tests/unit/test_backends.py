"""Which backend a connection drives, what each declares it can do, and the identity check
every backend runs before acting (ADR 0022). The backends' operations are exercised against
real instances and a real Connect worker by tests/integration/airflow."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from airflow_cdc.backends import EngineBackend, InstanceNotRunningError, open_backend
from airflow_cdc.backends.api import ApiBackend
from airflow_cdc.engine.errors import RefusedError
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.hooks.engine_connection import KAFKA_CONNECT, engine_connection


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump({"name": "shop", "state.dir": str(tmp_path / "state"), "topic.prefix": "shop"}))
    return path


def test_each_connection_kind_gets_its_backend_and_declares_what_it_cannot_do(config_file: Path) -> None:
    local = open_backend(engine_connection("c", extra={"config_path": str(config_file)}), "c")
    service = open_backend(engine_connection("c", host="http://engine:8765"), "c")
    connect = open_backend(
        engine_connection("c", conn_type=KAFKA_CONNECT, host="http://connect:8083", extra={"connector": "shop"}), "c"
    )
    for backend in (local, service, connect):
        assert isinstance(backend, EngineBackend)
    assert local.capabilities.bounded_capture and local.capabilities.api_signals
    assert not service.capabilities.bounded_capture and service.capabilities.api_signals
    assert not connect.capabilities.api_signals and not connect.capabilities.current_position
    assert service.status_url() == "http://engine:8765/status"
    assert connect.status_url() == "http://connect:8083/connectors/shop/status"
    assert local.status_url() == ""  # never started here: no address known yet
    with pytest.raises(RefusedError, match="config_path"):
        service.run_until({}, None)


def test_an_instance_beside_the_worker_that_is_not_running_is_retriable_and_names_the_fix(config_file: Path) -> None:
    backend = open_backend(engine_connection("c", extra={"config_path": str(config_file)}), "c")
    with backend, pytest.raises(InstanceNotRunningError, match="CdcStartEngineOperator"):
        backend.verify()


def test_an_api_serving_another_instance_is_refused_naming_the_connection() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"name": "other", "state": "RUNNING", "phase": "streaming", "tasks": []})

    transport = httpx.MockTransport(answer)
    backend = ApiBackend(lambda: EngineClient("http://engine:1", transport=transport), expected="shop", conn_id="c")
    with backend, pytest.raises(RefusedError, match=r"serves instance 'other', not 'shop'.*connection 'c'"):
        backend.verify()
