"""A throwaway MariaDB with a ROW binlog, on a free loopback port.

``log_bin=ON``, ``binlog_format=ROW`` and ``binlog_row_image=FULL``; ``binlog_row_metadata`` keeps
the server's default (``NO_LOG``), as a user's server has it (the source needs no more). ``root`` has an empty
password over TCP on 127.0.0.1. The server runs as root (``--user=root``) in a private directory.

``MariaDBServer.from_env()`` uses ``CDC_TEST_MYSQL_URL`` (``mysql://user:pw@host:port``) instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pymysql

from airflow_cdc.engine.errors import MissingDependencyError
from airflow_cdc.local.process import BinaryNotFound, LocalServer, ServiceError

ENV_VAR = "CDC_TEST_MYSQL_URL"
_BIND_FAILED = ("Address already in use", "Can't start server: Bind on TCP/IP port")
_SEARCH = ("/usr/sbin", "/usr/bin", "/usr/local/mysql/bin", "/usr/local/bin")


def _find(*names: str) -> Path | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
        for directory in _SEARCH:
            path = Path(directory) / name
            if os.access(path, os.X_OK):
                return path
    return None


def find_server() -> Path | None:
    return _find("mariadbd", "mysqld")


def find_install_db() -> Path | None:
    return _find("mariadb-install-db", "mysql_install_db")


class MariaDBServer(LocalServer):
    """A MariaDB server: started here (``start()``) or an existing one (``from_env()``).

    ``stop()`` then ``start()`` restarts it (same port, data and binlogs kept);
    ``close()`` stops it and deletes its directory.
    """

    what = "MariaDB"
    bind_failed = _BIND_FAILED
    kind, log_name, env_var = "mariadb", "mariadb.log", ENV_VAR

    def __init__(
        self,
        *,
        server_id: int = 1,
        extra_args: list[str] | None = None,
        startup_timeout: float = 60.0,
        external_url: str | None = None,
    ) -> None:
        self.external_url = external_url
        self.server_id = server_id
        self.extra_args = list(extra_args or [])
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "root"
        self.password = ""
        if external_url:
            url = urlparse(external_url)
            if url.scheme not in ("mysql", "mariadb"):
                raise ServiceError(f"{ENV_VAR} must look like mysql://user:password@host:port, not {external_url!r}")
            self.host = url.hostname or "127.0.0.1"
            self.port = url.port or 3306
            self.user = unquote(url.username or "root")
            self.password = unquote(url.password or "")
        self.binary = find_server()
        self.install_db = find_install_db()
        self.directory: Path | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_env(cls, **kwargs: Any) -> MariaDBServer:
        """An existing server if ``CDC_TEST_MYSQL_URL`` is set, else one this class will start."""
        return cls(external_url=os.environ.get(ENV_VAR) or None, **kwargs)

    # --- connection info -----------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def external(self) -> bool:
        return bool(self.external_url)

    @property
    def url(self) -> str:
        return f"mysql://{self.user}:{self.password}@{self.host}:{self.port}"

    def connection_params(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for ``pymysql.connect`` (and python-mysql-replication)."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password, **overrides}

    def connect(self, **kwargs: Any) -> pymysql.connections.Connection:
        """A pymysql connection, autocommit unless ``autocommit=False`` is passed."""
        kwargs.setdefault("autocommit", True)
        return pymysql.connect(**self.connection_params(**kwargs))

    def binlog_reader(self, **kwargs: Any) -> Any:
        """A python-mysql-replication ``BinLogStreamReader`` on this server's binlog (``kwargs``
        as its own: ``server_id``, ``only_events``, ...). Needs the ``mysql`` extra."""
        try:
            from pymysqlreplication import BinLogStreamReader
        except ImportError as exc:
            raise MissingDependencyError("pymysqlreplication", "mysql") from exc
        return BinLogStreamReader(connection_settings=self.connection_params(), is_mariadb=True, **kwargs)

    # --- databases -------------------------------------------------------------------------

    def create_database(self, name: str | None = None) -> str:
        name = name or f"t_{uuid.uuid4().hex[:16]}"
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"create database `{name}` character set utf8mb4")
        return name

    def drop_database(self, name: str) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"drop database if exists `{name}`")

    # --- lifecycle -------------------------------------------------------------------------

    def _check_installed(self) -> None:
        if self.binary is None or self.install_db is None:
            raise BinaryNotFound(
                "MariaDB server binaries not found (install mariadb-server: mariadbd, mariadb-install-db)"
            )

    def _initialize(self) -> None:
        """mariadb-install-db: the system tables, root with an empty password."""
        done = subprocess.run(
            [
                str(self.install_db),
                "--no-defaults",
                f"--datadir={self.data_dir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                "--user=root",
            ],
            capture_output=True,
            text=True,
            cwd=self.directory,
        )
        if done.returncode != 0:
            raise ServiceError(f"mariadb-install-db failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def _args(self) -> list[str]:
        d = self.directory
        return [
            str(self.binary),
            "--no-defaults",
            "--log-basename=cdc",  # first: it resets the log and pid file names given before it
            f"--datadir={self.data_dir}",
            f"--socket={d}/mysqld.sock",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={d}/mysqld.pid",
            f"--log-error={self.log_path}",
            "--log-bin=cdc-bin",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            f"--server-id={self.server_id}",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--max-connections=200",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--innodb-buffer-pool-size=128M",
            "--skip-name-resolve",
            "--user=root",
            *self.extra_args,
        ]

    def _command(self) -> tuple[list[str], dict[str, Any]]:
        # The server logs to --log-error; stderr (option errors before that file is open) is
        # appended to the same file.
        return self._args(), {}

    def _answers(self) -> bool:
        # Read and write timeouts too: something else accepting on the port and never answering
        # would otherwise hang the startup forever (connect_timeout covers only the handshake).
        with self.connect(connect_timeout=2, read_timeout=2, write_timeout=2) as conn, conn.cursor() as cur:
            cur.execute("select 1")
            return bool(cur.fetchone() == (1,))

    def _check_external(self) -> None:
        try:
            with self.connect(connect_timeout=10) as conn, conn.cursor() as cur:
                cur.execute("select @@log_bin, @@binlog_format, @@binlog_row_image")
                settings = cur.fetchone()
        except pymysql.MySQLError as exc:
            raise ServiceError(f"cannot connect to the {ENV_VAR} server: {exc}") from exc
        if settings is None or settings[0] != 1 or settings[1] != "ROW" or settings[2] != "FULL":
            raise ServiceError(
                f"the {ENV_VAR} server needs log_bin=ON, binlog_format=ROW, binlog_row_image=FULL; it has {settings}"
            )
