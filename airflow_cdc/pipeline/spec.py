"""What a declared pipeline says (ADR 0029): the YAML file's model, checked in one pass with every
problem named by its line and key.

Plain data: no Airflow here, so that ``airflow-cdc pipeline check FILE`` runs the very same
validation as a DAG file that renders the pipeline. pydantic checks each value's type and refuses
unknown keys (a misspelt key is the most common mistake in a hand-written file); the checks that
involve several keys follow in :func:`_cross_checks`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.pipeline.yaml_lines import LinedDocument, YamlSyntaxError, load_with_lines

SNAPSHOT_POLICIES = ("initial", "backfill", "none")
_IDENTIFIER = r"^[A-Za-z0-9_.-]+$"
#: What a table's task group is called: Airflow allows letters, digits, ``_`` and ``-`` only.
_NOT_IN_GROUP_ID = re.compile(r"[^\w-]")

Conditions = str | dict[str, str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceSpec(_Strict):
    """The captured database: an Airflow ``postgres`` or ``mysql`` connection."""

    conn_id: Annotated[str, Field(pattern=_IDENTIFIER)]


class BackendSpec(_Strict):
    """The engine instance (a ``cdc_engine`` or ``kafka_connect`` connection) and its topic
    prefix, which names the tables' assets (``cdc://<topic_prefix>/<table>``) at parse time."""

    conn_id: Annotated[str, Field(pattern=_IDENTIFIER)]
    topic_prefix: Annotated[str, Field(min_length=1)]
    start: bool = True


class TableSpec(_Strict):
    """One table; a bare string in the file is ``{name: ...}``."""

    name: Annotated[str, Field(pattern=r"^[\w$]+(\.[\w$]+)+$")]
    additional_conditions: str | None = None
    target: str | None = None


class TablePatternSpec(_Strict):
    """Tables found in the source's catalog at parse time: every base table whose
    ``schema.table`` matches ``pattern`` in full, less ``exclude`` (patterns too)."""

    pattern: str
    exclude: list[str] = []
    cache_ttl: Annotated[float, Field(ge=0)] = 600.0

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _regex(value)

    @field_validator("exclude")
    @classmethod
    def _all_compile(cls, value: list[str]) -> list[str]:
        return [_regex(item) for item in value]


def _regex(value: str) -> str:
    """``value`` if it is a regular expression; a ValueError (which pydantic reports on its key)
    saying why not."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return value


class SnapshotSpec(_Strict):
    """``initial``: each table is snapshotted by the pipeline's first run that reaches it, then
    not again; ``backfill``: every run re-reads the rows ``additional_conditions`` selects
    (templated: ``{{ data_interval_start }}``); ``none``: changes only."""

    policy: Literal["initial", "backfill", "none"] = "initial"
    type: Literal["incremental", "blocking"] = "incremental"
    additional_conditions: Conditions | None = None
    stall_timeout: Annotated[float, Field(gt=0)] = 600.0


class ApplySpec(_Strict):
    """Where the Spark job applies each table's changes, and how."""

    target_conn_id: Annotated[str, Field(pattern=_IDENTIFIER)] | None = None
    target_url: str | None = None
    spark_conn_id: Annotated[str, Field(pattern=_IDENTIFIER)] | None = None
    schema_change_policy: Literal["evolve", "lenient", "ignore", "exception"] = "lenient"
    lanes: Annotated[int, Field(ge=1, le=64)] = 2


