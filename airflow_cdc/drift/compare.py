"""Find the rows where a target table drifted from its source, by key ranges.

1. One grouped scan per side: rows and checksum per range of the key (``ranges`` of them over
   ``[min key, max key]`` of both sides). Where nothing differs, that is all: each side was read
   once, and no row left its server.
2. A range that differs is split (``split`` ways, an index range scan per side) until it holds
   few rows (``leaf_rows``); then the rows' hashes of that range are compared key by key, which
   names the keys missing from the target, extra in it, or different. At most ``max_keys`` keys
   are named; the ranges past the cap are reported as ranges (``truncated``).
3. While capture runs the two sides are read at different instants, so a key can differ only
   because its change is still on its way. :func:`settle` reads the source's log position, then
   the differing keys again on both sides, until each agrees, or until the target holds a
   change from after that position (the apply job, which applies in source order, has gone past
   it: a key that still differs at the next look drifted), or until ``timeout`` (the result says ``settled:
   false``). A key the source changes again after that position, and whose change the target
   has not got yet, is reported too: run the check again, it will not be there.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from airflow_cdc.drift.sides import Side, Summary, TableSide, prepare

_EMPTY = Summary(0, 0)
_T = TypeVar("_T")


@dataclass(frozen=True)
class KeyRange:
    low: int
    high: int

    @property
    def size(self) -> int:
        return self.high - self.low + 1


@dataclass
class Drift:
    """What differs between a source table and its target (JSON-ready by :meth:`to_json`)."""

    table: str
    target: str
    key: str
    source_rows: int = 0
    target_rows: int = 0
    #: Keys in the source, not in the target.
    missing: list[int] = field(default_factory=list)
    #: Keys in the target, not in the source.
    extra: list[int] = field(default_factory=list)
    #: Keys on both sides whose rows differ.
    different: list[int] = field(default_factory=list)
    #: The narrowest ranges the differences were found in (each holds at least one).
    ranges: list[KeyRange] = field(default_factory=list)
    #: Differing ranges not narrowed to keys, past ``max_keys``.
    truncated: list[KeyRange] = field(default_factory=list)
    #: The source position read before the last look at the keys (``_cdc_position`` format).
    position: str = ""
    #: Whether the target was seen past ``position`` (or every candidate agreed) at that look.
    settled: bool = True
    seconds: float = 0.0

    @property
    def keys(self) -> list[int]:
        return sorted({*self.missing, *self.extra, *self.different})

    @property
    def found(self) -> bool:
        return bool(self.keys or self.truncated)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "target": self.target,
            "key": self.key,
            "source_rows": self.source_rows,
            "target_rows": self.target_rows,
            "missing": self.missing,
            "extra": self.extra,
            "different": self.different,
            "ranges": [[r.low, r.high] for r in self.ranges],
            "truncated": [[r.low, r.high] for r in self.truncated],
            "position": self.position,
            "settled": self.settled,
            "seconds": round(self.seconds, 3),
        }


def compare(
    source: TableSide,
    target: Side,
    *,
    ranges: int = 1024,
    split: int = 16,
    leaf_rows: int = 256,
    max_keys: int = 100,
) -> Drift:
    """Steps 1 and 2 of the module docstring."""
    started = time.perf_counter()
    prepare(source, target)
    drift = Drift(source.table, target.table, source.key)
    drift.position = source.current_position()
    bounds = [b for b in (source.bounds(), target.bounds()) if b is not None]
    if bounds:
        whole = KeyRange(min(b[0] for b in bounds), max(b[1] for b in bounds))
        counted = _split(source, target, whole, ranges, drift)
        _narrow(source, target, counted, split, leaf_rows, max_keys, drift)
    drift.seconds = time.perf_counter() - started
    return drift


def _split(
    source: TableSide, target: Side, whole: KeyRange, parts: int, drift: Drift | None = None
) -> list[tuple[KeyRange, int]]:
    """``whole`` in at most ``parts`` ranges: the differing ones, with their larger row count.
    Given ``drift`` (the level-0 pass), each side's rows are counted into it."""
    width = max(1, math.ceil(whole.size / parts))
    mine, theirs = _both(lambda side: side.summaries(whole.low, whole.high, width), source, target)
    if drift is not None:
        drift.source_rows = sum(s.rows for s in mine.values())
        drift.target_rows = sum(s.rows for s in theirs.values())
    out = []
    for bucket in sorted(mine.keys() | theirs.keys()):
        a, b = mine.get(bucket, _EMPTY), theirs.get(bucket, _EMPTY)
        if a != b:
            low = whole.low + bucket * width
            out.append((KeyRange(low, min(whole.high, low + width - 1)), max(a.rows, b.rows)))
    return out


