"""Engine instance configuration files: YAML or Java properties, with Debezium's keys.

Both forms give one flat mapping of Debezium property names. Nested YAML is flattened with dots
(``database: {hostname: db}`` is ``database.hostname``). Debezium Server's prefixes are
accepted, so its ``application.properties`` can be used as is: ``debezium.source.X`` is ``X``,
``debezium.sink.X`` is ``sink.X`` (``debezium.sink.type``, ``debezium.sink.kafka.producer.*``),
and any other ``debezium.X`` is ``X``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from jproperties import Properties  # type: ignore[import-untyped]

from airflow_cdc.engine.errors import ConfigError, ConfigProblem

PREFIXES = (("debezium.source.", ""), ("debezium.sink.", "sink."), ("debezium.", ""))


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The flat configuration in ``path`` (``.yaml``/``.yml``, else Java properties)."""
    path = Path(path).expanduser()  # "~/shop.yaml" in a connection's extra, as a shell would read it
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            [ConfigProblem("--config", f"cannot read {path}: {exc.strerror}", "give a readable file")]
        ) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError([ConfigProblem("--config", f"{path} is not valid YAML: {exc}", "fix the YAML")]) from exc
        if not isinstance(data, Mapping):
            raise ConfigError([ConfigProblem("--config", f"{path} holds no key: value mapping", "write key: value")])
        flat = flatten(data)
    else:
        properties = Properties()
        properties.load(text, "utf-8")
        flat = {key: value.data for key, value in properties.items()}
    return strip_prefixes(flat)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        elif isinstance(value, list):
            out[name] = ",".join(str(v) for v in value)  # Debezium's lists are comma-separated
        else:
            out[name] = value
    return out


def strip_prefixes(props: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in props.items():
        for prefix, replacement in PREFIXES:
            if key.startswith(prefix):
                key = replacement + key[len(prefix) :]
                break
        out[key] = value
    return out
