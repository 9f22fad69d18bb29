"""A throwaway PostgreSQL cluster with ``wal_level=logical``.

PostgreSQL refuses to run as root, so ``initdb`` and ``postgres`` run as the ``postgres`` user
(``runuser -u postgres --``) in a directory that user owns. ``CDC_TEST_PG_DSN`` points the tests
at an existing server instead (it must have ``wal_level=logical`` and a user that may create
databases and replication slots).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import psycopg

from tests.services.ports import ServiceError, free_port, log_tail, wait_ready

SETTINGS = {
    "wal_level": "logical",
    "max_replication_slots": "40",
    "max_wal_senders": "40",
    "max_connections": "200",
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_sender_timeout": "60s",
    "shared_buffers": "128MB",
    "max_wal_size": "2GB",
    "log_min_messages": "warning",
}


def find_bindir() -> Path | None:
    """The newest installed server's bin directory (Debian: /usr/lib/postgresql/<v>/bin)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("postgres") or shutil.which("pg_ctl")
    return Path(found).parent if found else None


def _runner() -> list[str]:
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServiceError("running as root but there is no 'postgres' user to run the server as") from None
    return ["runuser", "-u", "postgres", "--"]


class PostgresServer:
    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "postgres"
        self.password = ""
        self.bindir = find_bindir()
        self.external_dsn = os.environ.get("CDC_TEST_PG_DSN")
        self.directory: Path | None = None
        self.log_path = Path("/dev/null")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def available(self) -> bool:
        return bool(self.external_dsn) or self.bindir is not None

    def dsn(self, dbname: str = "postgres", **extra: str) -> str:
        """A libpq conninfo string for ``dbname`` (with ``extra`` parameters)."""
        if self.external_dsn:
            info = psycopg.conninfo.conninfo_to_dict(self.external_dsn)
            info.update(dbname=dbname, **extra)
            return psycopg.conninfo.make_conninfo(**info)
        params = {"host": self.host, "port": str(self.port), "user": self.user, "dbname": dbname, **extra}
        return psycopg.conninfo.make_conninfo(**params)

    def connect(self, dbname: str = "postgres", **kwargs: object) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.dsn(dbname), autocommit=True, **kwargs)  # type: ignore[arg-type]

    def start(self) -> PostgresServer:
        if self.external_dsn:
            info = psycopg.conninfo.conninfo_to_dict(self.external_dsn)
            self.host, self.port = str(info.get("host", "127.0.0.1")), int(info.get("port", 5432))
            self.user = str(info.get("user", "postgres"))
            return self
        if self.bindir is None:
            raise ServiceError("PostgreSQL server binaries not found (apt-get install postgresql)")
        runner = _runner()
        self.directory = Path(tempfile.mkdtemp(prefix="cdc-pg-"))
        data = self.directory / "data"
        self.log_path = self.directory / "postgres.log"
        if runner:
            shutil.chown(self.directory, "postgres", "postgres")
        init = subprocess.run(
            [
                *runner,
                str(self.bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
            capture_output=True,
            text=True,
        )
        if init.returncode != 0:
            raise ServiceError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
        with open(data / "pg_hba.conf", "w") as hba:
            hba.write(
                "local all all trust\nlocal replication all trust\n"
                "host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
            )
        for attempt in range(5):
            self.port = free_port()
            options = [
                f"-c{k}={v}"
                for k, v in {**SETTINGS, "port": str(self.port), "unix_socket_directories": str(self.directory)}.items()
            ]
            log = open(self.log_path, "ab")  # noqa: SIM115 - the server keeps writing to it
            self._process = subprocess.Popen(
                [*runner, str(self.bindir / "postgres"), "-D", str(data), *options],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            try:
                wait_ready(
                    lambda: self._ping(), timeout=60, what="PostgreSQL", process=self._process, log=self.log_path
                )
                return self
            except ServiceError:
                if attempt == 4 or "could not bind" not in log_tail(self.log_path):
                    self.stop()
                    raise
        return self

    def _ping(self) -> bool:
        with psycopg.connect(self.dsn(), connect_timeout=2) as conn:
            return conn.execute("select 1").fetchone() == (1,)

    def stop(self) -> None:
        if self._process is not None:
            # SIGINT: PostgreSQL's "fast" shutdown; the session leader is runuser, so signal the group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGINT)
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(10)
            self._process = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
