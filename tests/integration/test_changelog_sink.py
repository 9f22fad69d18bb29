"""The changelog sink: durable JSON-lines segments a concurrent reader only ever sees whole,
offsets committed only over published segments, recovery after a crash, retention."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sinks import ChangelogSink, build_sink
from airflow_cdc.engine.testing import EngineRunner, wait_until


def synthetic(name: str, events: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.tables": "inventory.customers,inventory.orders",
        "synthetic.keys": 50,
        "synthetic.max.events": events,
        "max.batch.size": 100,
        "offset.storage": "memory",
        "offset.flush.interval.ms": 0,
        **extra,
    }


def read_changelog(root: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for topic in sorted(p for p in root.iterdir() if p.is_dir()):
        lines = []
        for segment in sorted(topic.glob("*.jsonl")):
            lines += [json.loads(line) for line in segment.read_bytes().splitlines()]
        out[topic.name] = lines
    return out


def sink_settings(root: Path, **extra: Any) -> dict[str, Any]:
    return {"sink.type": "changelog", "sink.changelog.dir": str(root), **extra}


def test_every_event_lands_once_in_source_order_with_contiguous_seq(tmp_path: Path) -> None:
    root = tmp_path / "changelog"
    sink = build_sink(sink_settings(root, **{"sink.changelog.segment.max.records": 300}))
    assert isinstance(sink, ChangelogSink)
    with sink:
        engine = Engine(synthetic("cl", 2000), batch_handler=sink, serializer=JsonSerializer())
        with EngineRunner(engine) as runner:
            wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 2000, 30, "all committed")
            runner.stop()
    topics = read_changelog(root)
    assert set(topics) == {"syn.inventory.customers", "syn.inventory.orders"}
    assert sum(len(lines) for lines in topics.values()) == 2000
    for lines in topics.values():
        assert [line["seq"] for line in lines] == list(range(len(lines)))
        # Source order: the synthetic source numbers its events in the row's "seq".
        values = [line["value"] for line in lines if line["value"] is not None]
        positions = [(value["after"] or value["before"])["seq"] for value in values]
        assert positions == sorted(positions)
        assert all(set(line) >= {"topic", "key", "value", "seq"} for line in lines)
    assert not list(root.rglob(".*.tmp"))


def test_a_concurrent_reader_never_sees_a_partial_segment(tmp_path: Path) -> None:
    root = tmp_path / "changelog"
    seen: dict[Path, bytes] = {}
    stop = threading.Event()
    problems: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            for segment in root.glob("*/*.jsonl"):
                data = segment.read_bytes()
                if segment in seen:
                    if seen[segment] != data:
                        problems.append(f"{segment} changed after it appeared")
                    continue
                seen[segment] = data
                if not data.endswith(b"\n"):
                    problems.append(f"{segment} appeared without its last line")
                for line in data.splitlines():
                    json.loads(line)

    settings = sink_settings(root, **{"sink.changelog.segment.max.records": 97, "sink.changelog.segment.max.ms": 5})
    thread = threading.Thread(target=reader)
    with ChangelogSink(settings) as sink:
        thread.start()
        engine = Engine(synthetic("cl2", 20_000), batch_handler=sink, serializer=JsonSerializer())
        with EngineRunner(engine):
            wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 20_000, 60, "all committed")
        stop.set()
        thread.join(10)
    assert not problems, problems[:3]
    assert len(seen) > 100  # the reader really raced the writer
    assert sum(len(lines) for lines in read_changelog(root).values()) == 20_000


def test_offsets_advance_only_over_published_segments(tmp_path: Path) -> None:
    root = tmp_path / "changelog"
    # Segments are published by age only after an hour: nothing may be committed before then.
    settings = sink_settings(root, **{"sink.changelog.segment.max.ms": 3_600_000})
    with ChangelogSink(settings) as sink:
        engine = Engine(synthetic("cl3", 500), batch_handler=sink, serializer=JsonSerializer())
        with EngineRunner(engine) as runner:
            wait_until(lambda: engine.tasks[0].status()["polled"] >= 500, 30, "all polled")
            assert engine.tasks[0].status()["committed_records"] == 0
            assert not list(root.glob("*/*.jsonl"))
            runner.stop()  # the stop flushes: the open segments are published, then committed
        assert engine.tasks[0].status()["committed_records"] == 500
    assert sum(len(lines) for lines in read_changelog(root).values()) == 500


def test_restart_discards_a_crashed_temp_file_and_continues_the_sequence(tmp_path: Path) -> None:
    root = tmp_path / "changelog"
    topic = root / "syn.a.b"
    topic.mkdir(parents=True)
    (topic / f"{0:020d}.jsonl").write_bytes(b'{"seq":0}\n{"seq":1}\n')
    (topic / f".{2:020d}.jsonl.tmp").write_bytes(b'{"seq":2}\n{"se')  # a crash mid-segment
    with ChangelogSink(sink_settings(root)) as sink:
        engine = Engine(
            synthetic("cl5", 10, **{"synthetic.tables": "a.b"}), batch_handler=sink, serializer=JsonSerializer()
        )
        with EngineRunner(engine):
            wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 10, 30, "all committed")
    assert not list(topic.glob(".*"))
    seqs = [line["seq"] for line in read_changelog(root)["syn.a.b"]]
    assert seqs == list(range(12))
    assert sorted(p.name for p in topic.glob("*.jsonl"))[1] == f"{2:020d}.jsonl"


def test_retention_by_size_keeps_the_newest_segments(tmp_path: Path) -> None:
    root = tmp_path / "changelog"
    settings = sink_settings(
        root,
        **{"sink.changelog.segment.max.records": 10, "sink.changelog.retention.bytes": 1},
    )
    with ChangelogSink(settings) as sink:
        engine = Engine(
            synthetic("cl6", 95, **{"synthetic.tables": "a.b"}), batch_handler=sink, serializer=JsonSerializer()
        )
        with EngineRunner(engine):
            wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 95, 30, "all committed")
    segments = sorted((root / "syn.a.b").glob("*.jsonl"))
    assert len(segments) == 1  # only the newest survives a 1-byte budget
    assert [json.loads(line)["seq"] for line in segments[0].read_bytes().splitlines()] == list(range(90, 95))


def test_a_topic_that_cannot_be_a_directory_name_is_refused_with_a_fix(tmp_path: Path) -> None:
    from airflow_cdc.engine.errors import ConfigError

    sink = ChangelogSink(sink_settings(tmp_path))
    with pytest.raises(ConfigError, match="RegexRouter"):
        sink._topic("../escape")


def test_topic_ends_count_each_topics_published_records_across_restarts(tmp_path: Path) -> None:
    """What the table-change watchers compare (ADR 0026): per topic, the records published."""
    root = tmp_path / "changelog"
    settings = sink_settings(root, **{"sink.changelog.segment.max.records": 7})
    with ChangelogSink(settings) as sink:
        assert sink.topic_ends() == {}
        engine = Engine(synthetic("cl6", 100), batch_handler=sink, serializer=JsonSerializer())
        with EngineRunner(engine):
            wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 100, 30, "all committed")
        ends = sink.topic_ends()
    written = {topic: len(lines) for topic, lines in read_changelog(root).items()}
    assert ends == written and sum(ends.values()) == 100
    with ChangelogSink(settings) as again:  # known from the start, before any new record
        assert again.topic_ends() == written
