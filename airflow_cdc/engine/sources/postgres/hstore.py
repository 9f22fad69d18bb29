"""``hstore`` text -> Debezium's value (``hstore.handling.mode``).

``json`` (the default) emits a JSON *string* that Jackson wrote from the ``java.util.HashMap``
pgjdbc's ``HStoreConverter.fromString`` builds, so its keys come in that map's iteration order:
by bucket of ``String.hashCode`` (spread as HashMap.hash does) in the final table size, and in
insertion order within a bucket (resizes split buckets without reordering them). ``map`` emits a
JSON object, whose order nobody can observe.
"""

from __future__ import annotations

import json
import re
from typing import Any

_INITIAL_BUCKETS = 16  # java.util.HashMap's defaults
_LOAD_FACTOR = 0.75
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def parse(text: str) -> list[tuple[str, str | None]]:
    """'"a"=>"1", "b c"=>NULL' -> pairs in text order. PostgreSQL's output quotes every key and
    value and escapes only ``"`` and ``\\`` inside them."""
    pairs: list[tuple[str, str | None]] = []
    pos, end = 0, len(text)
    while pos < end:
        key, pos = _quoted(text, pos)
        if text[pos : pos + 2] != "=>":
            raise ValueError(f"hstore: expected '=>' at {pos}: {text[:40]!r}")
        pos += 2
        value: str | None
        if text[pos] == '"':
            value, pos = _quoted(text, pos)
        elif text.startswith("NULL", pos):
            value, pos = None, pos + 4
        else:
            raise ValueError(f"hstore: unexpected value at {pos}: {text[:40]!r}")
        pairs.append((key, value))
        if text.startswith(", ", pos):
            pos += 2
    return pairs


def _quoted(text: str, pos: int) -> tuple[str, int]:
    if text[pos] != '"':
        raise ValueError(f"hstore: expected '\"' at {pos}: {text[:40]!r}")
    chars = []
    pos += 1
    while text[pos] != '"':
        if text[pos] == "\\":
            pos += 1
        chars.append(text[pos])
        pos += 1
    return "".join(chars), pos + 1


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, in 32-bit two's complement."""
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _utf16_units(text: str) -> list[int]:
    raw = text.encode("utf-16-be", "surrogatepass")
    return [(raw[i] << 8) | raw[i + 1] for i in range(0, len(raw), 2)]


def hashmap_order(keys: list[str]) -> list[int]:
    """Indexes of ``keys`` (distinct, in insertion order) in a ``HashMap``'s iteration order.
    Bins that HashMap would turn into trees (more than 8 keys in one bucket of a table of 64 or
    more) keep insertion order here, which a tree bin need not."""
    spread = []
    for key in keys:
        h = java_string_hash(key)
        spread.append(h ^ (h >> 16))
    buckets, threshold = _INITIAL_BUCKETS, int(_INITIAL_BUCKETS * _LOAD_FACTOR)
    sizes: dict[int, int] = {}
    for count, h in enumerate(spread, start=1):
        bucket = h & (buckets - 1)
        sizes[bucket] = sizes.get(bucket, 0) + 1
        if sizes[bucket] > _TREEIFY_THRESHOLD and buckets < _MIN_TREEIFY_CAPACITY:
            buckets, threshold = buckets * 2, threshold * 2  # treeifyBin resizes a small table instead
            sizes = _sizes(spread[:count], buckets)
        if count > threshold:
            buckets, threshold = buckets * 2, threshold * 2
            sizes = _sizes(spread[:count], buckets)
    return sorted(range(len(keys)), key=lambda i: (spread[i] & (buckets - 1), i))


def _sizes(spread: list[int], buckets: int) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for h in spread:
        sizes[h & (buckets - 1)] = sizes.get(h & (buckets - 1), 0) + 1
    return sizes


_CONTROL = re.compile(r"\\u00([0-9a-f]{2})")


def to_json_string(text: str) -> str:
    """Debezium's ``hstore.handling.mode=json`` value: compact JSON, keys in HashMap order."""
    if not text:
        return "{}"
    pairs = parse(text)
    ordered = dict(pairs[i] for i in hashmap_order([k for k, _ in pairs]))
    written = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
    # Jackson writes other control characters as \u00XX with upper-case hex digits.
    return _CONTROL.sub(lambda m: "\\u00" + m.group(1).upper(), written) if "\\u00" in written else written


def to_map(text: str) -> dict[str, Any]:
    """``hstore.handling.mode=map``: a JSON object of string (or null) values."""
    return dict(parse(text)) if text else {}


def converter(mode: str) -> Any:
    return to_map if mode == "map" else to_json_string
