"""CdcSparkApplyOperator: arguments → spark-submit command and environment, the instance's
configuration → the job's inputs, and the driver's failure as the task's error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from airflow_cdc.operators.spark import CdcSparkApplyOperator, connection_url
from airflow_cdc.spark.apply import TARGET_URL_ENV, inputs_from_engine_config, parse_args
from airflow_cdc.spark.submit import Follower, SparkJobError, SparkSubmit, pyspark_home

SECRET = "s3cr3t-pw"


def test_a_postgres_connection_becomes_the_target_url_which_travels_only_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_REPLICA",
        json.dumps(
            {"conn_type": "postgres", "host": "db", "port": 5433, "login": "app", "password": SECRET, "schema": "shop"}
        ),
    )
    url = connection_url("replica")
    assert url == f"postgresql://app:{SECRET}@db:5433/shop"
    submit = SparkSubmit(job_args=["--checkpoint", "/c"], target_url=url)
    assert SECRET not in " ".join(submit.command())
    env = submit.environment()
    assert env[TARGET_URL_ENV] == url
    assert env["SPARK_HOME"] == str(pyspark_home()) and env["PYSPARK_DRIVER_PYTHON"] == sys.executable


def test_other_connection_types_are_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_HTTP", json.dumps({"conn_type": "http", "host": "x"}))
    with pytest.raises(Exception, match="postgres or mysql connection"):
        connection_url("http")


def test_arguments_render_into_job_arguments_the_job_parses_back(monkeypatch: pytest.MonkeyPatch) -> None:
    operator = CdcSparkApplyOperator(
        task_id="apply",
        source="kafka",
        topics=["shop.public.orders", "shop.public.customers"],
        bootstrap_servers="k:9092",
        target_url="delta:/lake",
        table_map={"public.orders": "sales.orders"},
        lane_groups=[["public.orders", "public.order_lines"]],
        settings={"decimal.handling.mode": "string"},
        max_records_per_batch=5000,
    )
    assert {"topics", "target_url", "settings", "checkpoint", "tables"} <= set(operator.template_fields)
    monkeypatch.setenv(TARGET_URL_ENV, "delta:/lake")
    job = parse_args(operator.job_args("/ck"))
    assert job.source.topics == ("shop.public.orders", "shop.public.customers")
    assert job.source.bootstrap_servers == "k:9092" and job.source.max_records_per_batch == 5000
    assert job.table_map == {"public.orders": "sales.orders"}
    assert job.lane_groups == {"public.orders": "public.orders", "public.order_lines": "public.orders"}
    assert job.settings == {"decimal.handling.mode": "string"} and job.checkpoint == "/ck"


def test_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one of target_conn_id"):
        CdcSparkApplyOperator(task_id="apply", topics=["t"])


def test_the_instance_config_names_sink_topics_and_value_modes() -> None:
    changelog = inputs_from_engine_config(
        {
            "topic.prefix": "shop",
            "table.include.list": "public.orders,public.debezium_signal",
            "signal.data.collection": "public.debezium_signal",
            "sink.type": "changelog",
            "sink.changelog.dir": "/state/changelog",
            "decimal.handling.mode": "string",
        }
    )
    assert changelog == {
        "topics": ["shop.public.orders"],
        "settings": {"decimal.handling.mode": "string"},
        "source": "changelog",
        "changelog_dir": "/state/changelog",
    }
    kafka = inputs_from_engine_config(
        {"topic.prefix": "p", "sink.type": "kafka", "sink.kafka.producer.bootstrap.servers": "b:9092"}, ["s.t"]
    )
    assert kafka["source"] == "kafka" and kafka["bootstrap_servers"] == "b:9092" and kafka["topics"] == ["p.s.t"]
    with pytest.raises(ValueError, match="name the tables"):
        inputs_from_engine_config({"topic.prefix": "p", "table.include.list": "public.*"})
    # MySQL and MariaDB connectors encode TIME in microseconds unless told otherwise.
    mariadb = {"connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "topic.prefix": "p"}
    assert inputs_from_engine_config(mariadb, ["shop.t"])["settings"] == {
        "time.precision.mode": "adaptive_time_microseconds"
    }
    connect = {**mariadb, "time.precision.mode": "connect"}
    assert inputs_from_engine_config(connect, ["shop.t"])["settings"] == {"time.precision.mode": "connect"}


def test_a_failing_driver_fails_with_its_own_error(tmp_path: Path) -> None:
    lines: list[str] = []
    submit = SparkSubmit(
        job_args=[
            *("--checkpoint", str(tmp_path), "--source", "changelog", "--changelog-dir", str(tmp_path)),
            *("--topics", "t", "--target-url", "nope:x"),
        ]
    )
    with pytest.raises(SparkJobError) as failure:
        Follower(submit, lines.append).run()
    assert "unknown target" in str(failure.value) and "--target-url" in str(failure.value)
    assert any("unknown target" in line for line in lines)  # the driver's log reached the task log


def test_kill_ends_the_whole_process_group(tmp_path: Path) -> None:
    import threading

    from airflow_cdc.engine.testing import wait_until

    class Sleeper(SparkSubmit):
        def command(self) -> list[str]:
            return [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]

    seen: list[str] = []
    follower = Follower(Sleeper(job_args=[]), seen.append)
    errors: list[BaseException] = []

    def follow() -> None:
        try:
            follower.run()
        except SparkJobError as exc:
            errors.append(exc)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    wait_until(lambda: seen == ["up"], 30, "the child started")
    follower.kill()
    thread.join(30)
    assert follower.process is not None and follower.process.returncode is not None
    assert len(errors) == 1  # a killed job is a failed task
