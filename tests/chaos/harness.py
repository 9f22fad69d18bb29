"""What the faults act on (a scenario's engine, servers, mounts, load, seeded generator) and
the waiting that watches the engine meanwhile: a supervisor that starts an engine again when a
fault may stop it, and fails the scenario when one exits otherwise; the catch-up that waits for
the target to equal the source."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_cdc.engine.testing import wait_until
from tests.chaos import checks
from tests.chaos.faults import Fault
from tests.chaos.instance import TOPIC_PREFIX, ConnectEngine, EngineProcess, connector_config, engine_config
from tests.chaos.results import RunResult
from tests.chaos.servers import Servers
from tests.chaos.spark_apply import SparkApply
from tests.chaos.target import ChangelogReader, Image, KafkaReader, Replay, differences
from tests.chaos.workload import APPLICATION, Workload, source_image

#: How long the target may take to equal the source after a heal.
CATCH_UP_S = 180
#: How long the target may not change at all while it differs from the source.
STALL_S = 60
#: A supervisor's pause before it starts an engine that exited again (systemd's RestartSec).
RESTART_DELAY_S = 1.0


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str  # "postgres" or "mariadb"
    pool: tuple[type[Fault], ...]
    faults: int = 3
    sink: str = "changelog"
    #: "engine": an engine instance; "connect": Debezium on a Kafka Connect worker instead.
    pipeline: str = "engine"
    incremental: bool = False
    #: The Spark apply job runs too, applying the changelog to a target database ("nullable":
    #: whose TOASTed column may be NULL, unlike the source's).
    apply: str = ""
    quick: bool = False
    #: A known engine defect the scenario hits: it is expected to fail (strict xfail).
    defect: str = ""

    def __post_init__(self) -> None:
        wrong = [fault.name for fault in self.pool if self.source not in fault.sources]
        if wrong:
            raise ValueError(f"scenario {self.name}: {', '.join(wrong)} cannot act on {self.source}")

    def __str__(self) -> str:
        return self.name


class ScenarioFailure(AssertionError):
    pass


class Harness:
    """What the faults act on, and the waiting that watches the engine meanwhile."""

    def __init__(self, scenario: Scenario, seed: int, run: int, work: Path, servers: Servers) -> None:
        self.scenario, self.work, self.servers = scenario, work, servers
        self.rng = random.Random(f"{scenario.name}/{seed}/{run}")
        self.server, self.broker, self.mounts = servers.server, servers.broker, servers.mounts
        self.slot, self.application = "chaos_slot", f"airflow-cdc-chaos-{scenario.source}"
        self.engine: Any = (
            ConnectEngine(servers.worker, connector_config(self.server, servers.database), work)
            if scenario.pipeline == "connect"
            else EngineProcess(
                engine_config(
                    scenario.source,
                    self.server,
                    servers.database,
                    work,
                    scenario.sink,
                    self.broker,
                    chunk=20 if scenario.incremental else 100,
                ),
                work,
            )
        )
        nullable = scenario.apply == "nullable"
        self.apply = SparkApply(self.server, work, nullable_body=nullable) if scenario.apply else None
        self.apply_down = False  # killed on purpose, until the heal starts it
        self.replay = Replay()
        self.reader: Any = (
            KafkaReader(self.broker.bootstrap_servers, TOPIC_PREFIX)
            if scenario.sink == "kafka"
            else ChangelogReader(work / "changelog")
        )
        self.load = Workload(servers.flavour, f"{seed}/{run}")
        self.fault: Fault | None = None  # the one in effect, until its recovery
        self.engine_down = False  # killed on purpose, until the heal starts it
        self.restarts = 0
        self._last_start = 0.0
        self._admin: Any = None
        self.samples: dict[int, list[tuple[int, int]]] = {}

    def admin(self) -> Any:
        """One autocommit connection to the source for the faults and checks, reopened after a
        server restart."""
        if self._admin is not None and not self.servers.usable(self._admin):
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None
        if self._admin is None:
            self._admin = self.servers.admin()
        return self._admin

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._admin is not None:
                self._admin.close()
        self._admin = None
        if isinstance(self.reader, KafkaReader):
            self.reader.close()

    def supervise(self) -> None:
        if self.apply is not None and not self.apply_down:
            code = self.apply.exit_code()
            if code is not None:
                raise ScenarioFailure(f"the apply job's driver exited with {code}:\n{self.apply.tail()}")
        code = self.engine.exit_code()
        if code is None or self.engine_down:
            return
        if self.fault is None or not self.fault.restarts_engine:
            during = f"during or after {self.fault}" if self.fault else "with no fault in effect"
            raise ScenarioFailure(f"the engine exited with {code} {during}:\n{self.engine.tail()}")
        if time.monotonic() - self._last_start >= RESTART_DELAY_S:
            self.restarts += 1
            self.start_engine()

    def start_engine(self) -> None:
        self._last_start = time.monotonic()
        self.engine.start()

    def wait(self, condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
        def check() -> Any:
            self.supervise()
            if self.load.error is not None:
                raise ScenarioFailure(f"the write load failed: {self.load.error!r}")
            return condition()

        return wait_until(check, timeout, what, interval)

    def settle(self) -> None:
        """Target == source before a fault that needs everything published (the load paused)."""
        self.catch_up(RunResult("", "", 0, 0), "before the fault")

    def catch_up(self, result: RunResult, what: str) -> None:
        """Wait until the target equals the source (at rest); record what differs otherwise.
        Given up early when nothing new arrived for ``STALL_S`` (an engine that stopped
        capturing). A line a reader cannot parse fails it too, once the rest has arrived."""
        expected = source_image(self.servers.flavour)
        progress = [time.monotonic()]

        def equal() -> bool:
            if self.reader.read(self.replay):
                progress[0] = time.monotonic()
            if differences(expected, self.replay.tables)[0]:
                stalled = time.monotonic() - progress[0] > STALL_S
            else:
                if self.apply is None or not differences(expected, self.apply.image())[0]:
                    return True
                stalled = False  # the driver may take its time to start: CATCH_UP_S bounds it
            if stalled:
                raise TimeoutError(f"nothing new arrived for {STALL_S}s")
            return False

        try:
            self.wait(equal, CATCH_UP_S, f"target == source {what}", interval=0.25)
            problem = ""
        except TimeoutError as exc:
            problem = str(exc)
        self._verdict(expected, result, what, problem)

    def _verdict(self, expected: Image, result: RunResult, what: str, problem: str) -> None:
        """Record the rows that differ; fail for them, for a published segment replaced after a
        reader took it, or for a published line no reader can parse."""
        result.lost, summary = differences(expected, self.replay.tables)
        if not result.lost and self.apply is not None:
            result.lost, summary = differences(expected, self.apply.image())
            summary = summary and f"the apply job's target: {summary}\napply log:\n{self.apply.tail()}"
        if self.reader.replaced():
            problem += f"; published segments replaced after they were read: {self.reader.replaced()[:3]}"
        if self.replay.broken:
            problem += f"; {len(self.replay.broken)} published line(s) no reader can parse: {self.replay.broken[:2]}"
        if problem:
            raise ScenarioFailure(
                f"{what}: {summary or 'the target equals the source'}; {problem}\nengine log:\n{self.engine.tail()}"
            )

    def sample(self) -> None:
        """Threads, descriptors and server connections of the running engine (a leak grows them
        fault after fault)."""
        if self.scenario.source == "postgres":
            connections = len(checks.pg_connections(self.admin(), APPLICATION))
        else:
            connections = len(checks.mariadb_connections(self.admin(), self.server.user))
        with contextlib.suppress(FileNotFoundError):
            counts = (self.engine.threads(), self.engine.descriptors(), connections)
            self.samples.setdefault(self.engine.pid, []).append(counts)

    def lag(self) -> int | None:
        if self.scenario.source == "postgres":
            return checks.pg_lag(self.admin(), self.slot)
        return checks.mariadb_lag(self.admin(), self.work / "offsets" / "offsets.json")
