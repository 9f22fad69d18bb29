"""A throwaway PostgreSQL cluster with ``wal_level=logical``, on a free loopback port.

PostgreSQL refuses to run as root, so when we are root the cluster directory belongs to the
``postgres`` user and ``initdb``, ``postgres`` and ``pg_ctl`` run as that user. The postmaster
is a direct child of this process (not a daemon), so a dying server is noticed at once.

``PostgresServer.from_env()`` uses ``CDC_TEST_PG_DSN`` (libpq conninfo or URI of an existing
server with ``wal_level=logical`` whose user may create databases and replication slots)
instead of starting one.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql

from airflow_cdc.local.process import BinaryNotFound, LocalServer, ServiceError, stop_process

ENV_VAR = "CDC_TEST_PG_DSN"

#: Server settings (``-c name=value``); port and socket directory are added per start.
SETTINGS: dict[str, str] = {
    "wal_level": "logical",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
    "max_connections": "200",
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    # Not "off": with fsync=off a synchronous commit costs nothing more (measured: 3000
    # autocommit inserts 0.49 s on, 0.57 s off), while "off" makes a commit decodable only
    # after the WAL writer's next flush (~200 ms), so a test that commits and then reads the
    # slot at once (pg_logical_slot_*_changes, --endpos) sees nothing.
    "synchronous_commit": "on",
    "full_page_writes": "off",
    "wal_sender_timeout": "60s",
    "log_line_prefix": "%m [%p] %q%u@%d ",
}

_SERVER_PROGRAMS = ("postgres", "initdb", "pg_ctl")
_BIND_FAILED = ("could not bind", "could not create any TCP/IP sockets", "Address already in use")


def _version(bindir: Path) -> tuple[int, ...]:
    try:
        out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = re.search(r"(\d+)(?:\.(\d+))?", out.stdout)
    return tuple(int(part) for part in found.groups() if part) if found else ()


def _pg_config_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if not pg_config:
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    return None


def find_server_bindir() -> Path | None:
    """The bin directory of the newest installed server (with postgres, initdb and pg_ctl):
    Debian's /usr/lib/postgresql/<v>/bin, ``pg_config --bindir``, or PATH."""
    candidates = [Path(p) for p in Path("/usr/lib/postgresql").glob("*/bin")]
    candidates.append(_pg_config_bindir())  # type: ignore[arg-type]
    on_path = shutil.which("postgres") or shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    complete = {c for c in candidates if c is not None and all(os.access(c / p, os.X_OK) for p in _SERVER_PROGRAMS)}
    return max(complete, key=lambda c: (_version(c), str(c)), default=None)


def find_client_bindir() -> Path | None:
    """Where client programs (psql, pg_recvlogical) live, for a server we did not start."""
    for bindir in (_pg_config_bindir(), find_server_bindir()):
        if bindir is not None and (bindir / "pg_recvlogical").exists():
            return bindir
    on_path = shutil.which("pg_recvlogical") or shutil.which("psql")
    return Path(on_path).parent if on_path else None


def _as_postgres() -> dict[str, Any]:
    """Popen arguments that run the child as ``postgres`` when we are root (the equivalent of
    ``runuser -u postgres --``, without runuser staying around as the server's parent)."""
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServiceError("running as root but there is no 'postgres' user to run PostgreSQL as") from None
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


