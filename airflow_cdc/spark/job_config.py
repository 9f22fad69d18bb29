"""The apply job's settings in two groups: what the job does (``ApplyConfig``) and how
spark-submit launches it (``SubmitConfig``), as ``CdcSparkApplyOperator(job=..., submit=...)``
takes them.

No Airflow and no pyspark here: a DAG file builds them when it is parsed, the operator renders
their templated fields (``template_fields``), and the job reads ``ApplyConfig`` back from the one
JSON document the operator hands it (``to_document`` / ``from_document``, ``apply.py``).

Both are frozen: a rendered or completed config is a new one (``dataclasses.replace``), checked
again. Every problem names its field (``ApplyConfig.lanes: ...``), all of them at once; a value
that is still a Jinja template (``{{ ... }}``) is checked once it is rendered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.spark.cluster import MASTER_HINT, SparkMasterError, check_master
from airflow_cdc.spark.targets import LAKE_SCHEMES, SQL_SCHEMES, scheme_of

__all__ = ["SOURCE_KINDS", "TRIGGERS", "ApplyConfig", "JobConfigError", "SubmitConfig"]

#: The job's sources: ``reading.SOURCES``, which imports pyspark (a test keeps the two equal).
SOURCE_KINDS = ("kafka", "kafka-python", "changelog")
TRIGGERS = ("available-now", "continuous")
#: ``key``: each key's latest change, lanes in parallel; ``transaction``: whole source
#: transactions, one target transaction per batch (ADR 0023).
CONSISTENCY = ("key", "transaction")
POLICIES = ("evolve", "lenient", "ignore", "exception")  # schema_policy.POLICIES, without importing it


class JobConfigError(ConfigError, ValueError):
    """A field of ``ApplyConfig`` or ``SubmitConfig`` is wrong; each problem names its field.
    Also a ``ValueError``: what a wrong operator argument has always raised."""


def is_template(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _plain(value: Any) -> Any:
    """JSON-primitive data: tuples become lists, mappings dicts."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


class _Checks:
    """Normalises the fields of one config in its ``__post_init__`` and collects its problems."""

    def __init__(self, config: object) -> None:
        self.config = config
        self.owner = type(config).__name__
        self.problems: list[ConfigProblem] = []

    def problem(self, name: str, message: str, fix: str) -> None:
        self.problems.append(ConfigProblem(f"{self.owner}.{name}", message, fix))

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self.config, name, value)  # frozen: only __post_init__ normalises

    def done(self) -> None:
        if self.problems:
            raise JobConfigError(self.problems)

    def text(self, name: str, *, optional: bool = False) -> None:
        value = getattr(self.config, name)
        if optional and value in (None, ""):
            self._set(name, None)  # "" meant "not given" to the operator's old arguments
        elif not isinstance(value, str) or not value.strip():
            self.problem(name, f"must be a non-empty string, got {value!r}", "give text" + (" or None" * optional))

    def choice(self, name: str, choices: Sequence[str], *, optional: bool = False) -> None:
        value = getattr(self.config, name)
        if (value is None and optional) or value in choices:
            return
        self.problem(name, f"unknown value {value!r}", f"one of {', '.join(choices)}")

    def whole(self, name: str, minimum: int, *, optional: bool = False) -> None:
        value = getattr(self.config, name)
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.problem(name, f"must be a whole number >= {minimum}, got {value!r}", f"an int of at least {minimum}")

    def number(self, name: str, minimum: float) -> None:
        """An optional number (seconds)."""
        value = getattr(self.config, name)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            self.problem(name, f"must be a number >= {minimum}, got {value!r}", "seconds, or None")

    def flag(self, name: str) -> None:
        value = getattr(self.config, name)
        if value is not None and not isinstance(value, bool):
            self.problem(name, f"must be True, False or None, got {value!r}", "a bool")

    def names(self, name: str) -> None:
        """A tuple of names from a sequence or a comma-separated string (a template stays one
        name: it may hold commas of its own, and is split once rendered)."""
        out: list[str] = []
        pending: list[Any] = [getattr(self.config, name)]
        while pending:
            value = pending.pop(0)
            if value is None:
                continue
            if is_template(value):
                out.append(value)
            elif isinstance(value, str):
                out += [part.strip() for part in value.split(",") if part.strip()]
            elif isinstance(value, Sequence):
                pending[:0] = list(value)
            else:
                self.problem(name, f"takes names, got {value!r}", "a list of strings or 'a,b'")
                return
        self._set(name, tuple(out))

    def text_map(self, name: str) -> None:
        """A dict of strings; scalar values are written as text, as on a command line."""
        value = getattr(self.config, name)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            self.problem(name, f"must be a mapping, got {type(value).__name__}", "a dict of strings")
            return
        bad = [key for key, item in value.items() if not isinstance(item, str | int | float | bool)]
        if bad:
            self.problem(name, f"values must be text, not {value[bad[0]]!r} (key {bad[0]!r})", "string values")
            return
        self._set(name, {str(key): str(item) for key, item in value.items()})

    def groups(self, name: str) -> None:
        """Lane groups: each a sequence of tables, or a comma-separated string of them."""
        value = getattr(self.config, name) or ()
        if isinstance(value, str) or not isinstance(value, Sequence):
            self.problem(name, f"must be a list of groups, got {value!r}", "[['s.a', 's.b'], ...]")
            return
        groups: list[tuple[str, ...]] = []
        for group in value:
            tables = group.split(",") if isinstance(group, str) else group
            if not isinstance(tables, Sequence) or not all(isinstance(t, str) for t in tables):
                self.problem(name, f"a group must list table names, got {group!r}", "[['s.a', 's.b'], ...]")
                return
            groups.append(tuple(t.strip() for t in tables if t.strip()))
        if any(not group for group in groups):
            self.problem(name, "a group is empty", "leave it out")
        self._set(name, tuple(groups))


