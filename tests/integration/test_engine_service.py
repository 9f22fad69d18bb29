"""The engine as a service (``airflow-cdc engine serve``): a process whose API outlives its engine.
The engine is stopped and started through the API (a DAG's configuration laid over the file's and
kept for the next boot), its offsets are changed through the API while it is stopped (Kafka
Connect's KIP-875), 409 while it runs, and SIGTERM ends the process. A real process, a real
PostgreSQL source: the engine's stop releases the slot, its start takes it again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml

from airflow_cdc.engine.errors import ApiRefusedError
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.server.models import OffsetEntry
from airflow_cdc.engine.testing import wait_until

from .pg_support import engine_config

pytestmark = pytest.mark.integration
TOKEN = "service-token"


@pytest.fixture
def service(pg_server: Any, pg_database: str, tmp_path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table t (id int primary key, v text)")
        conn.execute("insert into t select g, 'v' || g from generate_series(1, 100) g")
    config = {
        **engine_config(pg_server, pg_database),
        "offset.storage": "file",
        "state.dir": str(tmp_path / "state"),
        "api.token": TOKEN,
        "api.port": 0,
        "sink.type": "changelog",
        "offset.flush.interval.ms": 100,
    }
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(config))
    yield path, config


def serve(path: Path, *extra: str) -> subprocess.Popen[bytes]:
    log = open(path.with_suffix(".log"), "ab")  # noqa: SIM115 - the child keeps writing to it
    return subprocess.Popen(
        [sys.executable, "-m", "airflow_cdc.cli", "engine", "serve", "--config", str(path), *extra],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ},
    )


def api(state: Path, process: subprocess.Popen[bytes]) -> EngineClient:
    wait_until(lambda: process.poll() is not None or (read_status(state) or {}).get("pid") == process.pid, 60, "up")
    assert process.poll() is None, "the service exited"
    return EngineClient(str(read_status(state)["api"]), TOKEN)  # type: ignore[index]


def slot_active(pg_server: Any, slot: str) -> bool:
    with pg_server.connect() as conn:
        row = conn.execute("select active from pg_replication_slots where slot_name = %s", (slot,)).fetchone()
    return bool(row and row[0])


def test_the_engine_stops_and_starts_under_a_process_that_stays(
    pg_server: Any, pg_database: str, service: tuple[Path, dict[str, Any]]
) -> None:
    path, config = service
    state = Path(config["state.dir"])
    process = serve(path)
    try:
        with api(state, process) as client:
            wait_until(lambda: client.status().phase == "streaming", 60, "streaming")
            assert slot_active(pg_server, config["slot.name"])
            first_run = client.status().run_id
            with pytest.raises(ApiRefusedError, match="is running: stop it first"):
                client.reset_offsets()
            assert client.stop().state == "STOPPING"
            wait_until(lambda: client.status().state == "STOPPED", 60, "the engine stopped")
            assert process.poll() is None  # the process, and its API, stay
            assert not slot_active(pg_server, config["slot.name"])  # the slot is released
            committed = client.offsets()
            assert committed and "lsn" in committed[0].offset
            # KIP-875 on the stopped engine: seek back to before the snapshot's rows were read.
            partition = committed[0].partition
            client.alter_offsets([OffsetEntry(partition, {**committed[0].offset, "lsn": 1})])
            assert client.offsets()[0].offset["lsn"] == 1
            client.reset_offsets()
            assert client.offsets() == []
            # Started again with a DAG's configuration over the file's.
            assert client.start({"table.include.list": "public.t", "snapshot.mode": "no_data"}).state == "STARTING"
            wait_until(lambda: client.status().phase == "streaming", 60, "streaming again")
            assert client.status().run_id != first_run
            assert client.connector(config["name"])["config"]["snapshot.mode"] == "no_data"
            assert client.start({"table.include.list": "public.t", "snapshot.mode": "no_data"}).state == "RUNNING"
            with pytest.raises(ApiRefusedError, match=r"snapshot\.mode: running 'no_data', asked 'initial'"):
                client.start({"table.include.list": "public.t", "snapshot.mode": "initial"})
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert not slot_active(pg_server, config["slot.name"])
        # A new boot runs with what the last start laid over the file.
        process = serve(path)
        with api(state, process) as client:
            wait_until(lambda: client.status().phase == "streaming", 60, "streaming after a reboot")
            assert client.connector(config["name"])["config"]["snapshot.mode"] == "no_data"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(60)


def test_booted_stopped_it_waits_for_a_start_and_a_reboot_restores_the_last_target_state(
    service: tuple[Path, dict[str, Any]],
) -> None:
    path, config = service
    state = Path(config["state.dir"])
    process = serve(path, "--stopped")
    try:
        with api(state, process) as client:
            status = client.status()
            assert (status.state, status.phase, status.run_id) == ("STOPPED", "stopped", "")
            with pytest.raises(ApiRefusedError, match="is stopped: start it"):
                client.signal("log", {"message": "hello"})
            # Kafka Connect's way: resuming a stopped connector starts it.
            resumed = httpx.put(
                f"{client.url}/connectors/{config['name']}/resume", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert resumed.status_code == 202 and resumed.json()["state"] == "STARTING"
            wait_until(lambda: client.status().phase == "streaming", 60, "started by resume")
            assert client.status().state == "POLLING_TASKS"
        # The target state is kept, as Kafka Connect keeps a connector's: a reboot restores the
        # last one, and --stopped is only the initial one.
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        process = serve(path, "--stopped")
        with api(state, process) as client:
            wait_until(lambda: client.status().phase == "streaming", 60, "started again, as it was left")
            client.stop()
            wait_until(lambda: client.status().state == "STOPPED", 60, "stopped")
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        process = serve(path)
        with api(state, process) as client:
            assert client.status().state == "STOPPED"  # stopped, as it was left
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            assert process.wait(60) == 0
