"""A throwaway Spark standalone cluster: one master and one worker, started with pyspark's own
``spark-class`` (pip's pyspark has no ``sbin/start-master.sh``), on loopback (ADR 0002).

It is what ``spark-submit --master spark://…`` meets on a real cluster: executors in their own
JVMs and Python workers, fed the jars and Python files the driver ships them, so the apply job
is tested the way a cluster runs it and not only on ``local[*]``.

- ``SPARK_HOME`` is pyspark's package directory; ``SPARK_CONF_DIR`` is the cluster's own (empty)
  directory, so no ``spark-env.sh`` of the machine is read.
- The master listens on a free port, its web UI on another; ``spark.port.maxRetries=0`` makes a
  taken port a failed start (retried here on other ports) instead of Spark silently binding the
  next one, and the master's REST submission server (fixed port 6066) is off.
- The worker takes ports the kernel picks (nobody needs to know them), ``cores`` and ``memory``
  (2 cores, 2g by default: one executor of Spark's default 1g fits), a work directory and a
  scratch directory under the cluster's directory.
- Ready means the master's UI (``/json/``) lists the worker ALIVE; polled with a deadline.
- ``stop()`` ends the worker first (it ends its executors), then the master.

``SparkStandaloneCluster.from_env()`` uses ``CDC_TEST_SPARK_MASTER`` (``spark://host:port`` of
an existing master with at least one worker) instead of starting one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Self

import httpx

from airflow_cdc.local import jvm
from airflow_cdc.local.ports import free_port, port_open
from airflow_cdc.local.process import (
    DIR_PREFIX,
    BinaryNotFound,
    LocalServer,
    ServiceError,
    _alive,
    _process_token,
    _terminate,
    log_tail,
    stop_process,
    wait_until,
)

ENV_VAR = "CDC_TEST_SPARK_MASTER"
KIND = "spark"
#: The daemons' own heap (master and worker JVMs; executors have ``spark.executor.memory``).
DAEMON_MEMORY = "512m"
_DAEMON_OPTIONS = "-Dspark.port.maxRetries=0"
_BIND_FAILED = ("Address already in use", "BindException", "Failed to bind")


def spark_home() -> Path:
    """pyspark's package directory: its ``bin/spark-class`` and ``jars/`` are a Spark install."""
    try:
        import pyspark
    except ImportError as exc:
        raise BinaryNotFound("pyspark is not installed: pip install 'airflow-cdc[spark]'") from exc
    return Path(pyspark.__file__).resolve().parent


def master_addresses(url: str) -> list[tuple[str, int]]:
    """``spark://h1:p1,h2:p2`` → ``[(h1, p1), (h2, p2)]`` (7077 when a port is left out)."""
    if not url.startswith("spark://"):
        raise ServiceError(f"{url!r} is not a standalone master URL: use spark://host:port")
    out = []
    for part in url[len("spark://") :].split(","):
        host, _, port = part.strip().rstrip("/").rpartition(":")
        if not host:
            host, port = port, "7077"
        if not port.isdigit():
            raise ServiceError(f"{url!r}: {part!r} is not host:port")
        out.append((host, int(port)))
    return out


