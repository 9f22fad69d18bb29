"""CdcSparkApplyOperator: its config groups (and the old keyword arguments) → the job's one JSON
argument, spark-submit's command and environment; templates rendered inside the groups; the
instance's configuration → the job's inputs; the driver's failure as the task's error."""

from __future__ import annotations

import json
import sys
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning

from airflow_cdc.operators.spark import ApplyConfig, CdcSparkApplyOperator, SubmitConfig, connection_url
from airflow_cdc.spark.apply import TARGET_URL_ENV, inputs_from_engine_config, parse_args
from airflow_cdc.spark.job_config import JobConfigError
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


def test_the_groups_become_one_json_argument_the_job_parses_back(monkeypatch: pytest.MonkeyPatch) -> None:
    operator = CdcSparkApplyOperator(
        task_id="apply",
        job=ApplyConfig(
            source="kafka",
            topics=["shop.public.orders", "shop.public.customers"],
            bootstrap_servers="k:9092",
            target_url="delta:/lake",
            table_map={"public.orders": "sales.orders"},
            lane_groups=[["public.orders", "public.order_lines"]],
            settings={"decimal.handling.mode": "string"},
            max_records_per_batch=5000,
        ),
    )
    args = operator.job_args("/ck")
    assert args[0] == "--config-json" and len(args) == 2
    assert "target_url" not in json.loads(args[1])  # in the environment, with a SQL URL's password
    monkeypatch.setenv(TARGET_URL_ENV, "delta:/lake")
    job = parse_args(args)
    assert job.source.topics == ("shop.public.orders", "shop.public.customers")
    assert job.source.bootstrap_servers == "k:9092" and job.source.max_records_per_batch == 5000
    assert job.table_map == {"public.orders": "sales.orders"}
    assert job.lane_groups == {"public.orders": "public.orders", "public.order_lines": "public.orders"}
    assert job.settings == {"decimal.handling.mode": "string"} and job.checkpoint == "/ck"
    assert job.target_url == "delta:/lake" and job.app_name == "cdc-apply-adhoc_airflow-apply"


