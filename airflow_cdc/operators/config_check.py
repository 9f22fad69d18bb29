"""The start task validates the engine configuration it asks for, before anything starts.

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

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.server.config_file import flatten, strip_prefixes
from airflow_cdc.engine.server.instance_files import validated
from airflow_cdc.operators.base import CdcOperatorError


def check_engine_config(
    props: Mapping[str, Any], *, allow_unknown_keys: bool, where: str, partial: bool = False
) -> list[str]:
    """The warnings of ``props`` (unknown keys, when allowed); CdcOperatorError listing every
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
        raise CdcOperatorError(f"{where}: {problems[0]}\n{lines}{hint}") from exc
    return [str(w) for w in result.warnings]


def _is_reference(value: Any) -> bool:
    return isinstance(value, str) and "${" in value