def _both(read: Callable[[Side], _T], source: TableSide, target: Side) -> tuple[_T, _T]:
    """``read`` of both sides at once: each server works on its side while the other does
    (the two connections are separate; the drivers wait for the server without the GIL)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        theirs = pool.submit(read, target)
        mine = read(source)
        return mine, theirs.result()


def _narrow(
    source: TableSide,
    target: Side,
    pending: list[tuple[KeyRange, int]],
    split: int,
    leaf_rows: int,
    max_keys: int,
    drift: Drift,
) -> None:
    while pending:
        key_range, rows = pending.pop(0)
        if rows > leaf_rows and key_range.size > split:
            pending[:0] = _split(source, target, key_range, split)  # depth first: keys come in key order
            continue
        if len(drift.keys) >= max_keys:
            drift.truncated.append(key_range)
            continue
        _compare_rows(*_both(partial(_hashes, key_range=key_range), source, target), drift)
        drift.ranges.append(key_range)
    for keys in (drift.missing, drift.extra, drift.different):
        keys.sort()
    excess = drift.keys[max_keys:]
    if excess:  # the last leaf may have named more than the cap: those go back as a range
        drift.truncated.insert(0, KeyRange(excess[0], excess[-1]))
        _drop(drift, set(excess))


def _hashes(side: Side, key_range: KeyRange) -> dict[int, int]:
    return side.hashes(key_range.low, key_range.high)


def _compare_rows(mine: dict[int, int], theirs: dict[int, int], drift: Drift) -> None:
    drift.missing.extend(k for k in sorted(mine) if k not in theirs)
    drift.extra.extend(k for k in sorted(theirs) if k not in mine)
    drift.different.extend(k for k in sorted(mine) if k in theirs and theirs[k] != mine[k])


def _drop(drift: Drift, keys: set[int]) -> None:
    drift.missing = [k for k in drift.missing if k not in keys]
    drift.extra = [k for k in drift.extra if k not in keys]
    drift.different = [k for k in drift.different if k not in keys]


def settle(
    source: TableSide,
    target: Side,
    drift: Drift,
    *,
    timeout: float,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Drift:
    """Step 3 of the module docstring: ``drift`` with the keys that agree on a second look left out."""
    deadline = time.monotonic() + timeout
    drift.position = source.current_position()  # before the source's rows are read again
    passed = False
    while drift.keys:
        # Confirmed at the look *after* the one that saw the target past the position: the apply
        # job's lanes commit a batch in parallel transactions, one may show a later change before
        # another committed an earlier one.
        confirmed = passed
        mine = source.hashes_of(drift.keys)
        passed = passed or target.passed(drift.position, source.dialect)  # before the target's rows
        theirs = target.hashes_of(drift.keys)
        again = Drift(drift.table, drift.target, drift.key)
        _compare_rows(mine, theirs, again)  # a key without a row on either side now agrees
        drift.missing, drift.extra, drift.different = again.missing, again.extra, again.different
        drift.ranges = [r for r in drift.ranges if any(r.low <= k <= r.high for k in drift.keys)]
        drift.settled = confirmed or not drift.keys
        if drift.settled or time.monotonic() >= deadline:
            break
        sleep(interval)
    return drift
