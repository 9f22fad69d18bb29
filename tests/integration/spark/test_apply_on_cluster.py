"""The apply job on a Spark standalone cluster (master + worker from pyspark's ``spark-class``),
launched by ``CdcSparkApplyOperator`` with Spark's native Kafka source.

The strong check as in ``test_apply_job.py``: PostgreSQL → engine → Kafka → the job → PostgreSQL,
target equal to source row by row. The executors run an interpreter that has pyspark and psycopg
but not ``airflow_cdc``, so the run passes only if the operator shipped the package (and the
Kafka source's jars) to them. The same events applied on ``local[2]`` give the same target; both
runs' times are printed (``-s``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.local.ports import free_port
from airflow_cdc.local.spark_cluster import SparkStandaloneCluster
from airflow_cdc.operators.spark import ApplyConfig, CdcSparkApplyOperator, SubmitConfig
from airflow_cdc.spark.reading import SourceOptions
from airflow_cdc.spark.submit import SparkSubmit
from tests.integration.spark.test_apply_job import assert_same, captured, databases  # noqa: F401 (fixtures)

TARGET_CONN = "cluster_apply_target"
#: The driver runs here; the executors must reach it on loopback, where the worker listens.
DRIVER_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false"}


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter with this venv's third-party packages (pyspark, psycopg) but without
    ``airflow_cdc``: the venv's site-packages is a plain path entry in a ``.pth`` of a new venv,
    so its own ``.pth`` files, the editable install of ``airflow_cdc`` among them, are not run."""
    directory = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=120)
    python = directory / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "venv_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return str(python)


def imports(python: str, module: str) -> bool:
    # Without PYTHONPATH: a run from a checkout that sets it (a worktree) would find the package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([python, "-c", f"import {module}"], cwd="/", capture_output=True, env=env).returncode == 0


def end_offset(bootstrap_servers: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers)
    try:
        partition = TopicPartition(topic, 0)
        return int(consumer.end_offsets([partition])[partition])
    finally:
        consumer.close()


