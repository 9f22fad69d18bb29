"""The source contract, after Kafka Connect: a connector splits work into task configs; each
task runs on its own thread, owns its own offset partitions, and is polled for records.
"""

from __future__ import annotations

import abc
import importlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from airflow_cdc.engine.config import Config, ConfigDef
from airflow_cdc.engine.errors import ConfigProblem
from airflow_cdc.engine.notifications import NotificationBus
from airflow_cdc.engine.positions import OPAQUE_POSITIONS, Phase, PositionCodec, SourcePosition
from airflow_cdc.engine.records import Offset, Partition, SourceRecord
from airflow_cdc.engine.signals.channels import InProcessChannel
from airflow_cdc.engine.storage.base import OffsetReader


class Clock:
    """Time, injectable for tests."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time_ns(self) -> int:
        return time.time_ns()


SYSTEM_CLOCK = Clock()


@dataclass(frozen=True)
class TaskContext:
    """What a task gets when it starts: its config, the committed offsets, a clock."""

    task_id: str
    engine_name: str
    config: Config
    offsets: OffsetReader
    clock: Clock = field(default=SYSTEM_CLOCK)
    #: The engine's notification bus and in-process signal channel (control API).
    notifications: NotificationBus = field(default_factory=NotificationBus)
    signals: InProcessChannel = field(default_factory=InProcessChannel)

    def offset(self, partition: Partition) -> Offset | None:
        """The committed offset of one of this task's partitions (None: start from scratch)."""
        return self.offsets.offset(partition)


class SourceTask(abc.ABC):
    """One unit of capture work. All methods are called from the task's own thread."""

    @abc.abstractmethod
    def start(self, context: TaskContext) -> None:
        """Connect and position at the committed offsets (``context.offset(partition)``)."""

    @abc.abstractmethod
    def poll(self) -> list[SourceRecord]:
        """The next records in source order; ``[]`` when idle. Return within about a second so
        the engine can commit and notice a stop; raise RetriableError for transient failures."""

    def commit(self, offsets: Mapping[str, Offset]) -> None:  # noqa: B027 - optional hook
        """These offsets (by partition key) are durable downstream: the source may release
        what precedes them (PostgreSQL's flushed LSN, for example)."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Release connections. Must also work after a ``start`` that failed half-way."""

    def idle(self) -> None:  # noqa: B027 - optional hook
        """Called instead of poll() while the engine is paused: keep connections alive (a
        replication stream must still answer the server)."""

    def metrics(self) -> dict[str, float]:
        """Source-side figures for status and metrics, e.g. ``lag_bytes`` (newest source
        position seen minus the committed one) or ``snapshot_rows_scanned``. Called from other
        threads: read fields, do no I/O."""
        return {}

    def position(self) -> SourcePosition:
        """The task's phase, its partition and the newest source position it has seen (an
        offset of the connector's ``positions`` codec), for status and sensors. Called from
        other threads: read fields, do no I/O."""
        return SourcePosition(Phase.STREAMING)


class SourceConnector(abc.ABC):
    """Validates the source config and splits the work into task configs."""

    config_def: ClassVar[ConfigDef] = ConfigDef()
    #: Reads users' positions and compares offsets (airflow_cdc.engine.positions).
    positions: ClassVar[PositionCodec] = OPAQUE_POSITIONS

    def validate(self, config: Config) -> list[ConfigProblem]:
        """Every problem with the connector's part of the config (no I/O)."""
        return self.config_def.check(config)[1]

    def start(self, config: Config) -> None:
        self.config = config

    @abc.abstractmethod
    def task_class(self) -> type[SourceTask]: ...

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[Config]:
        """At most ``max_tasks`` configs; each task owns distinct offset partitions."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        pass


#: ``connector.class`` values: short names, Debezium's Java class names, and Python paths.
_POSTGRES = "airflow_cdc.engine.sources.postgres.connector:PostgresConnector"
_MYSQL = "airflow_cdc.engine.sources.mysql.connector:MySqlConnector"
_MARIADB = "airflow_cdc.engine.sources.mysql.connector:MariaDbConnector"
CONNECTOR_CLASSES: dict[str, str] = {
    "synthetic": "airflow_cdc.engine.sources.synthetic:SyntheticConnector",
    "postgres": _POSTGRES,
    "postgresql": _POSTGRES,
    "io.debezium.connector.postgresql.PostgresConnector": _POSTGRES,
    "mysql": _MYSQL,
    "mariadb": _MARIADB,
    "io.debezium.connector.mysql.MySqlConnector": _MYSQL,
    "io.debezium.connector.mariadb.MariaDbConnector": _MARIADB,
}


def load_connector_class(name: str) -> type[SourceConnector]:
    """Resolve ``connector.class``; ``module:Class`` and ``module.Class`` paths work too."""
    path = CONNECTOR_CLASSES.get(name, name)
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{name!r} is neither a known connector nor a module:Class path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for connector {name!r}: {exc}") from exc
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, SourceConnector)):
        raise ValueError(f"{path!r} is not a SourceConnector class")
    return cls
