"""The offset file's disk full for a while: capture and delivery go on, the task's status says it
retries the offset commit and why, the file keeps the last offsets it held (replaced
atomically, never cut), and once there is room the next commit stores everything delivered."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from airflow_cdc.engine import Engine
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.small_disk import fill, small_disk

EVENTS = 4000


def synthetic(offsets: Path) -> dict[str, Any]:
    return {
        "name": "offsets-full",
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.tables": "inventory.customers",
        "synthetic.keys": 50,
        "synthetic.max.events": EVENTS,
        "synthetic.rate": 1000,
        "max.batch.size": 50,
        "offset.storage": "file",
        "offset.storage.file.filename": str(offsets),
        "offset.flush.interval.ms": 0,
    }


def committed_seq(offsets: Path) -> int:
    (offset,) = json.loads(offsets.read_text()).values()
    return int(offset["seq"])


def test_a_full_offset_disk_holds_commits_back_not_capture(tmp_path: Path) -> None:
    delivered: list[Any] = []
    lock = threading.Lock()

    def consume(record: Any) -> None:
        with lock:
            delivered.append(record)

    with small_disk(tmp_path / "disk", 256) as disk:
        offsets = disk / "offsets.json"
        engine = Engine(synthetic(offsets), consumer=consume)
        with EngineRunner(engine):
            task = engine.tasks[0]
            wait_until(lambda: offsets.exists() and committed_seq(offsets) >= 100, 30, "offsets committed")
            filler = fill(disk)
            wait_until(lambda: (task.status()["retrying"] or {}).get("what") == "offset commit", 30, "retrying")
            retrying = task.status()["retrying"]
            assert "No space left on device" in retrying["cause"] and str(offsets) in retrying["cause"]
            assert engine.status()["health"] == "RETRYING"
            held = committed_seq(offsets)  # the file still parses: the old offsets, intact
            seen = len(delivered)
            wait_until(lambda: len(delivered) >= seen + 200, 30, "capture going on while commits fail")
            assert committed_seq(offsets) == held
            filler.unlink()
            wait_until(lambda: task.status()["retrying"] is None, 30, "committing again")
            wait_until(lambda: committed_seq(offsets) >= len(delivered) - 1 - 50, 30, "offsets caught up")
            assert engine.status()["health"] == "RUNNING"
    assert task.status()["error"] is None
