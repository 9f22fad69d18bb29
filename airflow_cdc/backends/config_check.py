"""A start task validates the engine configuration it asks for, before anything starts.

A misspelt key (``offest.flush.interval.ms``, ``tabel.include.list``) used to be a warning in
the instance's ``engine.log`` on some worker while the task succeeded and every table was
captured. The task validates the whole configuration - the config file (or the service's
running one) with the task's ``config`` over it - the way the instance will: problems and
unknown keys fail the task naming the key and the nearest known one; with
``allow_unknown_keys=True`` unknown keys are warnings in the task log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.engine.errors import CdcError, ConfigError, RefusedError
from airflow_cdc.engine.secret_keys import masked_value
from airflow_cdc.engine.server.config_file import flatten, strip_prefixes
from airflow_cdc.engine.server.instance_files import override_problems, resolve, validated
from airflow_cdc.hooks.source_config import is_secret_key


class InvalidConfigError(CdcError):
    """The configuration a task asks for is invalid: the message lists every problem, the cause first."""


def check_engine_config(
    props: Mapping[str, Any], *, allow_unknown_keys: bool, where: str, partial: bool = False
) -> list[str]:
    """The warnings of ``props`` (unknown keys, when allowed); InvalidConfigError listing every
    problem, the cause first, when it is invalid. ``where`` says whose configuration it is.
    ``partial``: ``props`` are only what the task lays over a configuration this worker cannot
    read (an engine service that has not run yet): what they lack is not a problem."""
    flat = strip_prefixes(flatten(props))
    # A ${env:...} / ${file:...} reference resolves where the engine runs, not on this worker:
    # its value is left to the instance; its key is still checked.
    checkable = {key: ("" if _is_reference(value) else value) for key, value in flat.items()}
    try:
        result = validated(checkable, strict=not allow_unknown_keys)
    except ConfigError as exc:
        problems = [
            p
            for p in exc.problems
            if not (p.key in flat and _is_reference(flat[p.key])) and (p.key in flat or not partial)
        ]
        if not problems:
            return [str(w) for w in exc.warnings]
        lines = "\n".join(f"  - {p}" for p in problems)
        unknown = any("refused (config.strict)" in p.message for p in problems)
        hint = "\nmend the task's config or the config file" + (
            "; or pass allow_unknown_keys=True to start with unknown keys ignored" if unknown else ""
        )
        raise InvalidConfigError(f"{where}: {problems[0]}\n{lines}{hint}") from exc
    return [str(w) for w in result.warnings]


def _is_reference(value: Any) -> bool:
    return isinstance(value, str) and "${" in value


def check_config_argument(config: Any) -> None:
    """An operator's cheap check of its ``config`` argument: a dict of keys a DAG may set."""
    if config is None or isinstance(config, str):  # a template, checked once rendered
        return
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict of Debezium properties, not {type(config).__name__}")
    problems = override_problems(config)
    if problems:
        raise ValueError("config: " + "; ".join(str(p) for p in problems))


def config_differences(requested: Mapping[str, Any], running: Mapping[str, Any]) -> list[str]:
    """Keys on which the configuration asked for and the one an instance runs with differ,
    compared as the instance reads a config file (secrets are neither compared nor shown)."""
    want = _normal(resolve(strip_prefixes(flatten(requested))))
    have = _normal(running)
    return [
        f"{key}: running {have.get(key)!r}, asked {want.get(key)!r}"
        for key in sorted(set(want) | set(have))
        if not is_secret_key(key) and want.get(key) != have.get(key)
    ]


def _normal(config: Mapping[str, Any]) -> dict[str, str]:
    # A URL's password is masked on both sides: the running configuration shows it masked.
    return {key: masked_value(key, config_text(value)) for key, value in config.items() if value is not None}


def config_text(value: Any) -> str:
    """A value as Connect keeps it (every config value is a string there)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(config_text(v) for v in value)
    return str(value)


def check_same(name: str | None, requested: Mapping[str, Any], running: Mapping[str, Any]) -> None:
    """RefusedError naming the keys that differ when an instance runs with another configuration."""
    differences = config_differences(requested, running)
    if differences:
        raise RefusedError(
            f"instance {name!r} is already running with another configuration:\n  "
            + "\n  ".join(differences)
            + "\nstop it first (CdcStopEngineOperator) to start it with this configuration, or change "
            "the task's config to the one it runs with"
        )
