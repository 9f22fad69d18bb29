"""Kafka Connect's config providers in an instance's configuration, so that its secrets come from
where a container platform puts them and the same file still works on Connect:

* ``${env:NAME}`` - an environment variable (Connect's ``EnvVarConfigProvider``);
* ``${directory:/path:KEY}`` - the content of the file ``/path/KEY`` (``DirectoryConfigProvider``:
  a Kubernetes Secret mounted as a volume);
* ``${file:/path:KEY}`` - key ``KEY`` of the Java properties file ``/path`` (``FileConfigProvider``).

Resolved when an instance builds its engine; a reference that cannot be resolved is a
ConfigError naming the key and what is missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jproperties import Properties  # type: ignore[import-untyped]

from airflow_cdc.engine.errors import ConfigError, ConfigProblem

_REFERENCE = re.compile(r"\$\{(env|directory|file):([^}]*)\}")


def resolve_references(props: Mapping[str, Any], *, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``props`` with every ``${provider:...}`` replaced by its value; ``${env:...}`` from ``env``
    (default: this process's environment)."""
    environ = os.environ if env is None else env
    problems: list[ConfigProblem] = []
    out: dict[str, Any] = {}
    for key, value in props.items():
        if isinstance(value, str) and "${" in value:
            try:
                value = _REFERENCE.sub(lambda m: _value(m.group(1), m.group(2), environ), value)
            except LookupError as exc:
                problems.append(ConfigProblem(key, str(exc), "make it available, or write the value itself"))
        out[key] = value
    if problems:
        raise ConfigError(problems)
    return out


def _value(provider: str, reference: str, environ: Mapping[str, str]) -> str:
    if provider == "env":
        if reference not in environ:
            raise LookupError(f"${{env:{reference}}}: no environment variable {reference}")
        return environ[reference]
    path, _, name = reference.rpartition(":")
    if not path:
        raise LookupError(f"${{{provider}:{reference}}}: write ${{{provider}:/path:key}}")
    if provider == "directory":
        try:
            return (Path(path) / name).read_text().rstrip("\n")
        except OSError as exc:
            raise LookupError(f"${{directory:{reference}}}: cannot read {Path(path) / name}: {exc.strerror}") from None
    properties = Properties()
    try:
        properties.load(Path(path).read_bytes(), "utf-8")
    except OSError as exc:
        raise LookupError(f"${{file:{reference}}}: cannot read {path}: {exc.strerror}") from None
    if name not in properties:
        raise LookupError(f"${{file:{reference}}}: {path} has no key {name}")
    return str(properties[name].data)