def test_the_old_keyword_arguments_map_onto_the_groups_with_a_warning_naming_the_new_form() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        operator = CdcSparkApplyOperator(
            task_id="apply", target_url="delta:/lake", topics="a, b", lanes=4, master="local[2]", conf={"k": "v"}
        )
    [warning] = caught.list
    assert issubclass(warning.category, AirflowProviderDeprecationWarning)
    assert warning.filename == __file__  # the DAG's line, not Airflow's or ours
    assert str(warning.message) == (
        "CdcSparkApplyOperator 'apply': pass job=ApplyConfig(target_url='delta:/lake', topics='a, b', lanes=4), "
        "submit=SubmitConfig(master='local[2]', conf={'k': 'v'}) instead of target_url='delta:/lake', "
        "topics='a, b', lanes=4, master='local[2]', conf={'k': 'v'} (from airflow_cdc.spark.job_config; "
        "the separate keyword arguments will be removed)"
    )
    assert operator.job == ApplyConfig(target_url="delta:/lake", topics=("a", "b"), lanes=4)
    assert operator.submit == SubmitConfig(master="local[2]", conf={"k": "v"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the group form warns about nothing
        CdcSparkApplyOperator(task_id="apply", job=ApplyConfig(target_url="delta:/lake", lanes=4))
    with pytest.raises(ValueError, match=r"lanes and job= both given: move lanes into job=ApplyConfig\(...\)"):
        CdcSparkApplyOperator(task_id="apply", job=ApplyConfig(target_url="delta:/lake"), lanes=4)


def test_a_wrong_field_is_named_when_the_dag_is_parsed() -> None:
    with pytest.raises(JobConfigError) as failure:
        CdcSparkApplyOperator(task_id="apply", job=ApplyConfig(target_url="delta:/x", lanes=0, trigger="once"))
    assert [p.key for p in failure.value.problems] == ["ApplyConfig.lanes", "ApplyConfig.trigger"]
    with pytest.raises(ValueError, match=r"ApplyConfig\.lanes: must be a whole number >= 1, got 0"):
        CdcSparkApplyOperator(task_id="apply", target_url="delta:/x", lanes=0)  # the old form too
    with pytest.raises(ValueError, match=r"SubmitConfig\.master: 'local\[0\]' is not a Spark master URL"):
        CdcSparkApplyOperator(
            task_id="apply", job=ApplyConfig(target_url="delta:/x"), submit=SubmitConfig(master="local[0]")
        )


def test_templated_fields_render_inside_the_groups_and_are_checked_once_rendered() -> None:
    from airflow.sdk import DAG

    with DAG("d", schedule=None, start_date=datetime(2026, 1, 1), params={"db": "shop", "master": "local[3]"}):
        operator = CdcSparkApplyOperator(
            task_id="apply",
            tables=["{{ params.db }}.orders"],
            job=ApplyConfig(
                topics="{{ params.db }}.public.orders,{{ params.db }}.public.lines",
                target_url="delta:/lake/{{ ds }}",
                table_map={"public.orders": "{{ params.db }}_orders"},
                settings={"decimal.handling.mode": "{{ 'string' }}"},
                checkpoint="/ck/{{ ds }}",
            ),
            submit=SubmitConfig(master="{{ params.master }}", conf={"spark.app.tag": "{{ ds }}"}),
        )
    given = operator.job
    assert {"job", "submit", "tables"} <= set(operator.template_fields)
    assert {"topics", "target_url", "settings", "checkpoint", "table_map"} <= set(ApplyConfig.template_fields)
    assert {"master", "conf"} <= set(SubmitConfig.template_fields)
    operator.render_template_fields({"ds": "2026-01-05", "params": {"db": "shop", "master": "local[3]"}})
    assert operator.tables == ["shop.orders"]
    assert operator.job.topics == ("shop.public.orders", "shop.public.lines")
    assert operator.job.target_url == "delta:/lake/2026-01-05" and operator.job.checkpoint == "/ck/2026-01-05"
    assert operator.job.table_map == {"public.orders": "shop_orders"}
    assert operator.job.settings == {"decimal.handling.mode": "string"}
    assert operator.submit == SubmitConfig(master="local[3]", conf={"spark.app.tag": "2026-01-05"})
    # A copy was rendered; a template stays one name until then (its commas may be Jinja's).
    assert given.topics == ("{{ params.db }}.public.orders,{{ params.db }}.public.lines",)

    # A value rendered wrong is named as one given wrong.
    bad = CdcSparkApplyOperator(
        task_id="bad", job=ApplyConfig(target_url="delta:/x"), submit=SubmitConfig(master="{{ params.m }}")
    )
    with pytest.raises(JobConfigError, match=r"SubmitConfig\.master: 'mars' is not a Spark master URL"):
        bad.render_template_fields({"params": {"m": "mars"}})


def test_the_serialized_dag_shows_the_groups_as_json_objects() -> None:
    """Airflow's DAG serialization (and its rendered-template view, by the same rule) calls the
    groups' ``serialize()``: the UI gets their fields, and the secrets masker their keys."""
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    with DAG("d", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        CdcSparkApplyOperator(
            task_id="apply",
            job=ApplyConfig(target_url="delta:/lake/{{ ds }}", lanes=3),
            submit=SubmitConfig(conf={"spark.ui.enabled": "false"}),
        )
    [task] = DagSerialization.to_dict(dag)["dag"]["tasks"]
    assert task["__var"]["job"]["target_url"] == "delta:/lake/{{ ds }}" and task["__var"]["job"]["lanes"] == 3
    assert task["__var"]["submit"]["conf"] == {"spark.ui.enabled": "false"}
    assert DagSerialization.from_dict(DagSerialization.to_dict(dag)).get_task("apply").template_fields_renderers == {
        "job": "json",
        "submit": "json",
    }


def test_the_readmes_example_builds_its_groups_without_a_warning() -> None:
    from tests.readme_blocks import readme_block

    namespace: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        exec(readme_block("apply:groups"), namespace)
    apply = namespace["apply"]
    assert apply.job.lanes == 4 and apply.job.lane_groups == (("public.orders", "public.order_lines"),)
    assert apply.submit.master == "spark://spark-master:7077" and apply.target_conn_id == "pg_shop_replica"


def test_the_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one of target_conn_id"):
        CdcSparkApplyOperator(task_id="apply", job=ApplyConfig(topics=["t"]))
    with pytest.raises(ValueError, match="exactly one of target_conn_id"):
        CdcSparkApplyOperator(task_id="apply", target_conn_id="pg", job=ApplyConfig(target_url="delta:/x"))


def test_iceberg_runtime_is_shipped_for_an_iceberg_target_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spark = tmp_path / "spark"
    spark.mkdir()
    for name in ("delta-spark_2.13-4.3.0.jar", "iceberg-spark-runtime-4.1_2.13-1.12.0.jar", "kafka-clients-3.9.1.jar"):
        (spark / name).write_bytes(b"")
    monkeypatch.setenv("CDC_JARS", str(tmp_path))

    def shipped(url: str) -> list[str]:
        operator = CdcSparkApplyOperator(task_id="apply", job=ApplyConfig(topics=["t"], target_url=url))
        return [Path(jar).name.split("-")[0] for jar in operator.connector_jars(url)]

    assert shipped("iceberg:/lake") == ["delta", "iceberg", "kafka"]
    assert shipped("delta:/lake") == ["delta", "kafka"]


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