class PostgresServer(LocalServer):
    """A PostgreSQL server: started here (``start()``) or an existing one (``from_env()``).

    ``stop()`` then ``start()`` restarts the same cluster (same port, data kept);
    ``close()`` stops it and deletes its directory.
    """

    what = "PostgreSQL"
    bind_failed = _BIND_FAILED
    kind, log_name, env_var = "pg", "postgres.log", ENV_VAR
    stale_signal = signal.SIGQUIT

    def __init__(
        self,
        *,
        bindir: Path | None = None,
        settings: dict[str, str] | None = None,
        startup_timeout: float = 60.0,
        external_dsn: str | None = None,
    ) -> None:
        self.external_dsn = external_dsn
        self.settings = {**SETTINGS, **(settings or {})}
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "postgres"
        self.password = ""
        self._params: dict[str, Any] = {}
        if external_dsn:
            self._params = conninfo.conninfo_to_dict(external_dsn)
            self.host = str(self._params.get("host") or "127.0.0.1")
            self.port = int(self._params.get("port") or 5432)
            self.user = str(self._params.get("user") or os.environ.get("PGUSER") or "postgres")
            self.password = str(self._params.get("password") or "")
            self.bindir = bindir or find_client_bindir()
        else:
            self.bindir = bindir or find_server_bindir()
        self.directory: Path | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_env(cls, **kwargs: Any) -> PostgresServer:
        """An existing server if ``CDC_TEST_PG_DSN`` is set, else one this class will start."""
        return cls(external_dsn=os.environ.get(ENV_VAR) or None, **kwargs)

    # --- connection info -----------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def external(self) -> bool:
        return bool(self.external_dsn)

    def dsn(self, dbname: str = "postgres", **params: Any) -> str:
        """A libpq conninfo string for ``dbname``; ``params`` add or override keywords
        (e.g. ``replication="database"``, ``application_name=...``)."""
        base = {**self._params} if self.external else {"host": self.host, "port": self.port, "user": self.user}
        return conninfo.make_conninfo(**{**base, "dbname": dbname, **params})

    def connect(self, dbname: str = "postgres", **kwargs: Any) -> psycopg.Connection[Any]:
        """An autocommit psycopg connection (pass ``autocommit=False`` to change that)."""
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(self.dsn(dbname), **kwargs)

    def program(self, name: str) -> Path:
        """Path of a PostgreSQL program such as ``pg_recvlogical`` or ``psql``."""
        if self.bindir is None or not (self.bindir / name).exists():
            found = shutil.which(name)
            if found:
                return Path(found)
            raise BinaryNotFound(f"PostgreSQL program {name!r} not found (install postgresql-client)")
        return self.bindir / name

    # --- databases -------------------------------------------------------------------------

    def create_database(self, name: str | None = None) -> str:
        name = name or f"t_{uuid.uuid4().hex[:16]}"
        with self.connect() as conn:
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        return name

    def drop_database(self, name: str, timeout: float = 30.0) -> None:
        """Drop ``name`` with its replication slots, ending any session or WAL sender on it.
        New connections are refused first: a client that retries (Debezium on Connect, whose
        task outlives the connector's deletion a while) would otherwise create its slot again
        and reconnect between the slots' drop and the database's."""
        with self.connect() as conn:
            exists = conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone()
            if exists is None:
                return
            conn.execute(sql.SQL("alter database {} with allow_connections false").format(sql.Identifier(name)))
            deadline = time.monotonic() + timeout
            while True:
                conn.execute(
                    "select pg_terminate_backend(active_pid) from pg_replication_slots"
                    " where database = %s and active_pid is not null",
                    (name,),
                )
                slots = conn.execute(
                    "select slot_name from pg_replication_slots where database = %s and not active", (name,)
                ).fetchall()
                for (slot,) in slots:
                    with contextlib.suppress(psycopg.errors.UndefinedObject, psycopg.errors.ObjectInUse):
                        conn.execute("select pg_drop_replication_slot(%s)", (slot,))
                left = conn.execute("select count(*) from pg_replication_slots where database = %s", (name,))
                if left.fetchone() == (0,):
                    try:  # a session that was connecting before the refusal may take a slot yet
                        conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
                        return
                    except psycopg.errors.ObjectInUse:
                        pass
                if time.monotonic() > deadline:
                    raise ServiceError(f"replication slots on database {name!r} still in use after {timeout}s")
                time.sleep(0.05)

    # --- lifecycle -------------------------------------------------------------------------

    def _check_installed(self) -> None:
        if self.bindir is None or not all((self.bindir / p).exists() for p in _SERVER_PROGRAMS):
            raise BinaryNotFound(
                f"PostgreSQL server binaries (postgres, initdb, pg_ctl) not found in {self.bindir} "
                "(install postgresql; looked in /usr/lib/postgresql/*/bin, `pg_config --bindir` and PATH)"
            )

    def _initialize(self) -> None:
        """initdb, and a pg_hba.conf that trusts local connections."""
        assert self.directory is not None
        as_postgres = _as_postgres()
        if as_postgres:
            shutil.chown(self.directory, "postgres", "postgres")
        initdb = [
            str(self.bindir / "initdb"),  # type: ignore[operator]
            f"--pgdata={self.data_dir}",
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        ]
        done = subprocess.run(initdb, capture_output=True, text=True, cwd=self.directory, **as_postgres)
        if done.returncode != 0:
            raise ServiceError(f"initdb failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        (self.data_dir / "pg_hba.conf").write_text(  # type: ignore[operator]
            "# written by airflow_cdc/local/postgres.py: trust everything local\n"
            "local all         all              trust\n"
            "local replication all              trust\n"
            "host  all         all 127.0.0.1/32 trust\n"
            "host  replication all 127.0.0.1/32 trust\n"
        )

    def _command(self) -> tuple[list[str], dict[str, Any]]:
        options = {**self.settings, "port": str(self.port), "unix_socket_directories": str(self.directory)}
        args = [str(self.bindir / "postgres"), "-D", str(self.data_dir)]  # type: ignore[operator]
        return args + [f"-c{name}={value}" for name, value in options.items()], _as_postgres()

    def _answers(self) -> bool:
        with psycopg.connect(self.dsn(), connect_timeout=2, autocommit=True) as conn:
            return conn.execute("select 1").fetchone() == (1,)

    def _check_external(self) -> None:
        try:
            with self.connect(connect_timeout=10) as conn:
                wal_level = conn.execute("show wal_level").fetchone()
        except psycopg.Error as exc:
            raise ServiceError(f"cannot connect to {ENV_VAR} server: {exc}") from exc
        if wal_level != ("logical",):
            raise ServiceError(f"the {ENV_VAR} server has wal_level={wal_level[0] if wal_level else '?'}, not logical")

    def _halt(self, process: subprocess.Popen[bytes]) -> None:
        """``pg_ctl stop -m fast``, then immediate, then SIGKILL; the cluster directory stays."""
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(
                [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "30"],  # type: ignore[operator]
                capture_output=True,
                timeout=40,
                cwd=self.directory,
                **_as_postgres(),
            )
        # pg_ctl has returned once postmaster.pid is gone; reap the child (or force it down).
        stop_process(process, signal.SIGQUIT, timeout=10)
