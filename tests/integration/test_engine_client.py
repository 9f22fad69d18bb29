"""The control-API client against real engine instances: typed answers, errors, positions, and
notification cursors that survive an instance restart (graceful and kill -9) without losing or
repeating a notification."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.errors import ApiError, ApiUnavailableError, RetriableError
from airflow_cdc.engine.notifications import Notification
from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.client import AsyncEngineClient, EngineClient
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.server.models import OffsetEntry, StateChange
from airflow_cdc.engine.testing import wait_until
from tests.integration.instance_cleanup import no_instance_left_running  # noqa: F401 (autouse)
from tests.integration.pg_support import create_load_table
from tests.integration.test_engine_instance import cli, pg_instance_config, synthetic_config

pytestmark = pytest.mark.integration


class Running:
    """An instance run on a thread of the test process (its API is real HTTP all the same)."""

    def __init__(self, props: dict[str, Any]) -> None:
        self.instance = EngineInstance(props)
        self.exit_code: list[int] = []
        self.thread = threading.Thread(target=lambda: self.exit_code.append(self.instance.run()))

    def __enter__(self) -> Running:
        self.thread.start()
        directory = self.instance.directory
        wait_until(
            lambda: (
                (read_status(directory) or {}).get("run_id") == self.instance.run_id
                and read_status(directory)["state"] == "POLLING_TASKS"
            ),  # type: ignore[index]
            30,
            "polling",
        )
        return self

    @property
    def url(self) -> str:
        assert self.instance.api_url is not None
        return self.instance.api_url

    def __exit__(self, *exc: object) -> None:
        self.instance.request_stop()
        self.thread.join(60)


def test_the_client_drives_an_instance_with_typed_answers_and_the_apis_errors(tmp_path: Path) -> None:
    with Running(synthetic_config(tmp_path, **{"synthetic.max.events": 500})) as running:
        client = EngineClient(running.url, "s3cret")
        assert client.health() == "UP"
        status = wait_until(
            lambda: (s := client.status()).position and s.position.caught_up and s.tasks[0].commits and s,
            30,
            "caught up",
        )
        assert (status.name, status.run_id, status.phase, status.running) == (
            "syn-instance",
            running.instance.run_id,
            "streaming",
            True,
        )
        assert status.position is not None and status.position.tasks[0].committed == "499"
        assert status.tasks[0].polled == 500 and status.connector_class == "synthetic"
        assert client.position(target="499").reached is True
        assert client.position(target="500").reached is False
        with pytest.raises(ApiError) as bad_target:
            client.position(target="0/16B3748")
        assert bad_target.value.status == 400 and "is not an event number like 99" in bad_target.value.message
        assert client.offsets() == [OffsetEntry({"server": "syn", "task": 0}, {"seq": 499})]
        page = client.notifications()
        assert (page.run_id, page.cursor, page.notifications, page.reset) == (
            status.run_id,
            f"{status.run_id}:0",
            (),
            False,
        )
        with pytest.raises(ApiError) as bad_signal:
            client.signal("explode")
        assert bad_signal.value.status == 400 and "unknown signal type" in bad_signal.value.message
        with pytest.raises(ApiError) as bad_limit:
            client.notifications(limit=0)
        assert bad_limit.value.status == 400 and "limit" in bad_limit.value.message
        assert client.pause() == StateChange("syn-instance", "PAUSED")
        wait_until(lambda: client.status().paused, 30, "paused")
        assert client.resume() == StateChange("syn-instance", "RUNNING")
        assert 'airflow_cdc_engine_state{name="syn-instance",state="POLLING_TASKS"} 1.0' in client.metrics()
        with EngineClient(running.url, "wrong") as intruder, pytest.raises(ApiError) as refused:
            intruder.status()
        assert refused.value.status == 401 and not isinstance(refused.value, RetriableError)

        async def from_a_trigger() -> str:
            async with AsyncEngineClient(running.url, "s3cret") as aclient:
                return (await aclient.status()).run_id

        assert asyncio.run(from_a_trigger()) == status.run_id
        assert client.stop() == StateChange("syn-instance", "STOPPING")
        running.thread.join(60)
        assert running.exit_code == [0]
        with pytest.raises(ApiUnavailableError):  # retriable: a restarted instance may answer again
            client.status()
        client.close()


def test_a_cursor_of_a_stopped_run_is_recognised_by_the_next_run(tmp_path: Path) -> None:
    props = synthetic_config(tmp_path, **{"synthetic.max.events": 10})
    with Running(props) as first:
        cursor = EngineClient(first.url, "s3cret").notifications().cursor
    with Running(props) as second:
        client = EngineClient(second.url, "s3cret")
        page = client.notifications(cursor)
        assert page.run_id == second.instance.run_id != first.instance.run_id
        assert (page.reset, page.cursor) == (False, f"{second.instance.run_id}:0")
        assert client.notifications("someone-elses-run:7").reset


def read_after(client: EngineClient, cursor: str | None) -> tuple[list[Notification], str]:
    """Every notification after ``cursor``, a small page at a time."""
    seen: list[Notification] = []
    while True:
        page = client.notifications(cursor, limit=3)
        assert not page.reset
        seen += page.notifications
        if not page.notifications:
            return seen, page.cursor
        cursor = page.cursor


def initial_snapshot(items: list[Notification]) -> list[tuple[str, dict[str, str]]]:
    return [(n.type, dict(n.additional_data)) for n in items if n.aggregate_type == "Initial Snapshot"]


def test_notifications_and_positions_across_a_kill_9_restart(tmp_path: Path, pg_server: Any, pg_database: str) -> None:
    """A deferred sensor's view: it holds a cursor and polls now and then; the instance is killed
    and started again in between. Nothing published after its cursor is lost, nothing repeated."""
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 10)
    config = pg_instance_config(tmp_path, pg_server, pg_database)
    props = load_config_file(config)
    assert cli("engine", "start", "--config", str(config)).returncode == 0
    sensor = control.client_for(props)
    run_1 = sensor.status().run_id

    # The initial snapshot, as Debezium tells it; COMPLETED once its rows are committed.
    first = wait_until(
        lambda: (seen := read_after(sensor, None)) and any(n.type == "COMPLETED" for n in seen[0]) and seen,
        60,
        "initial snapshot COMPLETED",
    )
    seen_1, cursor = first
    shop = {"connector_name": "shop"}
    assert initial_snapshot(seen_1) == [
        ("STARTED", shop),
        ("IN_PROGRESS", {**shop, "current_collection_in_progress": "public.t", "data_collections": "public.t"}),
        (
            "TABLE_SCAN_COMPLETED",
            {
                **shop,
                "scanned_collection": "public.t",
                "data_collections": "public.t",
                "total_rows_scanned": "10",
                "status": "SUCCEEDED",
            },
        ),
        ("COMPLETED", shop),
    ]

    # Positions as the codec prints them, and a target the sensor waits for.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into t values (11, 'new', 11)")
        lsn = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
    reached = wait_until(lambda: (p := sensor.position(target=lsn)).reached and p, 30, f"{lsn} committed")
    assert reached.phase == "streaming" and reached.lag_unit == "bytes" and reached.target == lsn.upper()
    task = reached.tasks[0]
    assert task.partition == {"server": "shop"} and task.committed and "/" in task.committed
    wait_until(lambda: sensor.position().caught_up, 60, "caught up while idle")

    # Published after the sensor's last look, then the instance dies.
    snapshot_id = sensor.signal("execute-snapshot", {"data-collections": ["public.t"]})
    everything = control.client_for(props)  # another reader, from the start
    wait_until(
        lambda: any(n.id == snapshot_id and n.type == "COMPLETED" for n in read_after(everything, None)[0]),
        60,
        "incremental snapshot COMPLETED",
    )
    os.kill(int(sensor.status().pid or 0), signal.SIGKILL)
    dead = wait_until(lambda: (s := control.status(props))["state"] == "DEAD" and s, 30, "killed")
    assert (dead["phase"], dead["run_id"]) == ("stopped", run_1)  # the run that died, from instance.json
    with pytest.raises(ApiUnavailableError):
        sensor.status()

    assert cli("engine", "start", "--config", str(config)).returncode == 0
    sensor = control.client_for(props)  # the new run has a new port
    run_2 = sensor.status().run_id
    assert run_2 != run_1
    wait_until(lambda: initial_snapshot(read_after(sensor, cursor)[0])[-1:] == [("SKIPPED", shop)], 60, "SKIPPED")

    after, end = read_after(sensor, cursor)
    whole, _ = read_after(sensor, None)
    key = [(n.id, n.type, n.timestamp, tuple(sorted(n.additional_data.items()))) for n in whole]
    assert [(n.id, n.type, n.timestamp, tuple(sorted(n.additional_data.items()))) for n in after] == key[len(seen_1) :]
    assert len(set(key)) == len(key)  # nothing twice
    incremental = [n.type for n in after if n.id == snapshot_id]
    assert incremental[0] == "STARTED" and "COMPLETED" in incremental
    assert end.startswith(f"{run_2}:") and read_after(sensor, end)[0] == []
    json.dumps([n.as_dict() for n in after])  # Debezium's shape, as it travels on
    assert cli("engine", "stop", "--config", str(config)).returncode == 0
