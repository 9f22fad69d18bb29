"""``airflow-cdc status`` and ``airflow-cdc snapshot watch`` as a person runs them (subprocesses,
output piped: the log form), against a real instance on a real PostgreSQL.

The snapshot is held at two places without timing: both of its signals come from the signal
file in one write, so the instance reads them in one poll and pauses it before its first chunk;
then a lock on its second table stops it right after the first table, until the test lets go.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.testing import wait_until
from tests.integration.instance_cleanup import no_instance_left_running  # noqa: F401 (autouse)
from tests.integration.test_engine_instance import cli, pg_instance_config

pytestmark = pytest.mark.integration

T_ROWS, U_ROWS = 3000, 500
SIGNAL_DDL = "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"


class Watch:
    """``airflow-cdc snapshot watch`` in a subprocess; its output lines as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "airflow_cdc.cli", "snapshot", "watch", "--interval", "0.1", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "120"},
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def saw(self, *words: str) -> bool:
        return any(all(word in line for word in words) for line in list(self.lines))

    def end(self, timeout: float = 60) -> tuple[int, str]:
        code = self.process.wait(timeout)
        self._reader.join(10)
        assert self.process.stderr is not None
        return code, self.process.stderr.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def status_json(config: Path) -> dict[str, Any]:
    done = cli("status", "--config", str(config), "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    view: dict[str, Any] = json.loads(done.stdout)  # nothing else on stdout
    return view


def snapshot(view: dict[str, Any], snapshot_id: str) -> dict[str, Any] | None:
    return next((s for s in view["snapshots"] if s["id"] == snapshot_id), None)


def instance_config(tmp_path: Path, pg_server: Any, database: str) -> Path:
    config = pg_instance_config(tmp_path, pg_server, database)
    settings = yaml.safe_load(config.read_text())
    settings.update(
        {
            "signal.data.collection": "public.debezium_signal",
            "signal.enabled.channels": "source,api,file",
            "signal.file": str(tmp_path / "signals.jsonl"),
            "incremental.snapshot.chunk.size": 250,
        }
    )
    config.write_text(yaml.safe_dump(settings))
    return config


def send_together(path: Path, *signals: dict[str, Any]) -> None:
    """The signals appear in the signal file at once (the instance takes the file by renaming it)."""
    temp = path.with_name(f".{path.name}.new")
    temp.write_text("".join(json.dumps(signal) + "\n" for signal in signals))
    os.replace(temp, path)


def test_status_and_snapshot_watch_follow_a_snapshot_to_its_end(
    tmp_path: Path, pg_server: Any, pg_database: str
) -> None:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SIGNAL_DDL)
        for table, rows in (("t", T_ROWS), ("u", U_ROWS)):
            conn.execute(f"create table {table} (id int primary key, v text)")
            conn.execute(f"insert into {table} select g, 'v' || g from generate_series(1, {rows}) g")
            conn.execute(f"analyze {table}")  # the snapshot's estimate comes from the statistics
    config = instance_config(tmp_path, pg_server, pg_database)
    started = cli("engine", "start", "--config", str(config))
    assert started.returncode == 0, started.stderr + control.log_tail(tmp_path / "state")

    # The initial snapshot is one snapshot (its notifications each have an id of their own).
    initial = wait_until(
        lambda: [s for s in status_json(config)["snapshots"] if s["state"] == "completed"], 60, "initial snapshot"
    )
    view = status_json(config)
    assert (view["name"], view["health"], view["reachable"]) == ("pg-instance", "running", True)
    assert [(s["kind"], s["rows_scanned"]) for s in view["snapshots"]] == [("Initial Snapshot", T_ROWS + U_ROWS)]
    assert initial[0]["scanned"] == [
        {"table": "public.debezium_signal", "rows": 0, "status": "SUCCEEDED"},
        {"table": "public.t", "rows": T_ROWS, "status": "SUCCEEDED"},
        {"table": "public.u", "rows": U_ROWS, "status": "SUCCEEDED"},
    ]

    watch = Watch("--config", str(config), "--id", "snap-1")
    try:
        wait_until(lambda: watch.saw("waiting for snapshot snap-1 on pg-instance"), 30, "watch waits for snap-1")
        with psycopg.connect(dsn) as lock:
            lock.execute("lock table u in access exclusive mode")  # held until the block ends
            send_together(
                tmp_path / "signals.jsonl",
                {"id": "snap-1", "type": "execute-snapshot", "data": {"data-collections": ["public\\.[tu]"]}},
                {"id": "pause-1", "type": "pause-snapshot"},
            )
            # "0 rows", or "0 of ~N rows" once the tasks report the snapshot's estimate.
            wait_until(lambda: watch.saw("snap-1 paused 0 ", "rows"), 30, "watch: paused")
            paused = snapshot(status_json(config), "snap-1")
            assert paused is not None and paused["state"] == "paused" and paused["rows_scanned"] == 0
            # The estimate comes with the first chunk's IN_PROGRESS: none before it.
            assert paused["tables"] == ["public.t", "public.u"]
            # Before its first chunk the estimate, if any, is the tasks' (the planner's row counts).
            assert paused["estimated_rows"] in (None, T_ROWS + U_ROWS), paused
            assert watch.process.poll() is None

            with control.client_for(load_config_file(config)) as client:
                client.signal("resume-snapshot")
            halfway_line = f"snap-1 running {T_ROWS:,} of ~{T_ROWS + U_ROWS:,} rows, 86%"
            wait_until(lambda: watch.saw(halfway_line), 60, "watch: public.t read, public.u locked")
            halfway = snapshot(status_json(config), "snap-1")
            assert halfway is not None and halfway["state"] == "running" and halfway["rows_scanned"] == T_ROWS
            assert halfway["scanned"] == [{"table": "public.t", "rows": T_ROWS, "status": "SUCCEEDED"}]
            assert (halfway["estimated_rows"], halfway["percent"]) == (T_ROWS + U_ROWS, 85.7)
            assert watch.process.poll() is None
            lock.rollback()
        code, errors = watch.end()
    finally:
        watch.kill()
    output = "\n".join(watch.lines)
    assert code == 0, output + errors
    assert watch.saw("snap-1 completed", f"{T_ROWS + U_ROWS:,} rows")
    assert watch.saw("public.t", f"{T_ROWS:,} rows", "SUCCEEDED".lower())
    assert watch.saw("public.u", f"{U_ROWS:,} rows", "succeeded")
    assert not watch.saw("failed")

    done = snapshot(status_json(config), "snap-1")
    assert done is not None and (done["state"], done["rows_scanned"], done["percent"]) == (
        "completed",
        T_ROWS + U_ROWS,
        100.0,
    )

    # Without --id: the latest snapshot, which has ended: its end at once.
    latest = cli("snapshot", "watch", "--config", str(config))
    assert latest.returncode == 0 and "snap-1 completed" in latest.stdout, latest.stdout + latest.stderr

    human = cli("status", "--config", str(config))
    assert human.returncode == 0, human.stderr
    assert "pg-instance" in human.stdout and "running" in human.stdout and "snap-1 completed" in human.stdout

    # A rejected snapshot ends the watch with its problem, exit 1.
    with control.client_for(load_config_file(config)) as client:
        client.signal("execute-snapshot", {"data-collections": ["public.nope"]}, signal_id="bad-1")
    rejected = cli("snapshot", "watch", "--config", str(config), "--id", "bad-1", "--interval", "0.1", timeout=60)
    assert rejected.returncode == 1, rejected.stdout + rejected.stderr
    assert "bad-1 rejected" in rejected.stdout and "no captured table matches" in rejected.stdout

    # A stopped instance: one line saying so, exit 1.
    assert cli("engine", "stop", "--config", str(config)).returncode == 0
    gone = cli("status", "--config", str(config))
    assert gone.returncode == 1
    assert "pg-instance unreachable" in gone.stdout and "is not running" in gone.stdout
