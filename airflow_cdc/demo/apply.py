"""The demo's Spark step: the apply job, launched as the Airflow operator launches it.

Why spark-submit and not an in-process SparkSession: the demo shows the path a deployment takes
(``CdcSparkApplyOperator`` and a cluster run the same ``SparkSubmit``); it costs no more here,
since either way one JVM starts (10-20 s) and an in-process session would only save the driver's
Python start; and the JVM leaves with the job instead of holding memory through the Airflow
part, which starts its own spark-submit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_cdc.engine.server.instance_files import resolve
from airflow_cdc.spark.apply import connector_jars, inputs_from_engine_config
from airflow_cdc.spark.submit import Follower, SparkSubmit

#: Two cores are enough for a few thousand rows, and leave the machine usable meanwhile.
MASTER = "local[2]"


def job_args(config: Mapping[str, Any], tables: Sequence[str], checkpoint: Path) -> list[str]:
    """The job's arguments for what the engine instance of ``config`` writes: its changelog
    directory or Kafka topics, and its value settings."""
    inputs = inputs_from_engine_config(resolve(config), tables)  # with the state directory's defaults
    args = ["--source", inputs["source"], "--topics", ",".join(inputs["topics"]), "--checkpoint", str(checkpoint)]
    args += ["--lanes", "2", "--app-name", "airflow-cdc-demo"]
    if inputs.get("changelog_dir"):
        args += ["--changelog-dir", str(inputs["changelog_dir"])]
    if inputs.get("bootstrap_servers"):
        args += ["--bootstrap-servers", str(inputs["bootstrap_servers"])]
    return args + [part for key, value in inputs["settings"].items() for part in ("--setting", f"{key}={value}")]


def run_apply(
    config: Mapping[str, Any],
    tables: Sequence[str],
    target_url: str,
    work_dir: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Run the job to the end of what was captured (``available-now``); its result. The driver's
    log goes to ``work_dir/spark-apply.log``, its batches to ``say``; the job is killed if this
    is interrupted."""
    args = job_args(config, tables, work_dir / "checkpoint")
    kafka = "--bootstrap-servers" in args
    submit = SparkSubmit(
        args,
        master=MASTER,
        conf={"spark.ui.enabled": "false"},  # nobody looks at it in a one-minute job; saves start-up
        jars=connector_jars() if kafka else (),  # Spark's Kafka source; the changelog needs none
        target_url=target_url,
    )
    with open(work_dir / "spark-apply.log", "w") as log:

        def line(text: str) -> None:
            log.write(text + "\n")
            if text.startswith("applied batch"):
                say(f"  {text}")

        follower = Follower(submit, line)
        try:
            return follower.run()
        except BaseException:  # a failure or Ctrl-C: the driver runs in its own session
            follower.kill()
            raise
