"""Helpers of the Airflow-layer integration tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_cdc.engine.notifications import Notification
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.instance_files import is_running
from airflow_cdc.engine.testing import wait_until


def task_context() -> dict[str, Any]:
    """What the operators read of a task's context."""
    return {"outlet_events": OutletEventAccessors()}


def running(props: dict[str, Any]) -> bool:
    return is_running(Path(props["state.dir"]))


def notifications_of(client: EngineClient, signal_id: str) -> list[Notification]:
    """Every notification the instance kept about ``signal_id``."""
    seen: list[Notification] = []
    page = client.notifications()
    while page.notifications:
        seen += [n for n in page.notifications if n.id == signal_id]
        page = client.notifications(page.cursor)
    return seen


def wait_for(client: EngineClient, signal_id: str, kind: str, timeout: float = 60) -> list[Notification]:
    return wait_until(
        lambda: (seen := notifications_of(client, signal_id)) and any(n.type == kind for n in seen) and seen,
        timeout,
        f"{kind} of {signal_id}",
    )


def changelog(state_dir: Path, topic: str) -> list[dict[str, Any]]:
    """The change events (values) the changelog sink wrote to ``topic``."""
    events = []
    for segment in sorted((state_dir / "changelog" / topic).glob("*.jsonl")):
        for line in segment.read_bytes().splitlines():
            value = json.loads(line)["value"]
            if value is not None:
                events.append(value)
    return events


def client_of(xcom: dict[str, Any], token: str) -> EngineClient:
    return EngineClient(str(xcom["api_url"]), token)
