"""Engine instances: configuration files, the control API, detached start/stop, kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from tests.integration.instance_cleanup import no_instance_left_running  # noqa: F401 (autouse)
from tests.integration.pg_support import WriteLoad, apply, create_load_table, image_diff, source_image

pytestmark = pytest.mark.integration


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def synthetic_config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "syn-instance",
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.rate": 2000,
        "state.dir": str(tmp_path / "state"),
        "offset.flush.interval.ms": 100,
        "api.token": "s3cret",
        **extra,
    }


def get(url: str, token: str | None = "s3cret", method: str = "GET") -> tuple[int, Any, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read().decode()
            kind = response.headers["Content-Type"]
            return response.status, json.loads(body) if kind == "application/json" else body, kind
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers["Content-Type"]


def test_config_files_in_yaml_and_debezium_server_properties(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        yaml.safe_dump({"name": "n", "database": {"hostname": "db", "port": 5433}, "table.include.list": ["a", "b"]})
    )
    assert load_config_file(tmp_path / "a.yaml") == {
        "name": "n",
        "database.hostname": "db",
        "database.port": 5433,
        "table.include.list": "a,b",
    }
    (tmp_path / "application.properties").write_text(
        "# Debezium Server\n"
        "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
        "debezium.source.database.hostname : db\n"
        "debezium.sink.type=kafka\n"
        "debezium.sink.kafka.producer.bootstrap.servers=k:9092\n"
        "slot.name=a\\\n   b\n"
    )
    assert load_config_file(tmp_path / "application.properties") == {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "db",
        "sink.type": "kafka",
        "sink.kafka.producer.bootstrap.servers": "k:9092",
        "slot.name": "ab",
    }


def test_an_invalid_config_exits_2_and_lists_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "bad.properties"
    config.write_text("connector.class=synthetic\nsink.type=carrier-pigeon\napi.port=-1\ntasks.max=zero\n")
    result = cli("engine", "run", "--config", str(config))
    assert result.returncode == 2, result.stderr
    for key in ("name", "sink.type", "api.port", "tasks.max"):
        assert f"- {key}:" in result.stderr, result.stderr
    assert "fix:" in result.stderr


def test_control_api_auth_status_metrics_connect_routes_and_stop(tmp_path: Path) -> None:
    instance = EngineInstance(synthetic_config(tmp_path))
    exit_code: list[int] = []
    thread = threading.Thread(target=lambda: exit_code.append(instance.run()))
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 30, "polling")
        base = str(read_status(instance.directory)["api"])  # type: ignore[index]
        assert base.startswith("http://127.0.0.1:")
        assert get(base + "/status", token=None)[0] == 401
        assert get(base + "/status", token="wrong")[0] == 401
        assert get(base + "/health", token=None)[:2] == (200, {"status": "UP"})
        assert "/connectors/{name}/status" in get(base + "/openapi.json", token=None)[1]["paths"]

        wait_until(lambda: get(base + "/status")[1]["tasks"][0]["committed_records"] > 500, 30, "progress")
        code, status, _ = get(base + "/status")
        assert (code, status["state"], status["name"]) == (200, "POLLING_TASKS", "syn-instance")
        assert status["sink"]["type"] == "changelog" and status["sink"]["delivered"] > 0
        assert status["tasks"][0]["ms_behind_source"] is not None
        offsets = get(base + "/offsets")[1]["offsets"]
        assert offsets[0]["partition"] == {"server": "syn", "task": 0} and offsets[0]["offset"]["seq"] > 0

        code, text, kind = get(base + "/metrics")
        assert code == 200 and kind.startswith("text/plain")
        assert 'airflow_cdc_engine_state{name="syn-instance",state="POLLING_TASKS"} 1.0' in text
        assert 'airflow_cdc_events_polled_total{name="syn-instance",task="syn-instance-0"}' in text

        connect = get(base + "/connectors/syn-instance/status")[1]
        assert connect["connector"]["state"] == "RUNNING" and connect["tasks"][0]["state"] == "RUNNING"
        assert get(base + "/connectors")[1] == ["syn-instance"]
        assert get(base + "/nowhere")[0] == 404
        assert get(base + "/stop")[0] == 405
        assert get(base + "/connectors/syn-instance/offsets", method="PATCH")[0] == 409  # KIP-875: stop first

        assert get(base + "/stop", method="POST")[:2] == (202, {"name": "syn-instance", "state": "STOPPING"})
        thread.join(60)
        assert exit_code == [0]
    finally:
        instance.request_stop()
        thread.join(60)
    final = read_status(instance.directory)
    assert final is not None and final["state"] == "STOPPED" and final["error"] is None
    assert final["tasks"][0]["offsets"]  # the committed position survives in instance.json


def test_a_second_instance_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "syn.yaml"
    config.write_text(yaml.safe_dump(synthetic_config(tmp_path)))
    started = cli("engine", "start", "--config", str(config))
    try:
        assert started.returncode == 0, started.stderr
        again = cli("engine", "start", "--config", str(config))
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        stopped = cli("engine", "stop", "--config", str(config))
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["state"] == "STOPPED"


def pg_instance_config(tmp_path: Path, pg_server: Any, database: str) -> Path:
    config = tmp_path / "pg.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "pg-instance",
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "topic.prefix": "shop",
                "database": {
                    "hostname": pg_server.host,
                    "port": pg_server.port,
                    "user": pg_server.user,
                    "dbname": database,
                },
                "slot.name": f"slot_{database}",
                "publication.name": f"pub_{database}",
                "state.dir": str(tmp_path / "state"),
                "offset.flush.interval.ms": 200,
                "poll.interval.ms": 100,
                "sink": {"type": "changelog", "changelog": {"segment": {"max": {"ms": 100}}}},
            }
        )
    )
    return config


def changelog_events(root: Path) -> list[dict[str, Any]]:
    events = []
    for segment in sorted((root / "shop.public.t").glob("*.jsonl")):
        events += [json.loads(line) for line in segment.read_bytes().splitlines()]
    return events


def slot_active(pg_server: Any, database: str) -> bool:
    with pg_server.connect() as conn:
        row = conn.execute(
            "select active from pg_replication_slots where slot_name = %s", (f"slot_{database}",)
        ).fetchone()
    return bool(row and row[0])


def test_kill_9_of_a_detached_instance_then_start_again_loses_nothing(
    tmp_path: Path, pg_server: Any, pg_database: str
) -> None:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 2000)
    config = pg_instance_config(tmp_path, pg_server, pg_database)
    changelog = tmp_path / "state" / "changelog"
    with WriteLoad(dsn, 2001, seed=7, per_second=1000) as load:
        for round_ in range(3):
            started = cli("engine", "start", "--config", str(config))
            assert started.returncode == 0, started.stderr + control.log_tail(tmp_path / "state")
            pid = json.loads(started.stdout)["pid"]
            target = load.transactions + 150
            wait_until(lambda target=target: load.transactions >= target, 60, f"writes in round {round_}")
            os.kill(pid, signal.SIGKILL)
            dead = wait_until(lambda: json.loads(cli("engine", "status", "--config", str(config)).stdout), 30)
            wait_until(
                lambda: json.loads(cli("engine", "status", "--config", str(config)).stdout)["state"] == "DEAD",
                30,
                "status reports the killed instance",
            )
            assert dead["name"] == "pg-instance"
            # The killed backend's replication connection goes away with its socket.
            wait_until(lambda: not slot_active(pg_server, pg_database), 30, "slot released after kill -9")
    started = cli("engine", "start", "--config", str(config))
    assert started.returncode == 0, started.stderr
    with psycopg.connect(dsn) as conn:
        expected = source_image(conn)
    try:
        wait_until(lambda: apply(changelog_events(changelog)) == expected, 120, "target equals source")
    except TimeoutError:
        raise AssertionError(image_diff(expected, apply(changelog_events(changelog)))) from None
    live = json.loads(cli("engine", "status", "--config", str(config)).stdout)
    assert live["state"] == "POLLING_TASKS"
    source = live["tasks"][0]["source"]
    assert source["flushed_lsn"] > 0 and source["received_lsn"] >= source["flushed_lsn"] and source["lag_bytes"] >= 0
    stopped = cli("engine", "stop", "--config", str(config))
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["state"] == "STOPPED"
    assert not slot_active(pg_server, pg_database)
    events = changelog_events(changelog)
    positions = [(e["value"]["source"]["lsn"], json.dumps(e["key"]), e["value"]["op"]) for e in events if e["value"]]
    assert len(positions) - len(set(positions)) < len(positions) // 2  # duplicates, yes; a replay of all, no


def synthetic_events(state: Path) -> list[dict[str, Any]]:
    events = []
    for segment in sorted((state / "changelog").glob("*/*.jsonl")):
        events += [json.loads(line) for line in segment.read_bytes().splitlines()]
    return events


def test_offsets_show_set_reset_refused_while_running_and_replayed_after(tmp_path: Path) -> None:
    config = tmp_path / "syn.yaml"
    state = tmp_path / "state"
    config.write_text(yaml.safe_dump(synthetic_config(tmp_path, **{"synthetic.max.events": 300})))
    assert cli("engine", "start", "--config", str(config)).returncode == 0
    wait_until(lambda: len(synthetic_events(state)) >= 300, 30, "300 events delivered")
    refused = cli("offsets", "set", "--config", str(config), "--offset", '{"seq": 10}')
    assert refused.returncode == 3 and "is running" in refused.stderr
    assert cli("engine", "stop", "--config", str(config)).returncode == 0

    shown = json.loads(cli("offsets", "show", "--config", str(config)).stdout)
    assert shown == {
        "offsets": [{"partition": {"server": "syn", "task": 0}, "offset": {"seq": 299}, "position": "299"}]
    }
    bad = cli("offsets", "set", "--config", str(config), "--position", "0/16B3748")
    assert bad.returncode == 1 and "is not an event number like 99" in bad.stderr  # the connector's codec

    # Seek back: events 100.. are delivered again.
    moved = cli("offsets", "set", "--config", str(config), "--position", "99")
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["before"] == {"seq": 299} and json.loads(moved.stdout)["position"] == "99"
    assert cli("engine", "start", "--config", str(config)).returncode == 0
    wait_until(lambda: len(synthetic_events(state)) >= 500, 30, "events 100..299 again")
    assert cli("engine", "stop", "--config", str(config)).returncode == 0
    seqs = [(e["value"]["after"] or e["value"]["before"])["seq"] for e in synthetic_events(state)]
    assert sorted(seqs) == sorted([*range(300), *range(100, 300)])

    # Reset: the next start is a first start.
    removed = json.loads(cli("offsets", "reset", "--config", str(config)).stdout)["removed"]
    assert removed == [{"partition": {"server": "syn", "task": 0}, "offset": {"seq": 299}}]
    assert json.loads(cli("offsets", "show", "--config", str(config)).stdout) == {"offsets": []}
    assert cli("engine", "start", "--config", str(config)).returncode == 0
    wait_until(lambda: len(synthetic_events(state)) >= 800, 30, "every event again")
    assert cli("engine", "stop", "--config", str(config)).returncode == 0


def test_postgres_seek_to_an_lsn_skips_what_came_before_and_reset_snapshots_again(
    tmp_path: Path, pg_server: Any, pg_database: str
) -> None:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 10)
    config = pg_instance_config(tmp_path, pg_server, pg_database)
    changelog = tmp_path / "state" / "changelog"
    assert cli("engine", "start", "--config", str(config)).returncode == 0
    wait_until(lambda: len(changelog_events(changelog)) >= 10, 30, "snapshot delivered")
    assert cli("engine", "stop", "--config", str(config)).returncode == 0

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into t values (11, 'skipped', 11)")
        lsn = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        conn.execute("insert into t values (12, 'kept', 12)")
    moved = cli("offsets", "set", "--config", str(config), "--lsn", lsn)
    assert moved.returncode == 0, moved.stderr
    assert cli("engine", "start", "--config", str(config)).returncode == 0
    wait_until(lambda: any(e["key"] == {"id": 12} for e in changelog_events(changelog)), 30, "row 12 streamed")
    assert cli("engine", "stop", "--config", str(config)).returncode == 0
    assert not any(e["key"] == {"id": 11} for e in changelog_events(changelog))

    assert cli("offsets", "reset", "--config", str(config)).returncode == 0
    assert cli("engine", "start", "--config", str(config)).returncode == 0
    with psycopg.connect(dsn) as conn:
        expected = source_image(conn)
    wait_until(lambda: apply(changelog_events(changelog)) == expected, 30, "a new snapshot covers row 11")
    assert cli("engine", "stop", "--config", str(config)).returncode == 0
    snapshot_reads = [e for e in changelog_events(changelog) if e["value"] and e["value"]["op"] == "r"]
    assert len(snapshot_reads) == 10 + 12


def test_stop_through_the_api_ends_stopped_with_the_slot_inactive(
    tmp_path: Path, pg_server: Any, pg_database: str
) -> None:
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        create_load_table(conn, 100)
    props = load_config_file(pg_instance_config(tmp_path, pg_server, pg_database))
    instance = EngineInstance({**props, "api.token": "t0k"})
    exit_code: list[int] = []
    thread = threading.Thread(target=lambda: exit_code.append(instance.run()))
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 30, "polling")
        wait_until(lambda: slot_active(pg_server, pg_database), 30, "streaming")
        base = str(read_status(instance.directory)["api"])  # type: ignore[index]
        assert get(base + "/stop", token="t0k", method="POST")[0] == 202
        thread.join(60)
    finally:
        instance.request_stop()
        thread.join(60)
    assert exit_code == [0]
    assert read_status(instance.directory)["state"] == "STOPPED"  # type: ignore[index]
    assert not slot_active(pg_server, pg_database)


def test_pause_and_resume_through_connect_routes(tmp_path: Path, pg_server: Any, pg_database: str) -> None:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 10)
    props = load_config_file(pg_instance_config(tmp_path, pg_server, pg_database))
    instance = EngineInstance({**props, "api.token": "t0k"})
    thread = threading.Thread(target=instance.run)
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 30, "polling")
        wait_until(lambda: slot_active(pg_server, pg_database), 30, "streaming")
        base = str(read_status(instance.directory)["api"])  # type: ignore[index]
        connector = f"{base}/connectors/pg-instance"
        assert get(connector + "/pause", token="t0k", method="PUT")[0] == 202
        assert get(connector + "/status", token="t0k")[1]["connector"]["state"] == "PAUSED"
        wait_until(lambda: instance.engine.tasks[0].status()["paused"], 30, "the pause taken effect")
        polled = instance.engine.tasks[0].status()["polled"]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("insert into t values (11, 'while paused', 11)")
            lsn = conn.execute("select pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]

            def sent() -> bool:  # the server has sent the change: it waits in our socket, unread
                row = conn.execute(
                    "select sent_lsn >= %s::pg_lsn from pg_stat_replication "
                    "where application_name like 'airflow-cdc-%%'",
                    (lsn,),
                ).fetchone()
                return bool(row and row[0])

            wait_until(sent, 30, "the change sent by the server")
        assert instance.engine.tasks[0].status()["polled"] == polled  # ... and not polled while paused
        assert get(connector + "/resume", token="t0k", method="PUT")[0] == 202
        wait_until(
            lambda: any(e["key"] == {"id": 11} for e in changelog_events(tmp_path / "state" / "changelog")),
            30,
            "delivered after resume",
        )
        assert get(connector + "/status", token="t0k")[1]["connector"]["state"] == "RUNNING"
    finally:
        instance.request_stop()
        thread.join(60)
