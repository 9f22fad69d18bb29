"""Managing instances from outside: start one detached, stop it, ask for its status.

Used by ``airflow-cdc engine start|stop|status`` and by the Airflow hook's local mode. A
detached instance is ``airflow-cdc engine run`` in its own session, its output appended to
``<state.dir>/engine.log``; ``start`` returns once ``instance.json`` shows the new process
polling. If it exits first (or never gets there), the error leads with the cause on one line,
then that run's part of the log: ``engine.log`` keeps every run, and lines of an earlier run
would point at a problem that may be fixed already. ``client_for`` gives the control-API client
of a running instance on this machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_cdc.engine.errors import ApiUnavailableError, CdcError, RefusedError
from airflow_cdc.engine.health import DEAD_CAUSE, FAILED
from airflow_cdc.engine.private_files import open_private, private_dir
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.instance_files import LOG, STATUS, api_token, is_running, read_status, resolve, state_dir

RUNNING = "POLLING_TASKS"


def start_detached(
    config_file: Path, props: Mapping[str, Any], timeout: float = 120.0, *, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Start the instance of ``config_file`` in the background; its status once it polls.
    ``env`` is added to the instance's environment (a secret a driver reads from it, say
    ``PGPASSWORD``, so that it is written to no file)."""
    directory = state_dir(props)
    if is_running(directory):
        raise CdcError(f"instance {props.get('name')!r} is already running ({directory})")
    private_dir(directory)
    with (
        os.fdopen(open_private(directory / LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab") as log,
        open(os.devnull, "rb") as stdin,
    ):
        run_starts_at = log.tell()  # append mode: the end, where this run's lines begin
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow_cdc.cli", "engine", "run", "--config", str(config_file)],
            stdin=stdin,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not killed with the shell or the Airflow task that started it
            env=None if env is None else {**os.environ, **env},
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = read_status(directory)
        if status and status.get("pid") == process.pid and status.get("state") == RUNNING:
            return status
        if process.poll() is not None:
            what = f"the instance exited with code {process.returncode}"
            raise CdcError(_start_failure(directory, process.pid, run_starts_at, what))
        time.sleep(0.1)
    what = f"the instance (pid {process.pid}) did not reach {RUNNING} within {timeout:.0f}s"
    raise CdcError(_start_failure(directory, process.pid, run_starts_at, what))


#: Lines of a failed start's log shown under its cause.
FAILURE_LINES = 40
#: A line of our log format (cli.py): ``2026-01-01 12:00:00,000 ERROR name: message``.
_LOGGED_ERROR = re.compile(r"^\S+ \S+ (?:ERROR|CRITICAL) [\w.]+: (?P<message>.+)$")


def _start_failure(directory: Path, pid: int, run_starts_at: int, what: str) -> str:
    """The cause on the first line, then what happened and this run's log lines."""
    lines = _log_since(directory, run_starts_at)
    shown = "\n".join(f"  {line}" for line in lines[-FAILURE_LINES:]) or "  (it wrote nothing)"
    cause = failure_cause(read_status(directory), pid, lines)
    return f"{cause or what}\n{what}; {directory / LOG} of this run:\n{shown}"


def failure_cause(status: Mapping[str, Any] | None, pid: int, lines: list[str]) -> str | None:
    """The run's error, one line: from ``instance.json`` if this run wrote it (one of an earlier
    run may still be there), else the last error logged, else a traceback's last line."""
    if status and status.get("pid") == pid and status.get("error"):
        return " ".join(str(status["error"]).split())
    for line in reversed(lines):
        logged = _LOGGED_ERROR.match(line)
        if logged:
            return " ".join(logged["message"].split())
    if any(line.startswith("Traceback ") for line in lines):  # died before logging: the exception itself
        return next((line for line in reversed(lines) if line.strip() and not line[0].isspace()), None)
    return None


def _log_since(directory: Path, offset: int) -> list[str]:
    """The log's lines from byte ``offset`` on (all of it if it was truncated meanwhile)."""
    try:
        with open(directory / LOG, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(offset if offset <= size else 0)
            return log.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def stop(props: Mapping[str, Any], timeout: float = 60.0) -> dict[str, Any] | None:
    """SIGTERM (graceful: the engine commits and releases its slots), wait, then SIGKILL; the
    status it ended with. None when it was not running (its ``instance.json``, if any, is an
    earlier run's and says nothing about this stop)."""
    directory = state_dir(props)
    if not is_running(directory):
        return None
    status = read_status(directory)
    if not status or "pid" not in status:  # it holds the lock but has not written its pid yet
        raise CdcError(f"instance {props.get('name')!r} is starting ({directory}); stop it again in a moment")
    pid = int(status["pid"])
    _signal(pid, signal.SIGTERM)
    if not _wait_unlocked(directory, timeout):
        dump = _thread_dump(directory, pid)
        _signal(pid, signal.SIGKILL)
        if not _wait_unlocked(directory, 10):
            raise CdcError(f"instance {props.get('name')!r} (pid {pid}) survived SIGKILL")
        raise CdcError(
            f"instance {props.get('name')!r} did not stop within {timeout:.0f}s and was killed; "
            f"where its threads were when it was killed ({directory / LOG}):\n{dump}"
        )
    return read_status(directory)


#: How long a hung instance gets to write its threads' stacks (SIGUSR1) before it is killed.
DUMP_WAIT_S = 2.0


def _thread_dump(directory: Path, pid: int) -> str:
    """The stacks of a hung instance's threads, which it writes to its log on SIGUSR1
    (``faulthandler``, registered at its start): what a stop that never ends waited for."""
    try:
        before = (directory / LOG).stat().st_size
    except FileNotFoundError:
        before = 0
    _signal(pid, signal.SIGUSR1)
    deadline = time.monotonic() + DUMP_WAIT_S
    size = before
    while time.monotonic() < deadline:  # until the dump stops growing
        time.sleep(0.2)
        try:
            now = (directory / LOG).stat().st_size
        except FileNotFoundError:
            break
        if now == size and now > before:
            break
        size = now
    dumped = _log_since(directory, before)
    return "\n".join(dumped[-80:]) or "(it wrote none)"


def status(props: Mapping[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """A running instance's live status from its API, else the last one it wrote."""
    directory = state_dir(props)
    written = read_status(directory) or {"name": props.get("name"), "state": "NEVER_STARTED"}
    if not is_running(directory):
        if written.get("state") not in ("STOPPED", "NEVER_STARTED"):
            written["state"] = "DEAD"  # the process is gone without saying so (kill -9, OOM)
            written["phase"] = "stopped"  # not what it was doing when it last wrote
            written["health"], written["cause"] = FAILED, DEAD_CAUSE  # not the health it last wrote
        return written
    if not written.get("api"):
        return written
    try:
        with EngineClient(str(written["api"]), api_token(resolve(props)), timeout=timeout) as client:
            return client.status().to_json()
    except ApiUnavailableError as exc:  # it holds its lock but does not answer: dying, or hung
        return {**written, "api_error": str(exc)}


def api_address(props: Mapping[str, Any]) -> tuple[str, str]:
    """``(url, token)`` of the running instance of ``props`` on this machine: its address from
    ``instance.json``, its token from the config or ``api.token``. RefusedError if it is not
    running."""
    directory = state_dir(props)
    written = read_status(directory) or {}
    if not is_running(directory) or not written.get("api"):
        raise RefusedError(f"instance {props.get('name')!r} is not running with its API in {directory}")
    return str(written["api"]), api_token(resolve(props))


def client_for(props: Mapping[str, Any], *, timeout: float = 10.0) -> EngineClient:
    """The control-API client of the running instance of ``props`` on this machine."""
    url, token = api_address(props)
    return EngineClient(url, token, timeout=timeout)


def log_tail(directory: Path, lines: int = 20) -> str:
    try:
        text = (directory / LOG).read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        os.kill(pid, signum)


def _wait_unlocked(directory: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(directory):
            return True
        time.sleep(0.05)
    return False


__all__ = ["STATUS", "client_for", "failure_cause", "log_tail", "start_detached", "status", "stop"]
