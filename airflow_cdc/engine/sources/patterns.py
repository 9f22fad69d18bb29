"""Configuration lists whose entries are regular expressions (Debezium's include/exclude lists).

A pattern that does not compile used to pass ``airflow-cdc engine check`` and fail only when a
task compiled it, with a bare ``re.error`` naming neither the key nor the pattern. Declared as a
:class:`RegexList`, every entry is compiled when the configuration is checked, so the problem
is reported with the others, naming the key, the pattern and ``re``'s reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.config import Field


@dataclass(frozen=True)
class RegexList(Field):
    """A comma-separated list of regular expressions matched against whole names; parsed as a
    plain list of strings (the readers compile them with their own flags)."""

    type: str = "list"

    def parse(self, raw: object) -> Any:
        patterns: list[str] = super().parse(raw)
        broken = [f"{pattern!r} is not a valid regular expression: {reason}" for pattern, reason in _errors(patterns)]
        if broken:
            raise ValueError("; ".join(broken))
        return patterns

    def hint(self) -> str:
        if self.fix:
            return self.fix
        return (
            f"correct the pattern in {self.name}: entries are regular expressions matched against whole names, "
            r"so a literal ( ) [ ] { } * + ? | or \ needs a backslash before it"
        )


def _errors(patterns: list[str]) -> list[tuple[str, str]]:
    errors = []
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:  # not a ValueError: ConfigDef.check would let it escape
            errors.append((pattern, str(exc)))
    return errors
