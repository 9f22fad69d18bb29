"""Free loopback ports and readiness polling."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


class ServiceError(RuntimeError):
    """A test server failed to start or stop; the message carries its log tail."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def wait_ready(
    ready: Callable[[], bool], *, timeout: float, what: str, process: subprocess.Popen[bytes] | None, log: Path
) -> None:
    """Poll ``ready`` until true; fail early if ``process`` died, with the log tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServiceError(f"{what} exited with {process.returncode} while starting:\n{log_tail(log)}")
        try:
            if ready():
                return
        except Exception:  # not ready yet: any error from a half-started server means "poll again"
            pass
        time.sleep(0.05)
    raise ServiceError(f"{what} not ready within {timeout}s:\n{log_tail(log)}")


def stop_process(process: subprocess.Popen[bytes], sig: int, timeout: float = 15.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)
