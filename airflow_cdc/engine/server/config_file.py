"""Engine instance configuration files: YAML or Java properties, with Debezium's keys.

Both forms give one flat mapping of Debezium property names. Nested YAML is flattened with dots
(``database: {hostname: db}`` is ``database.hostname``). Debezium Server's prefixes are
accepted, so its ``application.properties`` can be used as is: ``debezium.source.X`` is ``X``,
``debezium.sink.X`` is ``sink.X`` (``debezium.sink.type``, ``debezium.sink.kafka.producer.*``),
and any other ``debezium.X`` is ``X``.

A file that does not parse is a ConfigError naming ``file:line:column`` and the parser's problem,
never the line itself: PyYAML's message quotes the offending line (and an unquoted password
that starts with ``*`` becomes "undefined alias '<the password>'"), so the problem's quoted text is
hidden too when a line near the error sets a secret (``secret_keys.is_secret_key``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from jproperties import ParseError, Properties  # type: ignore[import-untyped]
from yaml import MarkedYAMLError
from yaml.reader import ReaderError

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.secret_keys import is_secret_key

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
            # "from None": the YAML error's own text quotes the line, and a traceback prints it
            raise ConfigError([_yaml_problem(path, text, exc)]) from None
        if not isinstance(data, Mapping):
            raise ConfigError([ConfigProblem("--config", f"{path} holds no key: value mapping", "write key: value")])
        flat = flatten(data)
    else:
        flat = _load_properties(path, text)
    return strip_prefixes(flat)


#: What a YAML line sets: ``key:`` (quoted or not, also inside a flow mapping ``{key: v}``).
_LINE_KEYS = re.compile(r"([\w.-]+)['\"]?\s*:(?=\s|$)")
#: A fragment of the file that PyYAML quotes in its problem ("found undefined alias 'x'").
_QUOTED = re.compile(r"'[^']*'")
YAML_FIX = "fix the YAML there; quote a value that starts with *, &, !, %, @ or ` or holds ': '"


def _yaml_problem(path: Path, text: bytes, exc: yaml.YAMLError) -> ConfigProblem:
    """``file:line:column: problem (context)`` without PyYAML's snippet of the line."""
    if isinstance(exc, ReaderError):  # bytes that are not text, named by offset
        return ConfigProblem(
            "--config", f"{path}: byte {exc.position} is not YAML text: {exc.reason}", "save it as UTF-8 text"
        )
    if not isinstance(exc, MarkedYAMLError) or exc.problem_mark is None:
        return ConfigProblem("--config", f"{path} is not valid YAML", YAML_FIX)
    mark, context_mark = exc.problem_mark, exc.context_mark
    problem, context = exc.problem or "", exc.context or ""
    first = min(mark.line, context_mark.line if context_mark else mark.line)
    lines = text.decode("utf-8", errors="replace").splitlines()
    secret = any(_sets_secret(line) for line in lines[max(first - 1, 0) : mark.line + 1])
    if secret:
        problem, context = _QUOTED.sub("'<hidden>'", problem), _QUOTED.sub("'<hidden>'", context)
    message = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {problem}"
    if context:
        at = f" at {context_mark.line + 1}:{context_mark.column + 1}" if context_mark else ""
        message += f" ({context}{at})"
    if secret:
        message += " - a line there sets a secret, so no text of it is shown"
    return ConfigProblem("--config", message, YAML_FIX)


def _sets_secret(line: str) -> bool:
    return any(is_secret_key(key) for key in _LINE_KEYS.findall(line)) or is_secret_key("", line)


def _load_properties(path: Path, text: bytes) -> dict[str, Any]:
    properties = Properties()
    try:
        properties.load(text, "utf-8")
    except UnicodeDecodeError as exc:
        line = text[: exc.start].count(b"\n") + 1
        raise ConfigError(
            [ConfigProblem("--config", f"{path}:{line}: is not UTF-8 text ({exc.reason})", "save it as UTF-8")]
        ) from None
    except ParseError as exc:
        # Its message can quote the bad escape's characters, which may be a password's: not shown.
        if "Empty key" in exc.message:
            what, fix = "a metadata comment (#:) without a key", "write #: key=value, or # for a plain comment"
        else:
            what, fix = "a bad \\u escape", "write \\u and four hex digits, or \\\\u for a backslash and u"
        raise ConfigError([ConfigProblem("--config", f"{path}:{exc.line_number}: {what}", fix)]) from None
    return {key: value.data for key, value in properties.items()}


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
