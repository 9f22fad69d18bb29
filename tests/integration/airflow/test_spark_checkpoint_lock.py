"""Two runs of CdcSparkApplyOperator on one checkpoint: the second fails at once, retriably, naming
the run that holds it; once the holder ended (released, or killed with SIGKILL) the next one takes
it. Holders are real processes (the lock is the kernel's, per open file, so in-process threads would
prove less); the slow test's holder is the operator itself running a real Spark job.

Without the lock both runs started Spark and one died later with Hadoop's FileAlreadyExistsException.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.spark.checkpoint_lock import lock_file, read_holder
from tests.integration.airflow.apply_support import (  # noqa: F401 (pg_target: a fixture)
    apply_operator,
    one_change,
    pg_target,
    task_context,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
#: Holds the checkpoint ``argv[1]`` as run ``argv[2]`` until its stdin closes; prints the record
#: of a previous holder that ended without releasing.
HOLDER = """
import json, sys
from airflow_cdc.spark.checkpoint_lock import CheckpointLock, Holder, lock_file
lock = CheckpointLock(lock_file(sys.argv[1]), Holder.this_process("etl", sys.argv[2], "apply", 1)).acquire()
print("held", json.dumps(lock.previous and lock.previous.pid), flush=True)
sys.stdin.read()
lock.release()
"""
#: The operator applying ``argv[1]`` (a changelog) with checkpoint ``argv[2]`` as run ``argv[3]``.
APPLY = """
import json, sys
from pathlib import Path
from tests.integration.airflow.apply_support import apply_operator, task_context
operator = apply_operator(Path(sys.argv[1]), Path(sys.argv[2]), target_conn_id="replica", tables=["public.orders"])
print("OPERATOR_RESULT", json.dumps(operator.execute(task_context(sys.argv[3]))), flush=True)
"""


def start(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def held(process: subprocess.Popen[str]) -> int | None:
    """Waits for the holder's "held" line; the pid of the holder it found dead, if any."""
    assert process.stdout is not None
    line = process.stdout.readline()  # the holder prints it at once, or exits (EOF)
    assert line.startswith("held "), f"no 'held' line but {line!r} (exit code {process.poll()})"
    return json.loads(line.split(" ", 1)[1])  # type: ignore[no-any-return]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def test_a_second_run_fails_at_once_naming_the_holder_and_the_next_takes_it_after_release_or_kill_9(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    first = start(HOLDER, checkpoint, "scheduled__2026-01-01")
    processes.append(first)
    assert held(first) is None

    second = apply_operator(one_change(tmp_path / "changelog"), Path(checkpoint), target_url=f"delta:{tmp_path}/lake")
    started = time.monotonic()
    with pytest.raises(AirflowException) as failure:
        second.execute(task_context("manual__2026-01-01T00:05", try_number=1))
    assert time.monotonic() - started < 5
    assert not isinstance(failure.value, AirflowFailException)  # the holder ends: a retry may run
    message = str(failure.value)
    assert len(message.splitlines()) == 1 and second._follower is None  # no Spark started
    assert message.startswith(f"checkpoint {checkpoint} is in use by run 'scheduled__2026-01-01' of DAG 'etl'")
    assert f"pid {first.pid} on " in message and "set max_active_runs=1 on the DAG" in message

    # Released: the next one takes it at once (and finds no record of a holder that died).
    assert first.stdin is not None
    first.stdin.close()
    assert first.wait(30) == 0
    third = start(HOLDER, checkpoint, "scheduled__2026-01-02")
    processes.append(third)
    assert held(third) is None

    # Killed with SIGKILL, it cannot release: the kernel drops its lock with the process.
    os.kill(third.pid, signal.SIGKILL)
    assert third.wait(30) == -signal.SIGKILL
    fourth = start(HOLDER, checkpoint, "scheduled__2026-01-03")
    processes.append(fourth)
    assert held(fourth) == third.pid  # the killed holder's record, replaced by the new one
    lock = lock_file(checkpoint)
    assert lock is not None and (holder := read_holder(lock)) is not None and holder.pid == fourth.pid


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_operator_holds_its_checkpoint_while_its_spark_job_runs(
    pg_server: PostgresServer,
    pg_database: str,
    pg_target: str,  # noqa: F811
    tmp_path: Path,
    processes: list[subprocess.Popen[str]],
) -> None:
    changelog, checkpoint = one_change(tmp_path / "changelog"), tmp_path / "checkpoint"
    first = start(APPLY, str(changelog), str(checkpoint), "scheduled__2026-01-01")
    processes.append(first)
    lock = lock_file(str(checkpoint))
    assert lock is not None
    holder = wait_until(lambda: lock.exists() and read_holder(lock), 120, "the first run holding the checkpoint")
    assert holder.run_id == "scheduled__2026-01-01" and holder.pid == first.pid and first.poll() is None

    # While its Spark job runs (start-up alone takes far longer than this), a second run fails at once.
    second = apply_operator(changelog, checkpoint, target_conn_id="replica", tables=["public.orders"])
    started = time.monotonic()
    with pytest.raises(AirflowException, match=r"is in use by run 'scheduled__2026-01-01' of DAG ") as failure:
        second.execute(task_context("manual__2026-01-01T00:05"))
    assert time.monotonic() - started < 5 and second._follower is None
    assert f"pid {first.pid} on " in str(failure.value)

    out, _ = first.communicate(timeout=400)
    assert first.returncode == 0, out[-3000:]
    result = json.loads(next(line for line in out.splitlines() if line.startswith("OPERATOR_RESULT "))[16:])
    assert result["records"] == 1 and result["upserted"] == 1
    assert read_holder(lock) is None  # released with an empty record

    # The retry takes the checkpoint and, sharing it, finds the change applied already.
    retried = second.execute(task_context("manual__2026-01-01T00:05", try_number=2))
    assert retried["records"] == 0
    with psycopg.connect(pg_server.dsn(pg_database)) as conn:
        assert conn.execute("select id, status from orders").fetchall() == [(1, "open")]
