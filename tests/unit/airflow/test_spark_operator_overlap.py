"""CdcSparkApplyOperator keeps overlapping runs off one checkpoint: Airflow starts one instance of
the task at a time unless told otherwise, and only a checkpoint on a file system has a lock file."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_cdc.operators.spark import ApplyConfig, CdcSparkApplyOperator
from airflow_cdc.spark.checkpoint_lock import lock_file


def test_one_instance_of_the_task_at_a_time_unless_the_dag_or_the_task_says_otherwise() -> None:
    lake = ApplyConfig(target_url="delta:/x")
    assert CdcSparkApplyOperator(task_id="apply", job=lake).max_active_tis_per_dag == 1
    assert CdcSparkApplyOperator(task_id="a", job=lake, max_active_tis_per_dag=None).max_active_tis_per_dag is None
    with DAG("d", schedule=None, start_date=datetime(2026, 1, 1), default_args={"max_active_tis_per_dag": 3}):
        assert CdcSparkApplyOperator(task_id="apply", job=lake).max_active_tis_per_dag == 3


def test_the_lock_file_sits_beside_a_local_checkpoint_and_remote_ones_have_none() -> None:
    assert lock_file("/data/cdc/checkpoints/d.apply") == Path("/data/cdc/checkpoints/d.apply.lock")
    assert lock_file("/data/cdc/checkpoints/d.apply/") == Path("/data/cdc/checkpoints/d.apply.lock")
    assert lock_file("file:///data/ck") == Path("/data/ck.lock") == lock_file("file:/data/ck")
    assert lock_file("relative/ck") == Path.cwd() / "relative" / "ck.lock"
    for remote in ("s3a://bucket/ck", "hdfs://nn:8020/ck", "abfss://c@a.dfs.core.windows.net/ck"):
        assert lock_file(remote) is None


def test_a_secured_kafka_sink_reaches_the_job_without_its_password_in_argv(monkeypatch) -> None:
    """The instance's API gives the sink's settings without secrets; the password comes from a
    ``kafka`` connection and goes to the job's environment, which ``ps`` does not show."""
    import json

    from airflow_cdc.spark.apply import KAFKA_OPTIONS_ENV, inputs_from_engine_config

    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SECURE",
        json.dumps({"conn_type": "kafka", "extra": {"sasl.username": "cdc", "sasl.password": "s3cret"}}),
    )
    running = {
        "name": "shop",
        "topic.prefix": "shop",
        "sink.type": "kafka",
        "sink.kafka.producer.bootstrap.servers": "kafka:9093",
        "sink.kafka.producer.security.protocol": "SASL_SSL",
        "sink.kafka.producer.sasl.mechanism": "SCRAM-SHA-512",
    }
    apply = CdcSparkApplyOperator(
        task_id="apply",
        job=ApplyConfig(target_url="delta:/x", topics="shop.public.orders", kafka_options={"client.id": "cdc"}),
        kafka_conn_id="kafka_secure",
    )
    apply.kafka_options = dict(inputs_from_engine_config(running, ["public.orders"])["kafka_options"])
    args = apply.job_args("/tmp/ck")
    assert json.loads(args[1])["kafka_options"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "client.id": "cdc",  # the DAG's own beside the instance's
    }
    assert not any("s3cret" in a for a in args)
    assert apply.kafka_secrets() == {"sasl.username": "cdc", "sasl.password": "s3cret"}
    assert KAFKA_OPTIONS_ENV == "CDC_APPLY_KAFKA_OPTIONS"
