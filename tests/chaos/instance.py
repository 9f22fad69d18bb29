"""The engine under test: an engine instance (``airflow-cdc engine run``) in a process of its own,
so that kill -9 and SIGSTOP are real; and its configuration for each source and sink."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from airflow_cdc.engine.server.instance_files import read_status

REPO = Path(__file__).resolve().parents[2]
TOPIC_PREFIX = "chaos"


def engine_config(
    source: str, server: Any, database: str, work: Path, sink: str, broker: Any = None, *, chunk: int = 100
) -> dict[str, Any]:
    """``chunk``: the incremental snapshot's window, small enough that its faults hit it."""
    common = {
        "name": f"chaos-{source}",
        "topic.prefix": TOPIC_PREFIX,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password,
        "state.dir": str(work / "state"),
        "offset.storage.file.filename": str(work / "offsets" / "offsets.json"),
        "offset.flush.interval.ms": 200,
        "poll.interval.ms": 100,
        "max.batch.size": 500,
        "errors.retry.delay.max.ms": 1000,
        "heartbeat.interval.ms": 1000,  # moves the committed position on when only others write
        "skipped.operations": "none",  # TRUNCATE events too
        "incremental.snapshot.chunk.size": chunk,
        "api.token": "chaos",
    }
    if source == "postgres":
        common |= {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.dbname": database,
            "slot.name": "chaos_slot",
            "publication.name": "chaos_pub",
            "signal.data.collection": "public.debezium_signal",
        }
    else:
        common |= {
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "database.include.list": database,
            "signal.data.collection": f"{database}.debezium_signal",
            "include.schema.changes": False,
        }
    if sink == "kafka":
        common |= {
            "sink.type": "kafka",
            "sink.kafka.producer.bootstrap.servers": broker.bootstrap_servers,
            # One partition: a TRUNCATE event has no key, and only one order of a topic's
            # events lets a consumer place it.
            "topic.creation.default.partitions": 1,
        }
    else:
        common |= {
            "sink.type": "changelog",
            "sink.changelog.dir": str(work / "changelog"),
            "sink.changelog.segment.max.ms": 200,
        }
    return common


class EngineProcess:
    """``start()`` again after a kill; ``starts`` counts them."""

    def __init__(self, config: dict[str, Any], work: Path) -> None:
        self.work = work
        self.config_path = work / "engine.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.state = Path(config["state.dir"])
        self.log_path = work / "engine.log"
        self.tmp = work / "engine-tmp"  # its TMPDIR: a temp file left behind shows up here
        self.tmp.mkdir(exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._searched = 0

    def start(self) -> None:
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {self.starts + 1}\n".encode())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "airflow_cdc.cli", "engine", "run", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.work,
            )
        self.starts += 1

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def exit_code(self) -> int | None:
        """None while it runs (or has not been started)."""
        return None if self.process is None else self.process.poll()

    def kill(self) -> None:
        assert self.process is not None and self.process.poll() is None, "the engine is not running"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(60)

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM (a clean stop: drain, commit, release the slot); the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)  # a frozen engine cannot stop
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait(60)

    def status(self) -> dict[str, Any]:
        return read_status(self.state) or {}

    def logged(self, text: str) -> bool:
        """Whether the log has ``text`` since the last call that found it."""
        if not self.log_path.exists():
            return False
        data = self.log_path.read_text(errors="replace")
        found = data.find(text, self._searched)
        if found < 0:
            return False
        self._searched = found + len(text)
        return True

    def tail(self, lines: int = 30) -> str:
        """The log's last lines, a line repeated (a retry's exception chain) shown once."""
        if not self.log_path.exists():
            return ""
        kept: list[str] = []
        for line in self.log_path.read_text(errors="replace").splitlines()[-2000:]:
            if line not in kept[-3:]:
                kept.append(line)
        return "\n".join(kept[-lines:])

    # -- what a leak would show ----------------------------------------------------------
    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def children(self) -> list[int]:
        found: list[int] = []
        for task in os.listdir(f"/proc/{self.pid}/task"):
            with contextlib.suppress(FileNotFoundError):
                found += [int(p) for p in Path(f"/proc/{self.pid}/task/{task}/children").read_text().split()]
        return found


def connector_config(server: Any, database: str) -> dict[str, Any]:
    """Debezium's own PostgreSQL connector, configured as the engine is."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": 1,
        "database.hostname": server.host,
        "database.port": server.port,
        "database.user": server.user,
        "database.password": server.password or "unused",  # trust authentication
        "database.dbname": database,
        "topic.prefix": TOPIC_PREFIX,
        "plugin.name": "pgoutput",
        "slot.name": "chaos_slot",
        "publication.name": "chaos_pub",
        "skipped.operations": "none",
        "heartbeat.interval.ms": 1000,
        "topic.creation.default.partitions": 1,
        "topic.creation.default.replication.factor": 1,
    }


class ConnectEngine:
    """Debezium on a Kafka Connect worker in the engine's place: ``kill()`` is kill -9 of the
    worker's JVM, ``start()`` starts the worker again (the connector comes back from its config
    topic, at the offsets Connect committed)."""

    name = "chaos-connector"

    def __init__(self, worker: Any, config: dict[str, Any], work: Path) -> None:
        self.worker, self.config, self.work = worker, config, work
        self.state = work / "state"  # no notifications: nothing there
        self.tmp = work / "engine-tmp"
        self.starts = 0

    def start(self) -> None:
        from airflow_cdc.kafka_connect import ConnectClient

        self.worker.start()
        with ConnectClient(self.worker.url) as client:
            if self.name not in client.connectors():
                client.create(self.name, self.config)
            client.wait_running(self.name, timeout=120)
        self.starts += 1

    @property
    def pid(self) -> int:
        assert self.worker._process is not None
        return int(self.worker._process.pid)

    def exit_code(self) -> int | None:
        process = self.worker._process
        return None if process is None else process.poll()

    def kill(self) -> None:
        from airflow_cdc.local.process import stop_process

        process, self.worker._process = self.worker._process, None
        stop_process(process, signal.SIGKILL, timeout=30)

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM: the worker stops its connector (committing its offsets) and leaves the
        group; 0 when the JVM ended through its shutdown hooks (exit status 143, SIGTERM's)."""
        process = self.worker._process
        self.worker.stop()
        code = -1 if process is None or process.returncode is None else int(process.returncode)
        return 0 if code in (0, 143, -signal.SIGTERM) else code

    def close(self) -> None:
        self.worker.close()

    def logged(self, text: str) -> bool:
        return text in self.worker.log(10_000)

    def tail(self, lines: int = 30) -> str:
        return str(self.worker.log(lines))

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def children(self) -> list[int]:
        return []
