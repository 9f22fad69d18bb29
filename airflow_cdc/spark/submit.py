"""Launch the apply job with the installed pyspark's ``spark-submit`` and follow it.

No Airflow here: ``CdcSparkApplyOperator`` is a thin layer over ``SparkSubmit``. pyspark's own
``spark-submit`` needs ``SPARK_HOME`` pointing at the pyspark package and ``PYSPARK_PYTHON`` at
an interpreter that has ``airflow_cdc``; from a venv that is not on PATH neither holds by default,
so both are set here (to this interpreter unless told otherwise).

On a cluster master (``spark://…``, ``yarn``, ``k8s://…``) the driver still runs here, in
client deploy mode: its log streams into the caller and killing it ends the job. What the
executors need is shipped with the submit (ADR 0015): ``--jars`` (Spark's Kafka source and its
kafka-clients; executors do not see the driver's classpath) and ``--py-files`` with a zip of
``airflow_cdc`` (the SQL targets' upserts run in the executors' Python). Their third-party
packages (psycopg, pymysql) must be installed in the executors' interpreter
(``executor_python``, ``spark.pyspark.python``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.spark.apply import RESULT_MARKER, TARGET_URL_ENV
from airflow_cdc.spark.cluster import (
    SparkMasterError,
    SparkMasterUnreachable,
    check_master,
    check_reachable,
    is_local,
)
from airflow_cdc.spark.job_config import SubmitConfig

__all__ = ["Follower", "SparkJobError", "SparkMasterError", "SparkMasterUnreachable", "SparkSubmit", "pyspark_home"]


class SparkJobError(CdcError):
    """The Spark job failed; the message carries the driver's own error."""


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def package_zip(directory: Path) -> Path:
    """``airflow_cdc`` as a zip for ``--py-files``: the executors import the job's code from it,
    the same version as the driver's, whatever their interpreter has installed."""
    import airflow_cdc

    package = Path(airflow_cdc.__file__).resolve().parent
    path = directory / "airflow_cdc.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(package.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts and file.suffix != ".pyc":
                archive.write(file, file.relative_to(package.parent))
    return path


@dataclass
class SparkSubmit:
    """One spark-submit run of the apply job."""

    job_args: Sequence[str]
    master: str = "local[*]"
    deploy_mode: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    jars: Sequence[str] = ()
    packages: Sequence[str] = ()
    py_files: Sequence[str] = ()
    python: str = sys.executable
    #: The executors' interpreter (``spark.pyspark.python``) when it is not ``python``'s path
    #: (on a cluster it usually is not: that path is on the Airflow worker).
    executor_python: str | None = None
    #: Ship ``airflow_cdc`` to the executors as a zip (``--py-files``); None: on a cluster master.
    ship_package: bool | None = None
    #: Given to the driver only through its environment (not argv, which ``ps`` shows); the
    #: executors get it inside the tasks the driver sends them.
    target_url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(
        cls,
        config: SubmitConfig,
        job_args: Sequence[str],
        *,
        connector_jars: Sequence[str] = (),
        target_url: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SparkSubmit:
        """The submit ``config`` describes, with the connector jars the job needs before its own."""
        return cls(
            job_args=list(job_args),
            master=config.master,
            deploy_mode=config.deploy_mode,
            conf=dict(config.conf),
            jars=[*connector_jars, *config.jars],
            packages=list(config.packages),
            py_files=list(config.py_files),
            python=config.python or sys.executable,
            executor_python=config.executor_python,
            ship_package=config.ship_package,
            target_url=target_url,
            env=dict(env or {}),
        )

    @property
    def ships_package(self) -> bool:
        return not is_local(self.master) if self.ship_package is None else self.ship_package

    def staged(self, scratch: Path) -> SparkSubmit:
        """This submit with what it ships written to ``scratch`` (kept until the job ends: in
        client mode the driver serves the files to the executors)."""
        if not self.ships_package:
            return self
        return dataclasses.replace(self, py_files=[*self.py_files, str(package_zip(scratch))], ship_package=False)

    def command(self) -> list[str]:
        from airflow_cdc.spark import apply

        cmd = [str(pyspark_home() / "bin" / "spark-submit"), "--master", self.master]
        if self.deploy_mode:
            cmd += ["--deploy-mode", self.deploy_mode]
        conf = dict(self.conf)
        # Spark's INFO lines (hundreds a run) would bury the job's own in the task log.
        conf.setdefault("spark.log.level", "WARN")
        if self.executor_python:
            conf.setdefault("spark.pyspark.python", self.executor_python)
            # spark-submit gives the driver spark.pyspark.python too unless this says otherwise.
            conf.setdefault("spark.pyspark.driver.python", self.python)
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        if self.jars:
            cmd += ["--jars", ",".join(self.jars)]
        if self.packages:
            cmd += ["--packages", ",".join(self.packages)]
        if self.py_files:
            cmd += ["--py-files", ",".join(self.py_files)]
        return [*cmd, apply.__file__, *self.job_args]

    def environment(self) -> dict[str, str]:
        env = {**os.environ, **self.env}
        env["SPARK_HOME"] = str(pyspark_home())
        env.setdefault("PYSPARK_PYTHON", self.python)
        env["PYSPARK_DRIVER_PYTHON"] = self.python
        if self.target_url:
            env[TARGET_URL_ENV] = self.target_url
        return env


class Follower:
    """Runs the command, hands every output line to ``on_line``, keeps the tail for errors."""

    def __init__(self, submit: SparkSubmit, on_line: Callable[[str], None]) -> None:
        self.submit = submit
        self.on_line = on_line
        self.process: subprocess.Popen[str] | None = None
        self.tail: deque[str] = deque(maxlen=60)
        self.result: dict[str, Any] | None = None

    def run(self) -> dict[str, Any]:
        """Check the master, stage what is shipped, run the job to its end; its result line.
        Raises ``SparkMasterError`` for a master or deploy mode that cannot work,
        ``SparkMasterUnreachable`` when nothing answers there, ``SparkJobError`` for the rest."""
        check_master(self.submit.master, self.submit.deploy_mode)
        check_reachable(self.submit.master)
        with tempfile.TemporaryDirectory(prefix="cdc-spark-submit-") as scratch:
            submit = self.submit.staged(Path(scratch))
            self.process = subprocess.Popen(
                submit.command(),
                env=submit.environment(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,  # so kill() reaches the JVM and the Python workers too
            )
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self._line(line.rstrip("\n"))
            code = self.process.wait()
        if code != 0 or self.result is None:
            raise SparkJobError(f"the Spark job failed (exit code {code}):\n{self.driver_error()}")
        return self.result

    def _line(self, line: str) -> None:
        if line.startswith(RESULT_MARKER):
            self.result = json.loads(line[len(RESULT_MARKER) :])
        self.tail.append(line)
        self.on_line(line)

    def driver_error(self) -> str:
        """The driver's Python traceback or Spark's error, else the last lines it printed."""
        lines = list(self.tail)
        if any("All masters are unresponsive" in line for line in lines):
            # Something answered at the address, but no standalone master registered the app.
            return f"no Spark master registered the application at {self.submit.master}: is that its RPC port?\n" + (
                "\n".join(lines[-20:])
            )
        for i, line in enumerate(lines):
            if line.startswith("Traceback") or "Exception:" in line or "Error:" in line:
                return "\n".join(lines[i:])
        return "\n".join(lines[-20:])

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
