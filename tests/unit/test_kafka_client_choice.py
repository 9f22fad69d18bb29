"""The Kafka sink's client when ``sink.kafka.client`` is not set: confluent-kafka when it can be
imported, kafka-python otherwise (issue 30). Each case runs the real import in a fresh
interpreter; "not installed" is confluent_kafka made unimportable there (``sys.modules`` entry
``None``: Python's own way to block an import), not a stand-in for either client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.requirements import require_module

ROOT = Path(__file__).resolve().parents[2]

#: Builds a sink from the JSON settings in argv[1] (starts nothing: that would connect) and prints
#: the client it chose and why (what ``start`` logs).
PROBE = """
import json, logging, sys
if sys.argv[2] == "blocked":
    sys.modules["confluent_kafka"] = None
from airflow_cdc.engine.sinks import KafkaSink
sink = KafkaSink(json.loads(sys.argv[1]))
print(json.dumps({"name": sink.choice.name, "reason": sink.choice.reason, "client": type(sink.client).__name__}))
"""

BOOTSTRAP = {"sink.kafka.producer.bootstrap.servers": "127.0.0.1:1"}


def probe(settings: dict[str, object], confluent: str) -> subprocess.CompletedProcess[str]:
    """PROBE in a fresh interpreter; ``confluent``: "importable", or "blocked" (made unimportable)."""
    return subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(settings), confluent],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def chosen(settings: dict[str, object], confluent: str) -> dict[str, str]:
    out = probe(settings, confluent)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.fixture
def needs_confluent() -> None:
    require_module("confluent_kafka", extra="confluent")


def test_unset_is_confluent_when_it_can_be_imported(needs_confluent: None) -> None:
    got = chosen(BOOTSTRAP, "importable")
    assert (got["name"], got["client"]) == ("confluent", "ConfluentClient")
    assert "confluent-kafka is installed" in got["reason"]


def test_unset_is_kafka_python_when_confluent_cannot_be_imported() -> None:
    got = chosen(BOOTSTRAP, "blocked")
    assert (got["name"], got["client"]) == ("kafka-python", "KafkaPythonClient")
    assert "confluent-kafka cannot be imported" in got["reason"]
    assert "airflow-cdc[confluent]" in got["reason"]


def test_unset_keeps_kafka_python_for_a_setting_only_it_takes(needs_confluent: None) -> None:
    got = chosen({**BOOTSTRAP, "sink.kafka.producer.max.block.ms": 5000}, "importable")
    assert (got["name"], got["client"]) == ("kafka-python", "KafkaPythonClient")
    assert "sink.kafka.producer.max.block.ms" in got["reason"]


@pytest.mark.parametrize("confluent", ["importable", "blocked"])
def test_an_explicit_kafka_python_is_obeyed(confluent: str) -> None:
    got = chosen({**BOOTSTRAP, "sink.kafka.client": "kafka-python"}, confluent)
    assert (got["name"], got["client"]) == ("kafka-python", "KafkaPythonClient")
    assert got["reason"] == "set by sink.kafka.client"


def test_an_explicit_confluent_is_obeyed(needs_confluent: None) -> None:
    got = chosen({**BOOTSTRAP, "sink.kafka.client": "librdkafka"}, "importable")
    assert (got["name"], got["client"]) == ("confluent", "ConfluentClient")
    assert got["reason"] == "set by sink.kafka.client"


def test_an_explicit_confluent_that_cannot_be_imported_names_the_extra() -> None:
    out = probe({**BOOTSTRAP, "sink.kafka.client": "confluent"}, "blocked")
    assert out.returncode != 0
    assert "airflow-cdc[confluent]" in out.stderr
