"""The source contract, after Kafka Connect: a connector splits work into task configs; each
task runs on its own thread, owns its own offset partitions, and is polled for records.

And the connector registry: the one place that knows, per kind of source, the
``connector.class`` names that mean it (our short names, Debezium's Java class, our Python
path), its position codec, and how tools outside capture reach its database
(``sources/database.py``). Everything else asks here instead of testing a class name: the engine
resolves ``connector.class``, the Kafka Connect backend reads the source's position, the signal
hook writes the signal table, Airflow's source connections name their connector, the local
Connect worker checks its plugins. Entries name their implementations by ``module:attribute``
and load them when asked, so importing the contract loads no source and no database driver.
"""

from __future__ import annotations

import abc
import importlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_cdc.engine.config import Config, ConfigDef
from airflow_cdc.engine.errors import ConfigProblem
from airflow_cdc.engine.notifications import NotificationBus
from airflow_cdc.engine.positions import OPAQUE_POSITIONS, Phase, PositionCodec, SourcePosition
from airflow_cdc.engine.records import Offset, Partition, SourceRecord
from airflow_cdc.engine.signals.channels import InProcessChannel
from airflow_cdc.engine.storage.base import OffsetReader

if TYPE_CHECKING:
    from airflow_cdc.engine.sources.database import SourceDatabase


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

    def drain(self) -> list[SourceRecord]:
        """Called once at a clean stop, after the last poll: records already read but held back
        for later polls, to be delivered and committed before the task stops."""
        return []

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


# -- the connector registry ------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceKind:
    """One kind of source."""

    name: str
    #: Our connector, ``module:Class``.
    connector: str
    #: The position codec, ``module:attribute`` (the connector's ``positions``).
    positions: str
    #: Debezium's connector class ("" when Debezium has none).
    debezium_class: str = ""
    #: Other short names ``connector.class`` may give.
    aliases: tuple[str, ...] = ()
    #: Its :class:`SourceDatabase`, ``module:attribute`` ("" for a source without a database).
    database: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        """Every ``connector.class`` value that means this connector."""
        dotted = self.connector.replace(":", ".")
        return tuple(n for n in (self.name, *self.aliases, self.debezium_class, self.connector, dotted) if n)

    def codec(self) -> PositionCodec:
        codec: PositionCodec = _load(self.positions)
        return codec

    def source_database(self) -> SourceDatabase | None:
        if not self.database:
            return None
        database: SourceDatabase = _load(self.database)
        return database


_PACKAGE = "airflow_cdc.engine.sources"
SYNTHETIC_KIND = SourceKind(
    "synthetic",
    f"{_PACKAGE}.synthetic:SyntheticConnector",
    positions=f"{_PACKAGE}.synthetic:SyntheticConnector.positions",
)
POSTGRES_KIND = SourceKind(
    "postgres",
    f"{_PACKAGE}.postgres.connector:PostgresConnector",
    positions=f"{_PACKAGE}.postgres.positions:POSTGRES_POSITIONS",
    debezium_class="io.debezium.connector.postgresql.PostgresConnector",
    aliases=("postgresql",),
    database=f"{_PACKAGE}.postgres.database:POSTGRES_DATABASE",
)
MYSQL_KIND = SourceKind(
    "mysql",
    f"{_PACKAGE}.mysql.connector:MySqlConnector",
    positions=f"{_PACKAGE}.mysql.positions:MYSQL_POSITIONS",
    debezium_class="io.debezium.connector.mysql.MySqlConnector",
    database=f"{_PACKAGE}.mysql.database:MYSQL_DATABASE",
)
MARIADB_KIND = SourceKind(
    "mariadb",
    f"{_PACKAGE}.mysql.connector:MariaDbConnector",
    positions=f"{_PACKAGE}.mysql.positions:MYSQL_POSITIONS",
    debezium_class="io.debezium.connector.mariadb.MariaDbConnector",
    database=f"{_PACKAGE}.mysql.database:MARIADB_DATABASE",
)
KINDS: tuple[SourceKind, ...] = (SYNTHETIC_KIND, POSTGRES_KIND, MYSQL_KIND, MARIADB_KIND)

#: ``connector.class`` short names and Debezium's Java class names -> our ``module:Class``
#: (Python paths are imported as they are: :func:`load_connector_class`).
CONNECTOR_CLASSES: dict[str, str] = {
    name: kind.connector for kind in KINDS for name in (kind.name, *kind.aliases, kind.debezium_class) if name
}
#: Debezium's connectors, which a Kafka Connect worker needs on its plugin path.
DEBEZIUM_CONNECTORS: tuple[str, ...] = tuple(kind.debezium_class for kind in KINDS if kind.debezium_class)

_BY_NAME: dict[str, SourceKind] = {name.lower(): kind for kind in KINDS for name in kind.names}


def source_kind(connector_class: Any) -> SourceKind | None:
    """The kind a ``connector.class`` value means (any case); None for a plugin of another
    module or a class Debezium has and we do not."""
    return _BY_NAME.get(str(connector_class or "").strip().lower())


def source_database(connector_class: Any) -> SourceDatabase | None:
    """How to reach the database of the source a ``connector.class`` names; None when it is
    none we know or has no database (``synthetic``)."""
    kind = source_kind(connector_class)
    return kind.source_database() if kind is not None else None


def _load(path: str) -> Any:
    module_name, _, attributes = path.partition(":")
    value: Any = importlib.import_module(module_name)
    for attribute in attributes.split("."):
        value = getattr(value, attribute)
    return value


def load_connector_class(name: str) -> type[SourceConnector]:
    """Resolve ``connector.class``: a name the registry knows, or any ``module:Class`` /
    ``module.Class`` path."""
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