class SparkStandaloneCluster(LocalServer):
    """A Spark standalone master and one worker started here, or an existing master (``from_env()``).

    ``LocalServer`` runs the master (its ``_process``, ``port``, ``log_path``); the worker is a
    second process this class starts after the master answers and stops before it.
    """

    what = "Spark master"
    bind_failed = _BIND_FAILED
    kind, log_name, env_var = KIND, "master.log", ENV_VAR
    #: SIGTERM: the worker kills its executors in a shutdown hook; the master just exits.
    stop_timeout = 30.0

    def __init__(
        self,
        *,
        cores: int = 2,
        memory: str = "2g",
        startup_timeout: float = 120.0,
        external_master: str | None = None,
    ) -> None:
        self.external_master = external_master.rstrip("/") if external_master else None
        if self.external_master:
            master_addresses(self.external_master)  # a malformed URL fails here, not in a test
        self.cores = cores
        self.memory = memory
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.ui_port = 0
        self.directory: Path | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._worker: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_env(cls, **kwargs: Any) -> SparkStandaloneCluster:
        """An existing master if ``CDC_TEST_SPARK_MASTER`` is set, else a cluster started here."""
        return cls(external_master=os.environ.get(ENV_VAR) or None, **kwargs)

    @property
    def external(self) -> bool:
        return bool(self.external_master)

    @property
    def master_url(self) -> str:
        """What ``spark-submit --master`` takes."""
        return self.external_master or f"spark://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return self.master_url

    @property
    def ui_url(self) -> str | None:
        """The master's web UI (None for an external master: its port is not known here)."""
        return None if self.external else f"http://{self.host}:{self.ui_port}"

    @property
    def worker_log_path(self) -> Path | None:
        return self.directory / "worker.log" if self.directory else None

    @property
    def work_dir(self) -> Path | None:
        """The worker's ``--work-dir``: one ``app-*/<executor>/`` per application, with the
        executors' ``stdout`` and ``stderr`` (where a Python task's traceback lands)."""
        return self.directory / "work" if self.directory else None

    @property
    def running(self) -> bool:
        if self.external:
            return True
        return all(p is not None and p.poll() is None for p in (self._process, self._worker))

    def worker_log(self, lines: int = 40) -> str:
        return log_tail(self.worker_log_path, lines)

    def state(self) -> dict[str, Any]:
        """The master's view of the cluster (its UI's ``/json/``): workers, cores, apps."""
        if self.external:
            raise ServiceError(f"the state of the master from {ENV_VAR} is not known here (its UI port is not)")
        with httpx.Client(timeout=5) as http:
            answer: dict[str, Any] = http.get(f"{self.ui_url}/json/").raise_for_status().json()
        return answer

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        if not self.external and self.directory is None:
            _sweep_stale_workers()  # before LocalServer's sweep deletes the directories naming them
        return super().start()

    def stop(self) -> None:
        if not self.external:
            self._stop_worker()  # first: a worker whose master vanished logs retries for minutes
        super().stop()

    def _check_installed(self) -> None:
        self._spark_class = str(spark_home() / "bin" / "spark-class")
        self._java = jvm.java()  # JvmPartsMissing without one

    def _initialize(self) -> None:
        assert self.directory is not None
        for name in ("conf", "work", "local"):
            (self.directory / name).mkdir()

    def _check_external(self) -> None:
        addresses = master_addresses(self.master_url)
        wait_until(
            lambda: any(port_open(port, host) for host, port in addresses),
            timeout=self.startup_timeout,
            what=f"the Spark master at {self.master_url}",
        )

    def _environment(self, options_var: str) -> dict[str, str]:
        assert self.directory is not None
        java_home = str(Path(self._java).resolve().parents[1])
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.directory / "conf"),
            "SPARK_LOCAL_IP": self.host,  # binds (web UIs included) and advertises loopback
            "SPARK_LOCAL_DIRS": str(self.directory / "local"),
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "JAVA_HOME": os.environ.get("JAVA_HOME") or java_home,
            options_var: _DAEMON_OPTIONS + (" -Dspark.master.rest.enabled=false" if "MASTER" in options_var else ""),
        }

    def _command(self) -> tuple[list[str], dict[str, Any]]:
        if self.starts == 0:  # a first start may retry on other ports; a restart keeps them
            self.ui_port = free_port()
        with open(self.log_path, "ab") as log:  # type: ignore[arg-type]
            log.write(f"--- start {self.starts + 1}: port {self.port}, web UI {self.ui_port}\n".encode())
        args = [self._spark_class, "org.apache.spark.deploy.master.Master"]
        args += ["--host", self.host, "--port", str(self.port), "--webui-port", str(self.ui_port)]
        return args, {"env": self._environment("SPARK_MASTER_OPTS")}

    def _answers(self) -> bool:
        if not port_open(self.port, self.host):
            raise ConnectionRefusedError(f"nothing accepts connections on {self.host}:{self.port}")
        return self.state().get("status") == "ALIVE"

    def _run(self) -> None:
        if self._process is None or self._process.poll() is not None:
            super()._run()
        self._start_worker()

    def _start_worker(self) -> None:
        assert self.directory is not None and self.worker_log_path is not None
        before = self._alive_workers()
        args = [self._spark_class, "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", self.host]
        args += ["--port", "0", "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory]
        args += ["--work-dir", str(self.work_dir)]
        with open(self.worker_log_path, "ab") as log:
            self._worker = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env=self._environment("SPARK_WORKER_OPTS"),
                start_new_session=True,  # its executors join its process group: stop() ends them all
            )
        token = _process_token(self._worker.pid)
        if token:
            (self.directory / "worker").write_text(token)
        wait_until(
            lambda: self._alive_workers() > before,
            timeout=self.startup_timeout,
            what=f"a Spark worker registered with {self.master_url}",
            process=self._worker,
            log_path=self.worker_log_path,
        )

    def _alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        stop_process(worker, signal.SIGTERM, timeout=self.stop_timeout)
        # An executor or Python worker that outlived the worker's shutdown hook.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.pid, signal.SIGKILL)


def _sweep_stale_workers() -> None:
    """Stop the worker of every cluster whose owning process is gone (``sweep_stale`` in
    ``LocalServer.start()`` stops the master and deletes the directory, but knows only one
    process per directory); a worker whose master vanished would retry for minutes."""
    import tempfile

    for directory in Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}{KIND}-*"):
        try:
            owner = (directory / "owner").read_text().strip()
            worker = (directory / "worker").read_text().strip()
        except OSError:
            continue
        if not _alive(owner) and _alive(worker):
            _terminate(int(worker.split(":", 1)[0]), worker, signal.SIGTERM)