def executor_logs(cluster: SparkStandaloneCluster, lines: int = 30) -> str:
    """The tail of every executor's stderr (a Python task's traceback is there)."""
    if cluster.work_dir is None:
        return "(external cluster: see its worker's work directory)"
    parts = []
    for stderr in sorted(cluster.work_dir.glob("app-*/*/stderr")):
        parts.append(f"--- {stderr}\n" + "\n".join(stderr.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(parts) or "(no executor logs)"


def apply_with(
    master: str, options: SourceOptions, checkpoint: Path, executor_python: str | None = None
) -> CdcSparkApplyOperator:
    return CdcSparkApplyOperator(
        task_id="apply",
        job=ApplyConfig(
            source="kafka",
            topics=list(options.topics),
            bootstrap_servers=options.bootstrap_servers,
            checkpoint=str(checkpoint),
        ),
        submit=SubmitConfig(master=master, conf=DRIVER_CONF, executor_python=executor_python),
        target_conn_id=TARGET_CONN,
    )


def timed(operator: CdcSparkApplyOperator) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    result = operator.execute({})
    return result, time.monotonic() - started


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("captured", ["kafka"], indirect=True)
def test_the_operator_applies_on_the_standalone_cluster_as_on_local(
    captured: tuple[SourceOptions, str, str],  # noqa: F811
    spark_cluster: SparkStandaloneCluster,
    bare_python: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options, source, target = captured
    monkeypatch.setenv(f"AIRFLOW_CONN_{TARGET_CONN.upper()}", target)  # an Airflow connection URI
    assert imports(bare_python, "pyspark") and imports(bare_python, "psycopg")
    assert not imports(bare_python, "airflow_cdc")  # so only the shipped zip can give it to the executors
    topic = options.topics[0]
    assert options.bootstrap_servers is not None

    operator = apply_with(
        spark_cluster.master_url, options, tmp_path / "cluster-checkpoint", executor_python=bare_python
    )
    try:
        on_cluster, cluster_seconds = timed(operator)
    except AirflowException as exc:
        raise AssertionError(f"{exc}\nexecutors:\n{executor_logs(spark_cluster)}") from exc
    assert on_cluster["records"] > 2000 and on_cluster["upserted"] >= 2000
    assert on_cluster["end_offsets"] == {topic: {"0": end_offset(options.bootstrap_servers, topic)}}
    assert_same(source, target)
    if spark_cluster.work_dir is not None:  # the executors fetched the package the driver shipped
        assert list(spark_cluster.work_dir.glob("app-*/*/airflow_cdc.zip")), executor_logs(spark_cluster)

    # The same events from the start on local[2], into an emptied target.
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("truncate items")
    local, local_seconds = timed(apply_with("local[2]", options, tmp_path / "local-checkpoint"))
    assert local["records"] == on_cluster["records"]
    assert_same(source, target)
    print(
        f"\napply of {on_cluster['records']} events ({on_cluster['batches']} batch(es)), wall time of the task "
        f"(spark-submit to exit) / the job's own time (session start included) / session start:\n"
        f"  standalone master (1 worker, 2 cores): {cluster_seconds:.1f} s / {on_cluster['seconds']} s / "
        f"{on_cluster['session_seconds']} s\n"
        f"  local[2]:                              {local_seconds:.1f} s / {local['seconds']} s / "
        f"{local['session_seconds']} s"
    )


@pytest.mark.integration
def test_a_master_nobody_answers_at_fails_the_task_with_what_to_check(tmp_path: Path) -> None:
    master = f"spark://127.0.0.1:{free_port()}"
    operator = CdcSparkApplyOperator(
        task_id="apply",
        job=ApplyConfig(topics=["t"], bootstrap_servers="127.0.0.1:1", target_url="delta:/x"),
        submit=SubmitConfig(master=master),
    )
    started = time.monotonic()
    with pytest.raises(AirflowException) as failure:
        operator.execute({})
    assert not isinstance(failure.value, AirflowFailException)  # the master may come back: retried
    assert f"no Spark master answers at {master}" in str(failure.value)
    assert "port 7077 by default" in str(failure.value)
    assert time.monotonic() - started < 30  # not spark-submit's minute of registration retries


def test_a_malformed_master_or_cluster_deploy_mode_is_refused_when_the_dag_is_parsed() -> None:
    for master in ("sprak://host:7077", "spark://", "yarn-cluster", "local[0]"):
        with pytest.raises(
            ValueError, match=r"SubmitConfig.master: .* is not a Spark master URL \(fix: use local\[N\]"
        ):
            SubmitConfig(master=master)
    with pytest.raises(ValueError, match=r"SubmitConfig\.deploy_mode: deploy mode 'cluster' is not supported"):
        SubmitConfig(master="yarn", deploy_mode="cluster")
    with pytest.raises(ValueError, match="deploy mode 'cluster' is not supported"):  # the old arguments too
        CdcSparkApplyOperator(task_id="apply", target_url="delta:/x", master="yarn", deploy_mode="cluster")
    # A templated master is checked when the task runs.
    templated = SubmitConfig(master="{{ var.value.spark_master }}")
    CdcSparkApplyOperator(task_id="apply", job=ApplyConfig(target_url="delta:/x"), submit=templated)


def test_a_cluster_submit_ships_the_package_and_names_the_executors_python(tmp_path: Path) -> None:
    cluster = SparkSubmit(job_args=[], master="spark://m:7077", executor_python="/opt/py/bin/python", python="/d/py")
    command = cluster.staged(tmp_path).command()
    zipped = command[command.index("--py-files") + 1]
    assert zipped == str(tmp_path / "airflow_cdc.zip")
    import zipfile

    names = zipfile.ZipFile(zipped).namelist()
    assert "airflow_cdc/spark/targets/sql/apply.py" in names and not any("__pycache__" in n for n in names)
    assert "spark.pyspark.python=/opt/py/bin/python" in command
    assert "spark.pyspark.driver.python=/d/py" in command  # else spark-submit runs the driver in it too
    local = SparkSubmit(job_args=[], master="local[2]")
    assert "--py-files" not in local.staged(tmp_path).command()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_cluster_restarts_in_place_and_close_leaves_no_process_or_directory() -> None:
    cluster = SparkStandaloneCluster(cores=1, memory="1g")
    with cluster:
        first = cluster.master_url
        state = cluster.state()
        assert state["aliveworkers"] == 1 and state["cores"] == 1 and state["memory"] == 1024
        processes = [p for p in (cluster._process, cluster._worker) if p is not None]
        cluster.stop()
        assert not cluster.running and all(p.poll() is not None for p in processes)
        cluster.start()  # same ports; the new worker registers (the old one is DEAD at the master)
        assert cluster.master_url == first and cluster.state()["aliveworkers"] == 1
        processes = [p for p in (cluster._process, cluster._worker) if p is not None]
        directory = cluster.directory
    assert all(p.poll() is not None for p in processes) and len(processes) == 2
    assert directory is not None and not directory.exists()
