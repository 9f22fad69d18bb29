"""Configuration: declared fields with Debezium's property names, validated all at once.

A configuration is a flat mapping of property names to values. Values may be native Python
values or the strings of a Java-properties file; each :class:`Field` parses both. Validation
never stops at the first problem: :meth:`ConfigDef.validate` reports every problem with the key
and the fix, so a user mends a config in one pass.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.secret_keys import is_secret_key as is_secret_key  # the package imports it from here
from airflow_cdc.engine.secret_keys import masked

_REQUIRED = object()


def _parse_bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{raw!r} is not a boolean")


def _parse_int(raw: object) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not an integer")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not an integer") from None


def _parse_list(raw: object) -> list[str]:
    if isinstance(raw, list | tuple):
        return [str(item).strip() for item in raw if str(item).strip()]
    return [part.strip() for part in str(raw).split(",") if part.strip()]


def _parse_str(raw: object) -> str:
    return str(raw)


_PARSERS: dict[str, Callable[[object], Any]] = {
    "str": _parse_str,
    "int": _parse_int,
    "bool": _parse_bool,
    "list": _parse_list,
}


@dataclass(frozen=True)
class Field:
    """One configuration property.

    ``choices`` makes it an enumeration (matched case-insensitively, returned as spelled in
    ``choices``); ``minimum`` bounds integers; ``aliases`` maps other accepted spellings (such as
    Debezium's Java class names) to a choice.
    """

    name: str
    type: str = "str"
    default: Any = _REQUIRED
    doc: str = ""
    choices: tuple[str, ...] = ()
    aliases: Mapping[str, str] | None = None
    minimum: int | None = None
    fix: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def parse(self, raw: object) -> Any:
        value = _PARSERS[self.type](raw)
        if self.choices:
            value = self._choose(str(value))
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{value} is below the minimum {self.minimum}")
        return value

    def _choose(self, text: str) -> str:
        if self.aliases and text in self.aliases:
            return self.aliases[text]
        for choice in self.choices:
            if choice.lower() == text.strip().lower():
                return choice
        raise ValueError(f"{text!r} is not one of {', '.join(self.choices)}")

    def hint(self) -> str:
        if self.fix:
            return self.fix
        if self.choices:
            return f"set {self.name} to one of: {', '.join(self.choices)}"
        if self.minimum is not None:
            return f"set {self.name} to a {self.type} >= {self.minimum}"
        return f"set {self.name} to a valid {self.type}"


class ConfigDef:
    """A set of fields that one component (the engine, a connector, a transform) reads.

    Besides its fields a component may declare ``prefixes`` - keys it reads without declaring
    each one (``sink.kafka.producer.*``, handed to the producer) - and ``ignored`` keys, which it
    accepts and disregards (Kafka Connect's converters: a Debezium configuration moves here
    unchanged). :func:`unknown_keys` flags every key that no component declares.
    """

    def __init__(
        self, fields: Iterable[Field] = (), *, prefixes: Iterable[str] = (), ignored: Iterable[str] = ()
    ) -> None:
        self.fields: dict[str, Field] = {f.name: f for f in fields}
        self.prefixes: tuple[str, ...] = tuple(prefixes)
        self.ignored: frozenset[str] = frozenset(ignored)

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields.values())

    def merged(self, *others: ConfigDef) -> ConfigDef:
        fields = dict(self.fields)
        prefixes, ignored = list(self.prefixes), set(self.ignored)
        for other in others:
            fields.update(other.fields)
            prefixes.extend(p for p in other.prefixes if p not in prefixes)
            ignored |= other.ignored
        return ConfigDef(fields.values(), prefixes=prefixes, ignored=ignored)

    def declares(self, key: str) -> bool:
        """Whether ``key`` is one this component reads or knowingly ignores."""
        return key in self.fields or key in self.ignored or key.startswith(self.prefixes)

    def check(self, props: Mapping[str, object], prefix: str = "") -> tuple[dict[str, Any], list[ConfigProblem]]:
        """Parse every field; return the typed values and every problem found."""
        values: dict[str, Any] = {}
        problems: list[ConfigProblem] = []
        for field in self.fields.values():
            key = prefix + field.name
            raw = props.get(key)
            if raw is None or (isinstance(raw, str) and raw.strip() == "" and field.type != "str"):
                if field.required:
                    problems.append(ConfigProblem(key, "is required", field.hint()))
                else:
                    values[field.name] = field.default
                continue
            try:
                values[field.name] = field.parse(raw)
            except ValueError as exc:
                problems.append(ConfigProblem(key, str(exc), field.hint()))
        return values, problems

    def validate(self, props: Mapping[str, object], prefix: str = "") -> dict[str, Any]:
        values, problems = self.check(props, prefix)
        if problems:
            raise ConfigError(problems)
        return values


def unknown_keys(keys: Iterable[str], declared: Iterable[ConfigDef]) -> list[ConfigProblem]:
    """A problem for every key that none of ``declared`` reads, naming the nearest known key:
    a misspelt key is otherwise ignored without a word (``tabel.include.list`` and every table
    is captured)."""
    defs = list(declared)
    names = sorted({name for d in defs for name in (*d.fields, *d.ignored)})
    problems = []
    for key in keys:
        if any(d.declares(key) for d in defs):
            continue
        near = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
        fix = f"did you mean {near[0]}?" if near else "remove it, or correct its name"
        problems.append(
            ConfigProblem(key, "is not a setting of the engine, connector, sink or transforms: ignored", fix)
        )
    return problems


class Config(Mapping[str, Any]):
    """An immutable flat property mapping, as a user wrote it."""

    def __init__(self, props: Mapping[str, object] | None = None, **kwargs: object) -> None:
        merged = dict(props or {})
        merged.update(kwargs)
        self._props: dict[str, Any] = {str(k): v for k, v in merged.items()}

    def __getitem__(self, key: str) -> Any:
        return self._props[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._props)

    def __len__(self) -> int:
        return len(self._props)

    def __repr__(self) -> str:
        return f"Config({masked(self._props)!r})"

    def with_(self, **changes: object) -> Config:
        """A copy with some keys changed; use ``**{"dotted.key": v}`` for property names."""
        return Config({**self._props, **changes})

    def subset(self, prefix: str) -> Config:
        """The keys under ``prefix``, with the prefix removed (``transforms.route.`` -> ...)."""
        return Config({k[len(prefix) :]: v for k, v in self._props.items() if k.startswith(prefix)})


def available_cores() -> int:
    """Debezium's AVAILABLE_CORES, capped at 16 like Debezium's record.processing.threads."""
    return max(1, min(16, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))
