"""Process plumbing shared by the test servers: errors, readiness polling, stopping, and
cleanup of directories and processes left behind by a test run that was killed."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from airflow_cdc.local.ports import free_port

#: Every service directory is ``$TMPDIR/cdc-test-<kind>-XXXXXXXX``.
DIR_PREFIX = "cdc-test-"


class ServiceError(RuntimeError):
    """A test server failed to start, answer or stop; the message carries its log tail."""


class BinaryNotFound(ServiceError):
    """The server's program is not installed. The only failure a fixture turns into a skip."""


class ServiceExited(ServiceError):
    """The server process exited while starting; ``log`` is its log tail."""

    def __init__(self, what: str, returncode: int | None, log: str) -> None:
        super().__init__(f"{what} exited with code {returncode} while starting; log tail:\n{log}")
        self.log = log


def log_tail(path: Path | None, lines: int = 40) -> str:
    if path is None:
        return "(no log)"
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    process: subprocess.Popen[bytes] | None = None,
    log_path: Path | None = None,
    interval: float = 0.05,
) -> float:
    """Poll ``check`` until it returns true; return the seconds waited.

    Any exception from ``check`` means "not yet" (a half-started server refuses or resets
    connections). Fails at once with the log tail if ``process`` exits, and at the deadline
    with the last error seen and the log tail.
    """
    started = time.monotonic()
    deadline = started + timeout
    last_error: BaseException | None = None
    while True:
        if process is not None and process.poll() is not None:
            raise ServiceExited(what, process.returncode, log_tail(log_path))
        try:
            if check():
                return time.monotonic() - started
            last_error = None
        except Exception as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            raise ServiceError(
                f"{what} not ready after {timeout:.0f}s (last check error: {last_error!r}); "
                f"log tail ({log_path}):\n{log_tail(log_path)}"
            )
        time.sleep(interval)


def stop_process(process: subprocess.Popen[bytes], sig: int, *, timeout: float) -> None:
    """Send ``sig`` and wait up to ``timeout``; then SIGKILL. Always reaps the process."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(30)


# --- identity of processes, so a later run can clean up after a killed one -----------------


def _process_token(pid: int, *, living: bool = False) -> str | None:
    """``pid:starttime`` (starttime from /proc, so a reused pid never matches); with
    ``living``, None for a zombie (dead, waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if living and fields[0] in ("Z", "X"):
        return None
    return f"{pid}:{fields[19]}"


def _alive(token: str) -> bool:
    pid = token.split(":", 1)[0]
    return pid.isdigit() and _process_token(int(pid), living=True) == token


def make_service_dir(kind: str) -> Path:
    """A fresh private directory, tagged with this process as its owner."""
    directory = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{kind}-"))
    (directory / "owner").write_text(_process_token(os.getpid()) or str(os.getpid()))
    return directory


def record_server(directory: Path, pid: int) -> None:
    token = _process_token(pid)
    if token:
        (directory / "server").write_text(token)


def sweep_stale(kind: str, stop_signal: int = signal.SIGTERM) -> list[Path]:
    """Stop the server and delete the directory of every ``kind`` service whose owning process
    is gone (a run killed with SIGKILL cannot clean up). Only the exact process recorded in
    the directory (same pid and start time) is ever signalled."""
    swept = []
    for directory in Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}{kind}-*"):
        try:
            owner = (directory / "owner").read_text().strip()
        except OSError:
            continue  # not ours, or still being created
        if _alive(owner):
            continue
        with contextlib.suppress(OSError):
            server = (directory / "server").read_text().strip()
            if _alive(server):
                _terminate(int(server.split(":", 1)[0]), server, stop_signal)
        shutil.rmtree(directory, ignore_errors=True)
        swept.append(directory)
    return swept