class _Group:
    """What both groups share: their JSON form and their templated fields."""

    #: The fields Airflow renders as Jinja templates (the operator renders them into a copy).
    template_fields: ClassVar[tuple[str, ...]] = ()

    def to_document(self) -> dict[str, Any]:
        """JSON-primitive data, the fields left None left out."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        return {name: _plain(value) for name, value in values.items() if value is not None}

    def serialize(self) -> dict[str, Any]:
        """Airflow's rendered-template view and DAG serialization call this (its secrets
        masker then hides values by key, such as a ``conf`` password)."""
        return self.to_document()

    @classmethod
    def from_document(cls, data: Any) -> Self:
        """The config a document describes, checked: unknown keys and wrong values are named."""
        if not isinstance(data, Mapping):
            problem = ConfigProblem(cls.__name__, f"must be a JSON object, got {type(data).__name__}", "{...}")
            raise JobConfigError([problem])
        known = {f.name for f in fields(cls) if f.init}  # type: ignore[arg-type]
        problems = [
            ConfigProblem(f"{cls.__name__}.{key}", "unknown field", f"one of {', '.join(sorted(known))}")
            for key in sorted(set(data) - known)
        ]
        try:
            config = cls(**{key: value for key, value in data.items() if key in known})
        except JobConfigError as exc:
            problems += exc.problems
        if problems:
            raise JobConfigError(problems)
        return config


@dataclass(frozen=True, kw_only=True)
class ApplyConfig(_Group):
    """What the apply job does. With the operator's ``cdc_conn_id`` the source, topics, brokers or
    changelog directory and the value settings come from the capturing instance; a field given
    here wins."""

    #: ``kafka`` (Spark's Kafka source, jars from ``scripts/setup``; the default), ``kafka-python``
    #: (no jar needed) or ``changelog`` (the engine's changelog directory).
    source: str | None = None
    #: The CDC topics (Kafka), or the topic directories of the changelog.
    topics: Sequence[str] = ()
    #: A regex of topics instead of ``topics`` (Kafka only).
    topic_pattern: str | None = None
    bootstrap_servers: str | None = None
    #: The engine's ``sink.changelog.dir``.
    changelog_dir: str | None = None
    #: Where a Kafka source starts without a checkpoint (Spark's ``startingOffsets``).
    starting_offsets: str = "earliest"
    #: Admission control per micro-batch.
    max_records_per_batch: int | None = None
    #: Kafka client settings without secrets (``security.protocol``, ...); passwords come from the
    #: operator's ``kafka_conn_id`` through the job's environment, never in this document.
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    #: Instead of the operator's ``target_conn_id``: ``delta:PATH``, ``parquet:PATH``, ``iceberg:PATH`` (a
    #: Hadoop catalog there) or ``iceberg:catalog=NAME`` (a Spark catalog the submit's conf defines).
    target_url: str | None = None
    #: Source table → target table (default: the same ``schema.table``).
    table_map: Mapping[str, str] = field(default_factory=dict)
    #: Lists of related tables applied in one lane, in source order.
    lane_groups: Sequence[Sequence[str]] = ()
    #: Write tasks in parallel: a table's keys spread over them (a lane group stays in one).
    lanes: int = 2
    #: The capturing connector's value modes (``decimal.handling.mode``, ...).
    settings: Mapping[str, str] = field(default_factory=dict)
    #: Spark's checkpoint directory, one per task (the operator's default: under
    #: ``$AIRFLOW_HOME/cdc``). On a cluster: storage every Airflow worker that may run the task shares.
    checkpoint: str | None = None
    #: ``available-now`` (catch up and exit) or ``continuous`` (for ``max_duration`` seconds).
    trigger: str = "available-now"
    max_duration: float | None = None
    #: A continuous run's micro-batch interval (Spark's ``processingTime``).
    processing_time: str = "1 second"
    #: Spark's application name (the operator's: ``cdc-apply-<dag>-<task>``).
    app_name: str | None = None
    #: ``key`` (the default) or ``transaction``: a reader of a SQL target never sees half a
    #: source transaction; needs the connector's ``provide.transaction.metadata=true`` (ADR 0023).
    consistency: str = "key"
    #: Debezium's transaction topic (default ``<topic.prefix>.transaction``), read in ``transaction`` mode.
    transaction_topic: str | None = None
    #: ``transaction`` mode: batches in a row a source transaction may wait, while later
    #: transactions' events on its tables arrive and its own do not, before the job stops with an
    #: error naming it (the job started past its first events; ADR 0023).
    transaction_stall_batches: int = 10
    #: What a source's schema change does to the target (``schema_policy.py``, Flink CDC's names):
    #: ``evolve``, ``lenient`` (the default: create tables, add and widen columns, never drop),
    #: ``ignore`` or ``exception``. Tables and columns are created from the schemas the changes
    #: carry (the connector's ``value.converter.schemas.enable=true``).
    schema_change_policy: str = "lenient"

    template_fields: ClassVar[tuple[str, ...]] = (
        "topics",
        "topic_pattern",
        "bootstrap_servers",
        "changelog_dir",
        "target_url",
        "table_map",
        "settings",
        "checkpoint",
    )

    def __post_init__(self) -> None:
        check = _Checks(self)
        check.choice("source", SOURCE_KINDS, optional=True)
        for name in ("topic_pattern", "bootstrap_servers", "changelog_dir", "target_url", "checkpoint", "app_name"):
            check.text(name, optional=True)
        check.text("starting_offsets")
        check.text("processing_time")
        check.names("topics")
        for name in ("kafka_options", "table_map", "settings"):
            check.text_map(name)
        check.groups("lane_groups")
        check.whole("lanes", 1)
        check.whole("max_records_per_batch", 1, optional=True)
        check.number("max_duration", 0)
        check.choice("trigger", TRIGGERS)
        check.choice("consistency", CONSISTENCY)
        check.text("transaction_topic", optional=True)
        check.whole("transaction_stall_batches", 1)
        check.choice("schema_change_policy", POLICIES)
        url = self.target_url
        if isinstance(url, str) and not is_template(url) and scheme_of(url) not in (*SQL_SCHEMES, *LAKE_SCHEMES):
            fix = (
                "delta:PATH, parquet:PATH or iceberg:PATH (postgresql://… and mysql://… work, but a DAG has "
                "target_conn_id)"
            )
            check.problem("target_url", f"unknown target {url.split('@')[-1]!r}", fix)
        if self.topics and self.topic_pattern:
            check.problem("topic_pattern", "given with topics", "give topics or a topic_pattern, not both")
        check.done()


@dataclass(frozen=True, kw_only=True)
class SubmitConfig(_Group):
    """How spark-submit launches the job. On a cluster master the driver still runs in the task
    (client deploy mode, ADR 0015); what the executors need is shipped with the submit."""

    #: ``local[*]``, ``spark://host:port``, ``yarn`` or ``k8s://…`` (or the operator's
    #: ``spark_conn_id``). The executors must reach the driver (``spark.driver.host`` in ``conf``).
    master: str = "local[*]"
    #: ``client`` (the default and the only one): the driver runs in the task.
    deploy_mode: str | None = None
    #: Extra ``--conf`` settings.
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Extra jars; the connector jars ``scripts/setup`` resolved are added for the ``kafka``
    #: source and Delta targets (``--jars`` ships them to the executors).
    jars: Sequence[str] = ()
    #: Maven coordinates for ``--packages``.
    packages: Sequence[str] = ()
    py_files: Sequence[str] = ()
    #: The driver's interpreter (default: the worker's), and the executors' unless
    #: ``executor_python`` is given.
    python: str | None = None
    #: The executors' interpreter on a cluster (``spark.pyspark.python``); it needs the target's
    #: driver (psycopg, pymysql), not ``airflow_cdc``.
    executor_python: str | None = None
    #: Ship ``airflow_cdc`` to the executors as a ``--py-files`` zip (None: on a cluster master).
    ship_package: bool | None = None

    template_fields: ClassVar[tuple[str, ...]] = ("master", "conf")

    def __post_init__(self) -> None:
        check = _Checks(self)
        check.text("master")
        for name in ("deploy_mode", "python", "executor_python"):
            check.text(name, optional=True)
        check.text_map("conf")
        for name in ("jars", "packages", "py_files"):
            check.names(name)
        check.flag("ship_package")
        if isinstance(self.master, str) and not is_template(self.master):
            try:
                check_master(self.master)
            except SparkMasterError:
                check.problem("master", f"{self.master!r} is not a Spark master URL", f"use {MASTER_HINT}")
        try:
            check_master("local", self.deploy_mode)
        except SparkMasterError as exc:
            check.problem("deploy_mode", str(exc), "leave it out: client mode is the default")
        check.done()