class PipelineSpec(_Strict):
    """The whole file."""

    dag_id: Annotated[str, Field(pattern=_IDENTIFIER, max_length=200)]
    description: str | None = None
    schedule: str | None = None
    start_date: date | datetime = date(2026, 1, 1)
    catchup: bool = False
    tags: list[str] = ["cdc"]
    source: SourceSpec
    backend: BackendSpec
    tables: list[TableSpec] | None = None
    table_pattern: TablePatternSpec | None = None
    snapshot: SnapshotSpec = SnapshotSpec()
    apply: ApplySpec

    @field_validator("tables", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value


class PipelineProblem(ConfigProblem):
    """A problem at one line and key of a pipeline file."""

    __slots__ = ("line", "origin")

    def __init__(self, origin: str, line: int, key: str, message: str, fix: str) -> None:
        super().__init__(key, message, fix)
        self.origin = origin
        self.line = line

    def __str__(self) -> str:
        return f"{self.origin}:{self.line}: {self.key}: {self.message}" + (f" (fix: {self.fix})" if self.fix else "")


class PipelineSpecError(ConfigError):
    """A pipeline file that does not validate; ``problems`` are :class:`PipelineProblem`."""

    problems: list[PipelineProblem]  # type: ignore[assignment]


#: Every key a pipeline file may use, to suggest the one meant by a misspelt key.
_KEYS = sorted(
    {
        name
        for model in (PipelineSpec, SourceSpec, BackendSpec, TableSpec, TablePatternSpec, SnapshotSpec, ApplySpec)
        for name in model.model_fields
    }
)


def group_id(table: str) -> str:
    """A table's task group: its name with what Airflow refuses in a group id as ``_``
    (``public.orders`` → ``public_orders``)."""
    return _NOT_IN_GROUP_ID.sub("_", table)


def load_pipeline_file(path: str | Path) -> PipelineSpec:
    """The pipeline of a YAML file, validated (:class:`PipelineSpecError` lists every problem)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PipelineSpecError([PipelineProblem(str(path), 1, "(file)", str(exc), "give a readable file")]) from exc
    return parse_pipeline(text, str(path))


def parse_pipeline(text: str, origin: str = "<pipeline>") -> PipelineSpec:
    """The pipeline of YAML ``text``; ``origin`` names the file in the problems."""
    try:
        document = load_with_lines(text)
    except YamlSyntaxError as exc:
        raise PipelineSpecError([PipelineProblem(origin, exc.line, "(yaml)", str(exc), "correct the YAML")]) from exc
    if not isinstance(document.data, dict):
        raise PipelineSpecError(
            [PipelineProblem(origin, 1, "(document)", "not a mapping of keys", "start from dags/pipelines/shop.yaml")]
        )
    try:
        spec = PipelineSpec.model_validate(document.data)
    except ValidationError as exc:
        raise PipelineSpecError(_problems(exc, document, origin)) from None
    problems = [
        PipelineProblem(origin, document.locate(loc)[1], ".".join(map(str, loc)), message, fix)
        for loc, message, fix in _cross_checks(spec)
    ]
    if problems:
        raise PipelineSpecError(problems)
    return spec


def _problems(exc: ValidationError, document: LinedDocument, origin: str) -> list[PipelineProblem]:
    problems = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        path, line = document.locate(loc)
        key = list(path)
        if error["type"] in ("missing", "extra_forbidden") and loc and loc[-1] not in path:
            key.append(loc[-1])
        problems.append(
            PipelineProblem(origin, line, ".".join(map(str, key)) or "(document)", _message(error), _fix(error))
        )
    return problems


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "missing":
        return "required key missing"
    return str(error["msg"]).removeprefix("Value error, ")


def _fix(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        near = difflib.get_close_matches(str(error["loc"][-1]), _KEYS, n=1)
        return f"did you mean {near[0]!r}?" if near else "remove it (dags/pipelines/shop.yaml shows every key)"
    return ""  # pydantic's message says what is expected


def _cross_checks(spec: PipelineSpec) -> list[tuple[tuple[str | int, ...], str, str]]:
    """Problems that involve more than one key: ``(location, message, fix)``."""
    found: list[tuple[tuple[str | int, ...], str, str]] = []
    if (spec.tables is None) == (spec.table_pattern is None):
        found.append((("tables",), "give exactly one of tables or table_pattern", "list the tables, or a pattern"))
    if spec.tables is not None and not spec.tables:
        found.append((("tables",), "no table", "name at least one table, e.g. public.orders"))
    seen: dict[str, str] = {}
    for index, table in enumerate(spec.tables or ()):
        group = group_id(table.name)
        if group in seen:
            found.append((("tables", index, "name"), f"same task group {group!r} as {seen[group]!r}", "rename one"))
        seen.setdefault(group, table.name)
        if table.additional_conditions is not None and spec.snapshot.policy == "none":
            found.append(
                (("tables", index, "additional_conditions"), "snapshot policy none reads no rows", "remove it")
            )
    if bool(spec.apply.target_conn_id) == bool(spec.apply.target_url):
        found.append(
            (
                ("apply",),
                "give exactly one of target_conn_id or target_url",
                "a postgres/mysql connection, or delta:PATH",
            )
        )
    snapshot = spec.snapshot
    if snapshot.policy == "backfill" and not snapshot.additional_conditions and not _all_filtered(spec.tables):
        found.append(
            (
                ("snapshot", "additional_conditions"),
                "a backfill without conditions re-reads whole tables at every run",
                "a predicate over the data interval: updated_at >= '{{ data_interval_start }}' and ...",
            )
        )
    if snapshot.policy == "none" and snapshot.additional_conditions:
        found.append((("snapshot", "additional_conditions"), "snapshot policy none reads no rows", "remove it"))
    return found


def _all_filtered(tables: Sequence[TableSpec] | None) -> bool:
    return bool(tables) and all(t.additional_conditions for t in tables or ())
