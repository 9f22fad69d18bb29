"""Without Java or the jars from scripts/setup, the broker and the Connect worker refuse to start
at once with one message that says what to run (ADR 0002): an error, never a hang, never a skip."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_cdc.local import jvm
from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.jvm import JvmPartsMissing
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.process import BinaryNotFound

#: Far below any JVM start; a start that got as far as launching one would take seconds.
QUICK = 2.0


def refused(start: Callable[[], object]) -> JvmPartsMissing:
    began = time.monotonic()
    with pytest.raises(JvmPartsMissing) as caught:
        start()
    assert time.monotonic() - began < QUICK
    assert "bash scripts/setup" in str(caught.value)
    return caught.value


def test_a_missing_part_is_an_error_the_fixtures_do_not_skip() -> None:
    # tests/conftest.py skips on BinaryNotFound only: a suite that skipped Kafka proved nothing.
    assert not issubclass(JvmPartsMissing, BinaryNotFound)


@pytest.mark.parametrize("layout", ["empty", "absent"])
def test_the_broker_without_jars(layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = tmp_path / "jars"
    if layout == "empty":
        jars.mkdir()
    monkeypatch.setenv(jvm.JARS_ENV_VAR, str(jars))
    broker = KafkaBroker()
    error = refused(broker.start)
    assert str(jars / "kafka") in str(error)
    assert not broker.running and broker.directory is None  # nothing left behind


def test_the_broker_without_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no java on it
    broker = KafkaBroker()
    error = refused(broker.start)
    assert "no `java` on PATH and no JAVA_HOME" in str(error)
    assert broker.directory is None


def test_a_java_home_without_java_falls_back_to_path_and_then_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "not-a-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    refused(KafkaBroker().start)


def test_the_connect_worker_without_debeziums_connectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = tmp_path / "jars"
    (jars / "kafka").mkdir(parents=True)
    (jars / "kafka" / "kafka-clients.jar").touch()  # the broker's part looks present
    monkeypatch.setenv(jvm.JARS_ENV_VAR, str(jars))
    worker = KafkaConnectWorker(KafkaBroker())
    error = refused(worker.start)
    assert "no Debezium connectors in" in str(error) and str(jars / "connect-plugins") in str(error)
    assert not worker.running and worker.directory is None  # its directory was removed again


def test_the_connect_worker_without_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    refused(KafkaConnectWorker(KafkaBroker()).start)
