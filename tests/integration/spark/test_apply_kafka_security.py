"""The apply job reads an engine instance's topics from a SASL_SSL broker (SCRAM over TLS) with
either Kafka source: the settings come from the instance's configuration as its API gives it
(``inputs_from_engine_config``, no password) as ``--kafka-option`` flags, and the password from
``CDC_APPLY_KAFKA_OPTIONS``, never on the command line."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine.config import is_secret_key
from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import KAFKA_OPTIONS_ENV, inputs_from_engine_config, parse_args, run
from tests.integration.spark.test_apply_job import change_load, databases, engine_props, rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["databases"]  # the fixture, shared with test_apply_job


@pytest.mark.parametrize("source", ["kafka-python", "kafka"])
def test_the_job_reads_a_sasl_ssl_broker_with_the_instances_settings(
    pg_server: Any,
    pg_database: str,
    tmp_path: Path,
    spark: Any,
    secure_kafka_broker: Any,
    databases: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    source: str,
) -> None:
    source_dsn, target = databases
    security = secure_kafka_broker.client_security()
    sink = {"sink.type": "kafka", **{f"sink.kafka.producer.{k}": v for k, v in security.items()}}
    props = engine_props(tmp_path, pg_server, pg_database, sink)
    instance = EngineInstance(props)
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 60, "polling")
        change_load(source_dsn)
        running = {k: v for k, v in props.items() if not is_secret_key(k)}  # what GET /connectors/<name> gives
        inputs = inputs_from_engine_config(running, ["public.items"])
        assert "sasl.password" not in inputs["kafka_options"]
        monkeypatch.setenv(KAFKA_OPTIONS_ENV, json.dumps({"sasl.password": security["sasl.password"]}))
        argv = ["--source", source, "--bootstrap-servers", inputs["bootstrap_servers"], "--topics", inputs["topics"][0]]
        argv += ["--target-url", target, "--checkpoint", str(tmp_path / "checkpoint")]
        argv += [part for k, v in inputs["kafka_options"].items() for part in ("--kafka-option", f"{k}={v}")]
        job = parse_args(argv)
        done = {"records": 0}

        def caught_up() -> bool:
            done["records"] += run(spark, job)["records"]
            return rows(source_dsn) == rows(target)

        wait_until(caught_up, 120, "target equals source", interval=0.5)
    finally:
        instance.request_stop()
        thread.join(60)
    assert done["records"] > 2000
