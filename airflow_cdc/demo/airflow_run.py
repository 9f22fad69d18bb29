"""The demo's Airflow part: ``example_cdc_pipeline`` run with ``dag.test()`` in a throwaway
``AIRFLOW_HOME``, against the same sample database, into a second replica.

Airflow reads ``AIRFLOW_HOME`` and its configuration when it is first imported, so the
environment is set before any import of Airflow, and its metadata database is migrated by
``airflow db migrate`` in a child process. The connections the DAG names come from
``AIRFLOW_CONN_*`` variables: ``cdc_shop`` (an engine instance by its config file, which the
DAG's first task starts), ``pg_shop`` (the source) and ``pg_shop_replica`` (the target).

The write load runs while the DAG starts the engine and snapshots, and stops when the DAG's
``caught_up`` sensor starts (an Airflow listener): that sensor waits for the position the source
had when it started, so later writes would be the next run's to apply, not this one's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from airflow_cdc.demo.progress import DemoFailed
from airflow_cdc.demo.shop import WriteLoad

DAG_ID = "example_cdc_pipeline"
#: The DAG's sensor that waits until what the source had when it started is committed.
CAUGHT_UP = "caught_up"


def dags_folder() -> Path:
    """The repository's ``dags/`` (the example DAGs are not part of the wheel)."""
    folder = Path(__file__).resolve().parents[2] / "dags"
    if not (folder / f"{DAG_ID}.py").is_file():
        raise DemoFailed(
            f"{folder / DAG_ID}.py not found: the Airflow part runs from a checkout of the repository "
            "(or run the demo with --skip-airflow)"
        )
    return folder


def airflow_environment(home: Path, connections: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The variables Airflow must see from its first import on."""
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder()),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # Airflow logs every step of dag.test() to stdout; the demo prints its own lines.
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
    }
    env.update({f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(conn) for conn_id, conn in connections.items()})
    return env


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values``, restored afterwards."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def migrate() -> None:
    """``airflow db migrate`` into ``$AIRFLOW_HOME``, in a child process (Airflow's own command)."""
    if "airflow" in sys.modules:
        raise DemoFailed("Airflow was imported before the demo set AIRFLOW_HOME: run the demo in a process of its own")
    airflow = Path(sys.executable).parent / "airflow"
    if not airflow.exists():
        raise DemoFailed("apache-airflow is not installed: pip install 'airflow-cdc[airflow]' (or use --skip-airflow)")
    done = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise DemoFailed(f"airflow db migrate failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")


def run_dag(say: Callable[[str], None], load: WriteLoad) -> Any:
    """``dag.test()`` of the example DAG, its tasks reported as they run; the DagRun."""
    spec = importlib.util.spec_from_file_location(f"airflow_cdc_demo_{DAG_ID}", dags_folder() / f"{DAG_ID}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports Airflow: its settings come from the environment now
    from airflow.sdk.listener import get_listener_manager

    listener = task_listener(say, load)
    manager = get_listener_manager()
    manager.add_listener(listener)  # type: ignore[no-untyped-call]
    with interrupts_kept() as interrupted:
        try:
            run = module.dag.test()
        finally:
            manager.pm.unregister(listener)
    if interrupted:
        raise KeyboardInterrupt
    return run


@contextlib.contextmanager
def interrupts_kept() -> Iterator[list[int]]:
    """A Ctrl-C inside a task is that task's failure to Airflow (its runner catches every
    exception), and ``dag.test()`` goes on; noted here, it ends the demo once the run returns."""
    seen: list[int] = []
    previous = signal.getsignal(signal.SIGINT)

    def interrupt(signum: int, frame: Any) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def task_listener(say: Callable[[str], None], load: WriteLoad) -> Any:
    """An Airflow listener: Airflow calls it around each task, in the task's own thread, before
    ``execute`` and after it ends. It prints the tasks, and stops the write load when
    ``caught_up`` starts - before that sensor fixes the position it waits for, whatever the
    timing (the DAG is meant to be rerun for what is written after)."""
    from airflow.listeners import hookimpl

    class Listener:
        def __init__(self) -> None:
            self.started: dict[str, float] = {}

        @hookimpl
        def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
            task_id = task_instance.task_id
            resumed = task_id in self.started
            self.started.setdefault(task_id, time.monotonic())
            say(f"  task {task_id} {'resumed: its trigger fired' if resumed else 'running'}")
            if task_id == CAUGHT_UP and load.running:
                load.halt()
                say(f"  write load stopped after {load.transactions} transactions")

        @hookimpl
        def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
            say(f"  task {task_instance.task_id}: success ({self._seconds(task_instance.task_id)})")

        @hookimpl
        def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
            say(f"  task {task_instance.task_id}: FAILED ({self._seconds(task_instance.task_id)}): {error}")

        def _seconds(self, task_id: str) -> str:
            return f"{time.monotonic() - self.started.get(task_id, time.monotonic()):.1f}s"

    return Listener()


def task_states(run: Any) -> list[tuple[str, str]]:
    """``(task id, state)`` of the run's tasks."""
    from airflow.utils.session import create_session

    with create_session() as session:
        return [(ti.task_id, str(ti.state)) for ti in run.get_task_instances(session=session)]


def xcom(run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
        found = session.scalars(query).first()
        return None if found is None else XComModel.deserialize_value(found)


def children() -> set[int]:
    """The pids of this process's children."""
    me, found = str(os.getpid()), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if stat.read_text().rsplit(")", 1)[1].split()[1] == me:
                found.add(int(stat.parent.name))
    return found


def stop_children_since(before: set[int], timeout: float = 30.0) -> None:
    """Stop the children started since ``before`` that still run, with their process groups: a
    ``spark-submit`` the DAG's apply task left when the run was interrupted (it runs in its own
    session, so a Ctrl-C does not reach it)."""
    left = children() - before
    for pid in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        for pid in list(left):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            left.discard(pid)
        time.sleep(0.1)
    for pid in left:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, signum: int) -> None:
    """``signum`` to the process group ``pid`` leads, else to ``pid`` alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
