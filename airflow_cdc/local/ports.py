"""Free loopback ports for the test servers.

Ports are picked OUTSIDE the kernel's ephemeral range (``ip_local_port_range``): the kernel
hands ephemeral ports to outgoing connections, so a port from that range may be taken by some
client between our check and the server's bind, or while a broker is stopped and about to be
restarted on the same port. Outside that range only another server binding on purpose can
race us, and the services retry with another port when their bind fails.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_LOWEST = 20000
_handed_out: set[int] = set()
_lock = threading.Lock()
_random = random.Random()


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _candidates() -> range:
    low, high = ephemeral_range()
    if low - _LOWEST >= 1000:
        return range(_LOWEST, low)
    if 65535 - high >= 1000:
        return range(high + 1, 65536)
    return range(0)  # no room outside the ephemeral range: let the kernel choose


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, not handed out before by this process."""
    candidates = _candidates()
    with _lock:
        for _ in range(200):
            if not candidates:
                break
            port = _random.choice(candidates)
            if port not in _handed_out and port_is_free(port, host):
                _handed_out.add(port)
                return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        _handed_out.add(port)
        return port


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
