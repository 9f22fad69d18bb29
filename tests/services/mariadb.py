"""A throwaway MariaDB with a ROW binlog (``log_bin``, ``binlog_format=ROW``,
``binlog_row_image=FULL``). ``CDC_TEST_MYSQL_URL`` (``mysql://user:pw@host:port``) points the
tests at an existing server instead."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pymysql

from tests.services.ports import ServiceError, free_port, log_tail, stop_process, wait_ready


def find_mariadbd() -> Path | None:
    for name in ("mariadbd", "mysqld"):
        found = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
        if found:
            return Path(found)
    return None


class MariaDBServer:
    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "root"
        self.password = ""
        self.server_id = 1
        self.binary = find_mariadbd()
        self.external_url = os.environ.get("CDC_TEST_MYSQL_URL")
        self.directory: Path | None = None
        self.log_path = Path("/dev/null")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def available(self) -> bool:
        return bool(self.external_url) or (self.binary is not None and shutil.which("mariadb-install-db") is not None)

    def connect(self, **kwargs: Any) -> pymysql.connections.Connection:  # type: ignore[type-arg]
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "autocommit": True,
            **kwargs,
        }
        return pymysql.connect(**params)

    def start(self) -> MariaDBServer:
        if self.external_url:
            url = urlparse(self.external_url)
            self.host, self.port = url.hostname or "127.0.0.1", url.port or 3306
            self.user, self.password = url.username or "root", url.password or ""
            return self
        if not self.available:
            raise ServiceError("MariaDB server binaries not found (apt-get install mariadb-server)")
        self.directory = Path(tempfile.mkdtemp(prefix="cdc-mariadb-"))
        data = self.directory / "data"
        self.log_path = self.directory / "mariadb.log"
        init = subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={data}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
        )
        if init.returncode != 0:
            raise ServiceError(f"mariadb-install-db failed:\n{init.stdout}\n{init.stderr}")
        for attempt in range(5):
            self.port = free_port()
            args = [
                str(self.binary),
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={self.directory}/mysql.sock",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--pid-file={self.directory}/mysql.pid",
                f"--log-bin={self.directory}/binlog",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                f"--server-id={self.server_id}",
                f"--log-error={self.log_path}",
                "--skip-name-resolve",
                "--innodb-flush-log-at-trx-commit=2",
                "--innodb-buffer-pool-size=64M",
                "--user=root",
                "--sync-binlog=0",
                "--skip-log-bin-compress",
            ]
            self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_ready(self._ping, timeout=60, what="MariaDB", process=self._process, log=self.log_path)
                return self
            except ServiceError:
                if attempt == 4 or "Address already in use" not in log_tail(self.log_path):
                    self.stop()
                    raise
        return self

    def _ping(self) -> bool:
        with self.connect(connect_timeout=2) as conn, conn.cursor() as cur:
            cur.execute("select 1")
            return cur.fetchone() == (1,)

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process, signal.SIGTERM, timeout=30)
            self._process = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> MariaDBServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
