"""A fault the engine retries is visible while it retries (issue: "while the engine retries a
fault, a user must see it"): an instance streams a real PostgreSQL through its control API; the
server is stopped the hard way (``pg_ctl stop -m immediate``); ``GET /status`` must then say
``health: RETRYING`` with the connection problem as its cause (the engine's ``state`` stays
POLLING_TASKS: it recovers on its own), and RUNNING again once the server is back.

Each test has its own PostgreSQL server: stopping the session's would break the other tests.
An instance whose server does not answer at all (nothing listens on its port) retries its start:
``airflow-cdc status`` and ``engine status`` show that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.ports import free_port
from airflow_cdc.local.postgres import PostgresServer, _as_postgres

from .pg_support import engine_config

pytestmark = pytest.mark.integration

TOKEN = "s3cret"


@pytest.fixture
def own_pg() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        with server.connect() as conn:
            conn.execute("create table t (id int primary key, v text)")
            conn.execute("insert into t select g, 'row ' || g from generate_series(1, 100) g")
        yield server


class Serving:
    """An instance run in this process with its control API, stopped on the way out."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.instance = EngineInstance(config)
        self.thread = threading.Thread(target=self.instance.run, daemon=True)

    def __enter__(self) -> Serving:
        self.thread.start()
        wait_until(lambda: self.instance.api_url is not None, 30, "the control API")
        return self

    def status(self) -> dict[str, Any]:
        """``GET /status`` as a client reads it."""
        answer = httpx.get(f"{self.instance.api_url}/status", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        answer.raise_for_status()
        body: dict[str, Any] = answer.json()
        return body

    def committed(self) -> int:
        return sum(task["committed_records"] for task in self.status()["tasks"])

    def __exit__(self, *exc: object) -> None:
        self.instance.request_stop()
        self.thread.join(60)


def streaming(server: PostgresServer, tmp_path: Path) -> Serving:
    config = engine_config(
        server,
        "postgres",
        **{
            "name": "retrying",
            "table.include.list": "public.t",
            "state.dir": str(tmp_path / "state"),
            "sink.type": "changelog",
            "offset.storage": "file",
            "api.token": TOKEN,
            # Short backoff: the test sees the retries, and the recovery, within seconds.
            "errors.retry.delay.initial.ms": 100,
            "errors.retry.delay.max.ms": 500,
        },
    )
    return Serving(config)


def stop_immediately(server: PostgresServer) -> None:
    """``pg_ctl stop -m immediate``: the server ends every connection at once, as a crash does."""
    assert server.data_dir is not None
    subprocess.run(
        [str(server.program("pg_ctl")), "stop", "-D", str(server.data_dir), "-m", "immediate", "-w", "-t", "30"],
        check=True,
        capture_output=True,
        cwd=server.directory,
        **_as_postgres(),
    )
    wait_until(lambda: not server.running, 30, "the postmaster gone")


def stream_then_lose_the_server(server: PostgresServer, serving: Serving) -> dict[str, Any]:
    """The instance streams (the snapshot's 100 rows and a change committed, RUNNING), then the
    server goes away; returns the first status that says RETRYING."""
    wait_until(lambda: serving.committed() >= 100 and serving.status()["health"] == "RUNNING", 60, "streaming")
    with server.connect() as conn:
        conn.execute("insert into t values (101, 'streamed')")
    wait_until(lambda: serving.committed() >= 101, 30, "the streamed change committed")
    stop_immediately(server)
    status: dict[str, Any] = wait_until(
        lambda: (now := serving.status())["health"] == "RETRYING" and now, 60, "health RETRYING"
    )
    return status


def test_a_lost_postgresql_server_shows_as_retrying_with_its_cause(own_pg: PostgresServer, tmp_path: Path) -> None:
    with streaming(own_pg, tmp_path) as serving:
        status = stream_then_lose_the_server(own_pg, serving)
        # The engine's state keeps its meaning (sensors and clients parse it): still polling.
        assert status["state"] == "POLLING_TASKS" and status["error"] is None, status
        cause = status["cause"]
        assert cause.startswith("task retrying-0 poll: "), cause
        assert "connection" in cause.lower(), cause
        [task] = status["tasks"]
        retrying = task["retrying"]
        assert retrying["what"] == "poll" and retrying["cause"] in cause, retrying
        assert retrying["attempt"] >= 1 and retrying["next_attempt_ms"] >= retrying["since_ms"] > 0, retrying
        # It goes on retrying (and counting) while the server is away; nothing fails.
        later = wait_until(
            lambda: (now := serving.status())["tasks"][0]["retrying"]["attempt"] > retrying["attempt"] and now,
            30,
            "another attempt",
        )
        assert later["health"] == "RETRYING" and later["tasks"][0]["retrying"]["since_ms"] == retrying["since_ms"]
        assert later["error"] is None


def test_once_postgresql_is_back_the_instance_runs_again(own_pg: PostgresServer, tmp_path: Path) -> None:
    with streaming(own_pg, tmp_path) as serving:
        stream_then_lose_the_server(own_pg, serving)
        own_pg.start()  # the same cluster, port and data
        with own_pg.connect() as conn:
            conn.execute("insert into t values (102, 'after the restart')")
        back = wait_until(
            lambda: (now := serving.status())["health"] == "RUNNING" and serving.committed() >= 102 and now,
            60,
            "RUNNING again, the new change committed",
        )
        assert back["cause"] is None and back["tasks"][0]["retrying"] is None, back


def refused_config(tmp_path: Path) -> dict[str, Any]:
    """A PostgreSQL source on a port where nothing listens: the task's start is retried."""
    nobody = type("Nobody", (), {"host": "127.0.0.1", "port": free_port(), "user": "postgres"})()
    return engine_config(
        nobody,
        "shop",
        **{
            "name": "refused",
            "state.dir": str(tmp_path / "state"),
            "sink.type": "changelog",
            "api.token": TOKEN,
            "errors.retry.delay.initial.ms": 100,
            "errors.retry.delay.max.ms": 500,
        },
    )


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CDC_ENGINE_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_cli_shows_an_instance_retrying_and_the_cause(tmp_path: Path) -> None:
    config = refused_config(tmp_path)
    (tmp_path / "refused.yaml").write_text(yaml.safe_dump(config))
    with Serving(config) as serving:
        wait_until(lambda: serving.status()["health"] == "RETRYING", 60, "health RETRYING")
        url = str(serving.instance.api_url)

        shown = cli("status", "--url", url)
        assert shown.returncode == 0, shown.stderr
        head, _, retrying = shown.stdout.splitlines()[:3]
        assert head.split()[1:3] == ["(refused)", "retrying"], shown.stdout
        assert retrying.startswith("retrying since "), shown.stdout
        cause = "task refused-0 start: cannot connect to PostgreSQL: connection failed: connection to server at"
        assert cause in retrying and "Connection refused" in retrying, shown.stdout
        assert "(if it persists: is the database (or broker) up and reachable" in shown.stdout

        as_json = cli("status", "--url", url, "--json")
        view = json.loads(as_json.stdout)
        assert view["health"] == "retrying" and view["state"] == "STARTING_TASKS", view
        assert view["retrying"]["what"] == "start" and view["retrying"]["attempt"] >= 1, view
        assert view["tasks"][0]["retrying"]["cause"] in view["cause"]

        engine_status = cli("engine", "status", "--config", str(tmp_path / "refused.yaml"))
        status = json.loads(engine_status.stdout)
        assert (status["health"], status["state"]) == ("RETRYING", "STARTING_TASKS"), status
        assert status["cause"].startswith("task refused-0 start: cannot connect to PostgreSQL"), status
