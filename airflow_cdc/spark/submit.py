"""Launch the apply job with the installed pyspark's ``spark-submit`` and follow it.

No Airflow here: ``SparkApplyOperator`` is a thin layer over ``SparkSubmit``. pyspark's own
``spark-submit`` needs ``SPARK_HOME`` pointing at the pyspark package and ``PYSPARK_PYTHON`` at
an interpreter that has ``airflow_cdc``; from a venv that is not on PATH neither holds by default,
so both are set here (to this interpreter unless told otherwise).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.spark.apply import RESULT_MARKER, TARGET_URL_ENV


class SparkJobError(CdcError):
    """The Spark job failed; the message carries the driver's own error."""


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


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
    #: Given to the driver only through its environment (not argv, which ``ps`` shows); the
    #: executors get it inside the tasks the driver sends them.
    target_url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def command(self) -> list[str]:
        from airflow_cdc.spark import apply

        cmd = [str(pyspark_home() / "bin" / "spark-submit"), "--master", self.master]
        if self.deploy_mode:
            cmd += ["--deploy-mode", self.deploy_mode]
        for key, value in self.conf.items():
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
        self.process = subprocess.Popen(
            self.submit.command(),
            env=self.submit.environment(),
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
