"""``airflow-cdc status`` finds instances through Airflow's ``cdc_engine`` connections, and keeps
its standard output for the answer (Airflow, once imported, logs to stdout)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from airflow_cdc import cli


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SHOP", json.dumps({"conn_type": "cdc_engine", "host": url}))
    monkeypatch.setenv("AIRFLOW_CONN_CDC_NOWHERE", json.dumps({"conn_type": "cdc_engine"}))
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", "postgresql://user:pw@db:5432/warehouse")
    # What the command sets for its own process, restored afterwards.
    monkeypatch.setenv("AIRFLOW__LOGGING__NAMESPACE_LEVELS", "airflow.models.connection=ERROR")
    return url


def test_status_lists_every_cdc_engine_connection_and_says_what_is_wrong(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", "--json"]) == 0  # a list: exit 0 whatever its instances do
    views = {view["label"]: view for view in json.loads(capsys.readouterr().out)}
    assert set(views) == {"cdc_shop", "cdc_nowhere"}
    assert (views["cdc_shop"]["health"], views["cdc_shop"]["url"]) == ("unreachable", url)
    assert "has neither a host" in views["cdc_nowhere"]["problem"]


def test_status_of_one_connection(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "cdc_shop"]) == 1
    assert capsys.readouterr().out.startswith(f"cdc_shop unreachable: GET {url}/status")
    assert cli.main(["status", "cdc_missing"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "cdc_missing unreachable: AirflowNotFoundException" in out and "(fix: add the connection" in out


def test_airflow_logging_never_reaches_the_json_on_stdout(url: str) -> None:
    """In a process of its own: Airflow configures its logging at import (to stdout)."""
    env = {**os.environ, "AIRFLOW__LOGGING__NAMESPACE_LEVELS": ""}  # its warnings at every lookup
    done = subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", "status", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [view["label"] for view in json.loads(done.stdout)] == ["cdc_nowhere", "cdc_shop"]
    assert done.stderr  # Airflow's lines went there
