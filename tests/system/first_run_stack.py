"""What ``test_first_run.py`` runs: the README's first-run recipe, as a user types it, in a fresh
home - its SQL as the tables' owner, its shell commands with ``bash``, and Airflow's four
processes (scheduler, DAG processor, triggerer, API server) - and what it reads back from the
run: the metadata database's task instances, the task logs, the processes' logs.

The commands are the README's text with only what differs per machine replaced: the server's
port, the database names (the session's server is shared), a generated password, the API
server's port. ``pip install`` is left out (the tests run in the installed venv), and
``AIRFLOW__CORE__LOAD_EXAMPLES=False`` spares the DAG processor Airflow's eighty examples.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.ports import free_port
from tests.readme_blocks import readme_block

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: The README line that starts Airflow's processes in the background: the test starts them itself,
#: to keep their logs and stop them.
COMPONENTS_LINE = "airflow scheduler & "


@dataclass
class Names:
    """What the README's commands name, and what they become here."""

    port: int
    source_db: str
    replica_db: str
    password: str
    api_port: int = field(default_factory=free_port)

    def apply(self, text: str) -> str:
        text = re.sub(r"--conn-schema shop_replica\b", f"--conn-schema {self.replica_db}", text)
        text = re.sub(r"--conn-schema shop\b(?!_)", f"--conn-schema {self.source_db}", text)
        return (
            text.replace("--conn-port 5432", f"--conn-port {self.port}")
            .replace("change-me", self.password)
            .replace("--port 8080", f"--port {self.api_port}")
            .replace("localhost:8080/", f"localhost:{self.api_port}/")
        )


def user_env(home: Path, names: Names) -> dict[str, str]:
    """A new user's environment: their own HOME, none of the test session's Airflow settings.
    The API server listens on a free port, not the README's 8080: tasks reach Airflow's
    execution API there (the README says so for another port)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}:{os.environ.get('PATH', '')}",
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://localhost:{names.api_port}/execution/",
    )
    return env


def shell_steps(names: Names) -> tuple[str, list[str], str]:
    """The README's shell block split at the line that starts Airflow's processes: the commands
    before it, the processes, the commands after it."""
    lines = [line for line in names.apply(readme_block("first-run:shell")).splitlines() if line.strip()]
    assert lines[0].startswith("pip install "), lines[0]
    at = next(i for i, line in enumerate(lines) if line.startswith(COMPONENTS_LINE))
    components = [part.strip() for part in lines[at].split("&") if part.strip()]
    return "\n".join(lines[1:at]) + "\n", components, "\n".join(lines[at + 1 :]) + "\n"


def run_bash(script: str, env: dict[str, str], what: str, timeout: float = 300) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{what} failed ({done.returncode}):\n{script}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    return done.stdout


@contextlib.contextmanager
def airflow_processes(commands: list[str], env: dict[str, str], logs: Path) -> Iterator[dict[str, Path]]:
    """The README's Airflow processes, each with its log; stopped (SIGTERM, then SIGKILL) after."""
    started: list[tuple[subprocess.Popen[bytes], Any]] = []
    paths: dict[str, Path] = {}
    api: tuple[subprocess.Popen[bytes], Path, int] | None = None
    try:
        for command in commands:
            name = command.split()[1]
            paths[name] = logs / f"{name}.log"
            out = paths[name].open("wb")
            process = subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            started.append((process, out))
            if name == "api-server":
                api = (process, paths[name], int(command.split("--port")[1].split()[0]))
        if api:
            wait_for_execution_api(*api)
        yield paths
    finally:
        for process, _ in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for process, out in started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            out.close()


def wait_for_execution_api(process: subprocess.Popen[bytes], log: Path, port: int, timeout: float = 300) -> None:
    """Until the API server's execution API answers - what the README's ``until curl`` line does.
    A task's supervisor reports its start there and gives up after about 30 s of retries; the
    first ``/execution/`` request builds that API (3 s on a quiet machine), so on a loaded one
    a task queued before it is up fails with nothing in its log after "Pre Execute"."""

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the API server exited ({process.returncode}):\n{tail(log)}")
        url = f"http://localhost:{port}/execution/health"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=30) as response:
            return bool(response.status == 200)
        return False

    try:
        wait_until(answers, timeout, "the API server's execution API", interval=0.5)
    except TimeoutError as timeout_error:
        raise AssertionError(f"{timeout_error}:\n{tail(log)}") from None


@dataclass
class Metadata:
    """The run as Airflow's metadata database (sqlite, in the user's AIRFLOW_HOME) records it."""

    path: Path

    def _rows(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db:
            return db.execute(query, args).fetchall()

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self._rows("select state from dag_run where dag_id = ? and run_id = ?", dag_id, run_id)
        return rows[0][0] if rows else None

    def run_seconds(self, dag_id: str, run_id: str) -> float:
        rows = self._rows(
            "select (julianday(end_date) - julianday(start_date)) * 86400 from dag_run where dag_id = ? and run_id = ?",
            dag_id,
            run_id,
        )
        return round(float(rows[0][0]), 1)

    def tasks(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        rows = self._rows(
            "select task_id, state, duration, try_number, start_date, end_date from task_instance "
            "where dag_id = ? and run_id = ?",
            dag_id,
            run_id,
        )
        return {r[0]: {"state": r[1], "duration": r[2], "tries": r[3], "start": r[4], "end": r[5]} for r in rows}


def wait_for_run(meta: Metadata, dag_id: str, run_id: str, timeout: float) -> str | None:
    """The run's final state; None if it did not finish within ``timeout``."""
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: meta.run_state(dag_id, run_id) in ("success", "failed"), timeout, "the run", interval=1.0)
    return meta.run_state(dag_id, run_id)


def task_log(home: Path, dag_id: str, run_id: str, task_id: str) -> str:
    """The task's log files (every try), as Airflow's file task handler wrote them."""
    base = home / "airflow" / "logs"
    files = sorted(base.glob(f"dag_id={dag_id}/run_id={run_id}/task_id={task_id}/**/*.log"))
    return "\n".join(p.read_text(errors="replace") for p in files)


def wait_for_task_log(home: Path, dag_id: str, run_id: str, task_id: str, *needles: str, timeout: float = 60) -> str:
    """The task's log once it holds every one of ``needles``. The run can be marked failed before
    the task's supervisor has written the task's last lines (the failure, the callbacks), so a
    log read right after the run ended may be cut short."""

    def complete() -> str:
        log = task_log(home, dag_id, run_id, task_id)
        return log if all(n in log for n in needles) else ""

    try:
        return wait_until(
            complete,
            timeout,
            f"{needles} in the log of {dag_id}/{run_id}/{task_id}",
            interval=0.5,
        )
    except TimeoutError as timeout_error:
        raise AssertionError(f"{timeout_error}; its end:\n{task_log(home, dag_id, run_id, task_id)[-3000:]}") from None


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except FileNotFoundError:
        return f"({path} missing)"
