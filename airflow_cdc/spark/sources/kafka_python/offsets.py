"""Offsets as the source plans with them: Spark's Kafka offset JSON, its internal form, and
admission control (``maxOffsetsPerTrigger``). Pure functions, no Kafka and no Spark."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EARLIEST, LATEST = -2, -1

#: Internal form of an offset: (topic, partition) -> the next offset to read.
Offsets = dict[tuple[str, int], int]


def offsets_from_json(offsets: Mapping[str, Mapping[str, Any]]) -> Offsets:
    """Spark's Kafka offset JSON (``{"t": {"0": 12}}``) as {(topic, partition): offset}."""
    return {(topic, int(p)): int(offset) for topic, parts in offsets.items() for p, offset in parts.items()}


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """The JSON form, topics and partitions in order: Spark compares offsets as JSON text, so
    equal offsets must serialise to equal text."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return result


def admit(start: Offsets, latest: Offsets, limit: int | None) -> Offsets:
    """The end offsets of the next batch: ``latest``, or, when more than ``limit`` records lie
    between ``start`` and ``latest``, ``limit`` records shared among the partitions in proportion
    to their lag (largest remainders get the records the rounding left over, so exactly
    ``limit`` are admitted). A partition never goes back behind its start."""
    lags = {tp: max(0, end - start[tp]) for tp, end in latest.items()}
    total = sum(lags.values())
    if limit is None or total <= limit:
        return {tp: start[tp] + lag for tp, lag in lags.items()}
    shares = {tp: limit * lag // total for tp, lag in lags.items()}
    left = limit - sum(shares.values())
    for tp in sorted(lags, key=lambda tp: (shares[tp] - lags[tp] * limit / total, tp))[:left]:
        shares[tp] += 1
    return {tp: start[tp] + shares[tp] for tp in lags}
