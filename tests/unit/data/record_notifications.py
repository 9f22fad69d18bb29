"""Regenerates notifications_recorded.json: the notifications of a real engine instance on a
throwaway PostgreSQL - its initial snapshot, then incremental snapshots that pause and resume,
meet an empty table and a table without a primary key, are stopped, and are rejected.

Run from the repository root: .venv/bin/python tests/unit/data/record_notifications.py
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.local.postgres import PostgresServer

SQL = [
    "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))",
    "create table t (id int primary key, v text)",
    "insert into t select g, 'v' || g from generate_series(1, 1000) g",
    "create table empty (id int primary key)",
    "create table nopk (v text)",
    "insert into nopk select 'v' || g from generate_series(1, 10) g",
    "analyze",
]


def wait_for(client: EngineClient, signal_id: str, kinds: tuple[str, ...]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(n.id == signal_id and n.type in kinds for n in client.notifications(limit=10_000).notifications):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{signal_id}: none of {kinds}")


def send_together(path: Path, *signals: dict[str, object]) -> None:
    """One poll of the file channel takes them all (it renames the file away)."""
    path.with_suffix(".new").write_text("".join(json.dumps(s) + "\n" for s in signals))
    path.with_suffix(".new").replace(path)


with PostgresServer() as server, tempfile.TemporaryDirectory() as tmp:
    database = server.create_database()
    with server.connect(database) as conn:
        for statement in SQL:
            conn.execute(statement)
    signals = Path(tmp) / "signals.jsonl"
    config = Path(tmp) / "rec.yaml"
    settings = {
        "name": "rec",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": "shop",
        "database": {"hostname": server.host, "port": server.port, "user": server.user, "dbname": database},
        "slot.name": "rec_slot",
        "publication.name": "rec_pub",
        "state.dir": str(Path(tmp) / "state"),
        "offset.flush.interval.ms": 200,
        "sink.type": "null",
        "signal.data.collection": "public.debezium_signal",
        "signal.enabled.channels": "source,api,file",
        "signal.file": str(signals),
        "incremental.snapshot.chunk.size": 300,
    }
    config.write_text(yaml.safe_dump(settings))
    subprocess.run([sys.executable, "-m", "airflow_cdc.cli", "engine", "start", "--config", str(config)], check=True)
    try:
        with control.client_for(settings) as client:
            deadline = time.monotonic() + 60
            while not any(
                n.aggregate_type == "Initial Snapshot" and n.type == "COMPLETED"
                for n in client.notifications(limit=10_000).notifications
            ):
                assert time.monotonic() < deadline, "no initial snapshot COMPLETED"
                time.sleep(0.1)
            snap_1 = {"data-collections": ["public.t", "public.empty"]}
            send_together(
                signals, {"id": "snap-1", "type": "execute-snapshot", "data": snap_1}, {"type": "pause-snapshot"}
            )
            wait_for(client, "snap-1", ("PAUSED",))
            client.signal("resume-snapshot")
            wait_for(client, "snap-1", ("COMPLETED",))
            client.signal("execute-snapshot", {"data-collections": ["public.nopk"]}, signal_id="snap-2")
            wait_for(client, "snap-2", ("COMPLETED",))
            snap_3 = {"data-collections": ["public.t"]}
            send_together(
                signals, {"id": "snap-3", "type": "execute-snapshot", "data": snap_3}, {"type": "stop-snapshot"}
            )
            wait_for(client, "snap-3", ("ABORTED",))
            client.signal("execute-snapshot", {"data-collections": ["public.nope"]}, signal_id="bad-1")
            deadline = time.monotonic() + 60
            while (page := client.notifications(limit=10_000)).notifications[-1].type != "REJECTED":
                assert time.monotonic() < deadline, "bad-1 not rejected"
                time.sleep(0.1)
    finally:
        control.stop(settings)
    out = [n.as_dict() for n in page.notifications]
    Path(__file__).with_name("notifications_recorded.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"recorded {len(out)} notifications")
