"""The Spark apply job as a scenario's second consumer: a driver process of its own (so kill -9
is real) applying the changelog to a target database continuously, and the target's tables read
back to compare with the source's, row by row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from airflow_cdc.spark.apply import TARGET_URL_ENV
from tests.chaos.instance import REPO, TOPIC_PREFIX
from tests.chaos.workload import TABLES, Postgres, source_image

TARGET_DATABASE = "chaos_target"
POSITION_COLUMN = "_cdc_position"


def create_target(server: Any, *, nullable_body: bool) -> str:
    """The target database with the source's tables (the apply job fills them); its URL. With
    ``nullable_body`` the TOASTed ``docs.body`` may be NULL there (``pg-spark-not-null-toast`` keeps
    it NOT NULL, as in the source)."""
    with server.connect() as conn:
        conn.execute(f"create database {TARGET_DATABASE}")
    with server.connect(TARGET_DATABASE) as conn:
        for statement in Postgres.ddl:
            if "debezium_signal" not in statement:
                conn.execute(statement.replace("body text not null", "body text") if nullable_body else statement)
    return f"postgresql://{server.user}@{server.host}:{server.port}/{TARGET_DATABASE}"


class SparkApply:
    def __init__(self, server: Any, work: Path, *, nullable_body: bool) -> None:
        self.server, self.work = server, work
        self.url = create_target(server, nullable_body=nullable_body)
        self.log_path = work / "apply.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._started_at = 0  # where the current driver's lines begin in the log

    def start(self) -> None:
        topics = ",".join(f"{TOPIC_PREFIX}.public.{table}" for table in TABLES)
        args = [
            sys.executable,
            "-m",
            "airflow_cdc.spark.apply",
            "--source=changelog",
            f"--changelog-dir={self.work / 'changelog'}",
            f"--topics={topics}",
            f"--checkpoint={self.work / 'checkpoint'}",
            "--trigger=continuous",
            # No --max-records-per-batch: the job turns it into files per batch (1 per 1000
            # records), and the engine publishes small segments every 200 ms here.
            "--max-duration=3600",
        ]
        env = {**os.environ, TARGET_URL_ENV: self.url, "CDC_SPARK_MASTER": "local[2]"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {self.starts + 1}\n".encode())
            self._started_at = log.tell()
            # A session of its own: whatever Spark signals to its process group stays there.
            self.process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self.starts += 1

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def batches(self) -> int:
        """Batches the running driver has applied."""
        with open(self.log_path, "rb") as log:
            log.seek(self._started_at)
            return log.read().count(b"applied batch ")

    def kill(self) -> None:
        assert self.process is not None and self.process.poll() is None, "the driver is not running"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(60)

    def close(self) -> None:
        """SIGTERM (the driver stops Spark), SIGKILL if it does not end."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(60)

    def image(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The target's rows, without the job's own bookkeeping column (``_cdc_position``, the
        position of the change a row was last set by)."""
        dsn = self.server.dsn(TARGET_DATABASE)
        # Each table in a transaction of its own: the job alters them (adding its column), and a
        # read holding one table's lock while waiting for another's would deadlock with it.
        images = source_image(Postgres(lambda: psycopg.connect(dsn, autocommit=True)))
        for rows in images.values():
            for row in rows.values():
                row.pop(POSITION_COLUMN, None)
        return images

    def tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])
