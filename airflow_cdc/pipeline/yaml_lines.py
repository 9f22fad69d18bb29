"""A YAML document as plain data plus the line of every key and list item in it, so that a
validation error found on the data can name the line in the file it came from.

PyYAML's composer keeps each node's start mark; the data is built from the same node tree (with
the safe loader's constructors), so data and lines cannot disagree. Lines are 1-based, as editors
show them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

#: Keys (YAML allows a number, a boolean, null as a key) and list indexes from the root.
Path = tuple[Any, ...]


@dataclass
class LinedDocument:
    """``data``: the document; ``lines``: path (keys and list indexes) → 1-based line."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)

    def locate(self, loc: Sequence[Any]) -> tuple[Path, int]:
        """The longest prefix of ``loc`` that exists in the document, and its line.

        Validation libraries put names of their own into a location (a union member's type, a
        validator's tag): those are passed over, only keys and indexes of the data are followed."""
        node: Any = self.data
        path: Path = ()
        for part in loc:
            in_mapping = isinstance(node, dict) and isinstance(part, str) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            if not (in_mapping or in_list):
                continue
            node = node[part]
            path = (*path, part)
        return path, self.lines.get(path, self.lines.get((), 1))


class YamlSyntaxError(ValueError):
    """The text is not YAML; ``line`` is where the parser gave up."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def load_with_lines(text: str) -> LinedDocument:
    """Parse ``text`` (one YAML document) into data and lines."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise YamlSyntaxError(str(exc.problem or exc), line) from exc
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc), 1) from exc
    if root is None:
        return LinedDocument(None, {(): 1})
    constructor = yaml.SafeLoader("")
    document = LinedDocument(None, {(): root.start_mark.line + 1})
    document.data = _build(root, (), document.lines, constructor)
    return document


def _build(node: yaml.Node, path: Path, lines: dict[Path, int], constructor: yaml.SafeLoader) -> Any:
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)  # merge keys (<<: *anchor)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            key = key if isinstance(key, str | int | float | bool) or key is None else str(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _build(value_node, (*path, key), lines, constructor)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            items.append(_build(item, (*path, index), lines, constructor))
        return items
    return constructor.construct_object(node, deep=True)