def _terminate(pid: int, token: str, sig: int, timeout: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while _alive(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(token):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --- close whatever is still open when the interpreter exits -----------------------------


class _Closable(Protocol):
    def close(self) -> None: ...


_open_services: weakref.WeakSet[_Closable] = weakref.WeakSet()


def track(service: _Closable) -> None:
    """Close ``service`` at interpreter exit if nobody did (scripts, benchmarks, Ctrl-C)."""
    _open_services.add(service)


def untrack(service: _Closable) -> None:
    _open_services.discard(service)


@atexit.register
def _close_all() -> None:
    for service in list(_open_services):
        with contextlib.suppress(Exception):
            service.close()


class LocalServer:
    """What every local server shares: starting (or checking an external server), stopping,
    closing, context management, its log, its repr.

    :meth:`start` is the same for every server: an external one is only checked; a stopped one
    comes back with its data (same directory, same port); a first start sweeps what killed runs
    left, makes the service directory, lets the subclass prepare it (``_initialize``: initdb,
    kafka-storage format, ...) and runs the program until it answers. Subclasses set ``kind``,
    ``env_var`` and ``log_name``, and define ``external``, ``address``, ``_command()``,
    ``_answers()`` and ``_check_external()``; ``_check_installed()``, ``_initialize()`` and
    ``_halt()`` when the defaults do not fit.
    """

    #: Shown in messages ("PostgreSQL on port 21808").
    what: ClassVar[str] = "server"
    #: Log lines that mean the port was taken: start again on another port.
    bind_failed: ClassVar[tuple[str, ...]] = ()
    #: The service directory is ``$TMPDIR/cdc-test-<kind>-XXXXXXXX``; its log file is ``log_name``.
    kind: ClassVar[str] = "server"
    log_name: ClassVar[str] = "server.log"
    #: Names an existing server to use instead of starting one (``from_env()``).
    env_var: ClassVar[str] = ""
    #: What stops the server: this signal, then SIGKILL after ``stop_timeout`` seconds. A stale
    #: server that a killed run left behind gets ``stale_signal``.
    stop_signal: ClassVar[int] = signal.SIGTERM
    stop_timeout: ClassVar[float] = 30.0
    stale_signal: ClassVar[int] = signal.SIGTERM

    directory: Path | None
    log_path: Path | None
    port: int
    startup_timeout: float
    startup_seconds: float | None
    #: Successful starts of this server (a restart keeps the ports a first start chose).
    starts: int = 0
    _process: subprocess.Popen[bytes] | None

    @property
    def external(self) -> bool:
        raise NotImplementedError

    @property
    def address(self) -> str:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self.external or (self._process is not None and self._process.poll() is None)

    @property
    def data_dir(self) -> Path | None:
        return self.directory / "data" if self.directory else None

    def start(self) -> Self:
        """Start the server, or bring a stopped one back on the same port with its data (no-op
        when running); an external server is only checked. Raises ``BinaryNotFound`` when the
        program is not installed, ``ServiceError`` with the log tail for any other failure."""
        if self.external:
            self._check_external()
            return self
        if self.running:
            return self
        self._check_installed()
        started = time.monotonic()
        track(self)
        try:
            if self.directory is None:
                sweep_stale(self.kind, self.stale_signal)
                self.directory = make_service_dir(self.kind)
                self.log_path = self.directory / self.log_name
                self._initialize()
            self._run()
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - started
        self.starts += 1
        return self

    def stop(self) -> None:
        """Stop the server (see ``stop_signal``); its directory stays, so ``start()`` brings it
        back. Not possible for an external server."""
        if self.external:
            raise ServiceError(f"the {self.what} from {self.env_var} is not ours to stop or restart")
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            self._halt(process)

    def _halt(self, process: subprocess.Popen[bytes]) -> None:
        stop_process(process, self.stop_signal, timeout=self.stop_timeout)

    def _check_installed(self) -> None:
        """Raise ``BinaryNotFound`` (or ``JvmPartsMissing``) when the program is not installed."""

    def _initialize(self) -> None:
        """Prepare a new service directory before the first start (initdb, format, ...)."""

    def _check_external(self) -> None:
        """Fail with a ServiceError when the external server is unusable."""
        raise NotImplementedError

    def _answers(self) -> bool:
        """A real client call that succeeds once the server serves."""
        raise NotImplementedError

    def _command(self) -> tuple[list[str], dict[str, Any]]:
        """The program's argv, and extra ``Popen`` arguments, to serve on ``self.port``."""
        raise NotImplementedError

    def _run(self) -> None:
        """Launch the server and wait until it answers. When the bind fails, a first start picks
        another port; a restart keeps its port and tries again until the deadline."""
        restart = self.port != 0
        deadline = time.monotonic() + self.startup_timeout
        for attempt in range(1, 100):
            if not restart:
                self.port = free_port()
            args, extra = self._command()
            with open(self.log_path, "ab") as log:  # type: ignore[arg-type]
                self._process = subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.directory,
                    start_new_session=True,  # a Ctrl-C reaches the caller, which stops us cleanly
                    **extra,
                )
            record_server(self.directory, self._process.pid)  # type: ignore[arg-type]
            try:
                wait_until(
                    self._answers,
                    timeout=max(1.0, deadline - time.monotonic()),
                    what=f"{self.what} on port {self.port}",
                    process=self._process,
                    log_path=self.log_path,
                )
                return
            except ServiceExited as exc:
                self._process = None
                bind_failed = any(text in exc.log for text in self.bind_failed)
                if not bind_failed or time.monotonic() > deadline or (not restart and attempt >= 5):
                    raise
                if restart:
                    time.sleep(0.2)  # the old process's port is still being released
        raise ServiceError(f"{self.what} did not start on port {self.port}")

    def restart(self) -> Self:
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the server and delete its directory (log included). Safe to call twice."""
        untrack(self)
        if self.external:
            return
        try:
            self.stop()
        finally:
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)
                self.directory = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "external" if self.external else str(self.directory)
        return f"<{type(self).__name__} {self.address} {where} running={self.running}>"

    def log(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        return log_tail(self.log_path, lines)
