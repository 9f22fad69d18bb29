"""What the command line tells a person when the answer is long, missing or "nothing to do":
``status`` piped into a file keeps its lines whole, ``snapshot watch --id`` of an id the instance
does not know gives up and says which ids it knows, ``engine stop`` of an instance that is not
running says so. Subprocesses, output piped, against real instances (PostgreSQL, synthetic)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.testing import wait_until
from tests.integration.instance_cleanup import no_instance_left_running  # noqa: F401 (autouse)
from tests.integration.test_console_cli import SIGNAL_DDL, instance_config, snapshot, status_json
from tests.integration.test_engine_instance import cli, synthetic_config

pytestmark = pytest.mark.integration

#: Longer than any terminal's guess at a pipe's width (80, or $COLUMNS).
LONG_NAME = "orders-replica-" + "of-the-warehouse-in-the-north-" * 4
#: As long as PostgreSQL lets a name be (63 bytes).
LONG_TABLE = "order_lines_" + "x" * 51


def piped(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI with stdout into a pipe, as ``airflow-cdc status > file`` runs it; COLUMNS as a
    shell that exports it sets it."""
    return subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "80"},
    )


def started_pg_instance(tmp_path: Path, pg_server: Any, database: str, name: str = "pg-instance") -> Path:
    """A detached instance on ``t`` (3 rows) and a table with a 63-character name (2 rows), its
    initial snapshot completed."""
    with psycopg.connect(pg_server.dsn(database), autocommit=True) as conn:
        conn.execute(SIGNAL_DDL)
        for table, rows in (("t", 3), (LONG_TABLE, 2)):
            conn.execute(f"create table {table} (id int primary key, v text)")
            conn.execute(f"insert into {table} select g, 'v' || g from generate_series(1, {rows}) g")
    config = instance_config(tmp_path, pg_server, database)
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "name": name}))
    started = cli("engine", "start", "--config", str(config))
    assert started.returncode == 0, started.stderr + control.log_tail(tmp_path / "state")
    wait_until(lambda: [s for s in status_json(config)["snapshots"] if s["state"] == "completed"], 60, "initial")
    return config


def test_status_into_a_pipe_keeps_every_line_whole(tmp_path: Path, pg_server: Any, pg_database: str) -> None:
    config = started_pg_instance(tmp_path, pg_server, pg_database, name=LONG_NAME)
    # The initial snapshot's last notification is its COMPLETED, after the long table's scan.
    wait_until(
        lambda: any(n["type"] == "COMPLETED" for n in status_json(config)["notifications"]), 30, "COMPLETED seen"
    )

    shown = piped("status", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    head = next((line for line in lines if line.startswith(LONG_NAME)), None)
    assert head is not None and head.endswith("POLLING_TASKS · streaming · PostgresConnector"), shown.stdout
    assert any(f"TABLE_SCAN_COMPLETED public.{LONG_TABLE} 2 rows SUCCEEDED" in line for line in lines), shown.stdout
    facts = next(line for line in lines if line.startswith("url http://127.0.0.1:"))
    assert re.search(r"events/s   committed [0-9,]+$", facts.rstrip()), shown.stdout  # past column 80
    assert "…" not in shown.stdout

    everything = piped("snapshot", "watch", "--config", str(config))  # the initial snapshot, ended
    assert everything.returncode == 0, everything.stdout + everything.stderr
    tables = everything.stdout.splitlines()
    assert any(line.startswith(f"public.{LONG_TABLE}") and "succeeded" in line for line in tables), everything.stdout
    assert "…" not in everything.stdout


def test_snapshot_watch_of_an_unknown_id_gives_up_and_names_the_ids_there_are(
    tmp_path: Path, pg_server: Any, pg_database: str
) -> None:
    config = started_pg_instance(tmp_path, pg_server, pg_database)
    with control.client_for(load_config_file(config)) as client:
        client.signal("execute-snapshot", {"data-collections": ["public.t"]}, signal_id="snap-1")
    wait_until(lambda: (snapshot(status_json(config), "snap-1") or {}).get("state") == "completed", 60, "snap-1")
    initial = next(s["id"] for s in status_json(config)["snapshots"] if s["kind"] == "Initial Snapshot")

    began = time.monotonic()
    watch = piped("snapshot", "watch", "--config", str(config), "--id", "nosuch", "--interval", "0.2")
    assert watch.returncode == 1, watch.stdout + watch.stderr
    # It waits UNKNOWN_ID_WAIT (10 s) for a snapshot just signalled, then gives up.
    assert 10 <= time.monotonic() - began < 45
    last = watch.stdout.splitlines()[-1]
    assert last.startswith("no snapshot 'nosuch' on pg-instance: it knows none by that id"), watch.stdout
    assert "snap-1 (completed)" in last and f"{initial} (initial, completed)" in last
    assert f"`airflow-cdc status --config {config}` lists them" in last

    shorter = piped("snapshot", "watch", "--config", str(config), "--id", "nosuch", "--interval", "0.2", "--wait", "1")
    assert shorter.returncode == 1 and "none started in 1s" in shorter.stdout, shorter.stdout + shorter.stderr

    # An id it knows is still followed: to its end at once.
    known = piped("snapshot", "watch", "--config", str(config), "--id", "snap-1")
    assert known.returncode == 0 and "snap-1 completed" in known.stdout, known.stdout + known.stderr


def test_engine_stop_of_an_instance_that_is_not_running_says_so_and_exits_0(tmp_path: Path) -> None:
    config = tmp_path / "syn.yaml"
    config.write_text(yaml.safe_dump(synthetic_config(tmp_path)))
    state = tmp_path / "state"

    never = cli("engine", "stop", "--config", str(config))
    assert never.returncode == 0, never.stderr
    assert f"instance 'syn-instance' was not running, nothing to stop (its state: {state}" in never.stderr
    assert json.loads(never.stdout) == {
        "name": "syn-instance",
        "state": "NOT_RUNNING",
        "state_dir": str(state),
        "last_state": "NEVER_STARTED",
    }

    started = cli("engine", "start", "--config", str(config))
    assert started.returncode == 0, started.stderr + control.log_tail(state)
    stopped = cli("engine", "stop", "--config", str(config))
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["state"] == "STOPPED", stopped.stderr
    assert "was not running" not in stopped.stderr

    # Its status file still says STOPPED: that is the earlier stop's, not this one's.
    again = cli("engine", "stop", "--config", str(config))
    assert again.returncode == 0, again.stderr
    assert "instance 'syn-instance' was not running, nothing to stop" in again.stderr and "last STOPPED" in again.stderr
    assert json.loads(again.stdout)["state"] == "NOT_RUNNING"
