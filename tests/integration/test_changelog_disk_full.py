"""The changelog's disk full, then freed: capture waits (offsets do not move past what is not
published, the sink reports why), no segment is ever published with a cut line, and once there
is room again every event lands, once, with contiguous sequence numbers - also when the engine
is stopped while the disk is full and started again after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sinks import ChangelogSink
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.small_disk import fill, small_disk

EVENTS = 3000


def synthetic(name: str, offsets: Path) -> dict[str, Any]:
    return {
        "name": name,
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.tables": "inventory.customers,inventory.orders",
        "synthetic.keys": 50,
        "synthetic.max.events": EVENTS,
        "max.batch.size": 100,
        "offset.storage": "file",
        "offset.storage.file.filename": str(offsets),
        "offset.flush.interval.ms": 0,
    }


def sink(root: Path) -> ChangelogSink:
    return ChangelogSink(
        {
            "sink.changelog.dir": str(root),
            "sink.changelog.segment.max.records": 200,
            "sink.changelog.segment.max.ms": 50,
        }
    )


def published(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Every published line, parsed: a cut line fails json.loads here."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic in sorted(p for p in root.iterdir() if p.is_dir()):
        lines = topics.setdefault(topic.name, [])
        for segment in sorted(topic.glob("*.jsonl")):
            data = segment.read_bytes()
            assert data.endswith(b"\n"), f"{segment} ends with a cut line"
            lines += [json.loads(line) for line in data.splitlines()]
    return topics


def check_complete(root: Path) -> None:
    topics = published(root)
    for name, lines in topics.items():
        assert [line["seq"] for line in lines] == list(range(len(lines))), f"{name}: seq not contiguous"
    assert sum(len(lines) for lines in topics.values()) == EVENTS
    assert not list(root.rglob(".*.tmp"))


def test_a_full_disk_holds_capture_back_and_loses_nothing_when_freed(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 4096) as disk:
        root = disk / "changelog"
        with sink(root) as changelog:
            filler = fill(disk)
            engine = Engine(
                synthetic("full", tmp_path / "offsets.json"), batch_handler=changelog, serializer=JsonSerializer()
            )
            with EngineRunner(engine):
                wait_until(lambda: changelog.retrying.current() is not None, 30, "the sink reporting the full disk")
                retrying = changelog.retrying.current()
                assert retrying is not None and "No space left on device" in retrying.cause
                published_while_full = sum(len(lines) for lines in published(root).values())
                # Offsets never pass what is not published.
                assert engine.tasks[0].status()["committed_records"] <= published_while_full < EVENTS
                filler.unlink()
                wait_until(lambda: engine.tasks[0].status()["committed_records"] >= EVENTS, 60, "all committed")
            assert changelog.retrying.current() is None
            assert changelog.metrics()["publish_failures"] >= 1
        check_complete(root)


def test_stopped_while_the_disk_is_full_and_started_again_after(tmp_path: Path) -> None:
    offsets = tmp_path / "offsets.json"
    with small_disk(tmp_path / "disk", 4096) as disk:
        root = disk / "changelog"
        with sink(root) as changelog:
            filler = fill(disk)
            engine = Engine(synthetic("full2", offsets), batch_handler=changelog, serializer=JsonSerializer())
            with EngineRunner(engine):
                wait_until(lambda: changelog.retrying.current() is not None, 30, "the sink reporting the full disk")
            # The stop could not publish the open segments: their records are not committed.
        published(root)  # and nothing cut was published
        filler.unlink()
        with sink(root) as changelog:
            engine = Engine(synthetic("full2", offsets), batch_handler=changelog, serializer=JsonSerializer())
            with EngineRunner(engine):
                wait_until(lambda: engine.tasks[0].status()["committed_records"] > 0, 30, "capture going on")
                wait_until(lambda: _all_published(root), 60, "every event published")
        check_complete(root)


def _all_published(root: Path) -> bool:
    return sum(len(lines) for lines in published(root).values()) >= EVENTS
