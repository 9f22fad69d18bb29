"""Spark's file source streams the changelog while the engine writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sinks import ChangelogSink
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.test_changelog_sink import read_changelog, synthetic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = "topic string, key string, value string, seq long, ts_ms long"


def test_spark_read_stream_json_sees_every_line_of_whole_segments_only(tmp_path: Path, spark: Any) -> None:
    root = tmp_path / "changelog"
    topic = root / "syn.inventory.customers"
    topic.mkdir(parents=True)
    settings = {
        "sink.changelog.dir": str(root),
        "sink.changelog.segment.max.records": 200,
        "sink.changelog.segment.max.ms": 20,
    }
    # The reader starts first, on an empty directory, and keeps reading while segments appear.
    # key and value are read as JSON text (Spark keeps nested JSON as a string for a string field).
    stream = spark.readStream.schema(SCHEMA).json(str(topic))
    query = stream.writeStream.format("memory").queryName("changelog_rows").trigger(processingTime="200 milliseconds")
    query = query.option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    try:
        with ChangelogSink(settings) as sink:
            engine = Engine(
                synthetic("spark", 6000, **{"synthetic.tables": "inventory.customers"}),
                batch_handler=sink,
                serializer=JsonSerializer(),
            )
            with EngineRunner(engine):
                wait_until(lambda: engine.tasks[0].status()["committed_records"] >= 6000, 60, "all committed")
        query.processAllAvailable()
        rows = spark.sql("select seq, key, value from changelog_rows").collect()
    finally:
        query.stop()
    expected = read_changelog(root)["syn.inventory.customers"]
    assert len(rows) == len(expected) == 6000
    assert sorted(r.seq for r in rows) == list(range(6000))
    by_seq = {r.seq: r for r in rows}
    for line in expected[::500]:
        row = by_seq[line["seq"]]
        assert json.loads(row.key) == line["key"]
        assert json.loads(row.value) == line["value"]
    assert spark.sql("select count(*) from changelog_rows where value is null or seq is null").first()[0] == 0
