"""What a repair needs from the drift found: the incremental snapshot's filter, and the target
rows no snapshot can remove.

An incremental snapshot re-reads rows that exist in the source: it mends a target row that is
missing or different (its ``r`` event carries the stream position at its window's close, past
the stale row's ``_cdc_position``, so the apply job overwrites it), but it never emits anything
for a key the source does not have. Those rows (``extra``) are deleted from the target here,
guarded by position so that a row the apply job wrote meanwhile stays.
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_cdc.drift.compare import Drift, KeyRange
from airflow_cdc.drift.sides import Side, TableSide


def key_runs(keys: Iterable[int]) -> list[KeyRange]:
    """Sorted keys as runs of consecutive values: ``[1, 2, 3, 7]`` -> ``[1..3], [7..7]``."""
    runs: list[KeyRange] = []
    for key in sorted(set(keys)):
        if runs and runs[-1].high + 1 == key:
            runs[-1] = KeyRange(runs[-1].low, key)
        else:
            runs.append(KeyRange(key, key))
    return runs


def snapshot_filter(drift: Drift, quoted_key: str) -> str:
    """One SQL predicate over the source table (Debezium's ``additional-conditions`` filter)
    selecting the keys the target lacks or holds wrongly, and the ranges not narrowed to keys."""
    runs = [*key_runs([*drift.missing, *drift.different]), *drift.truncated]
    singles = [str(r.low) for r in runs if r.size == 1]
    parts = [f"{quoted_key} between {r.low} and {r.high}" for r in runs if r.size > 1]
    if singles:
        parts.insert(0, f"{quoted_key} in ({', '.join(singles)})")
    return " or ".join(parts)


def delete_extra(source: TableSide, target: Side, keys: Iterable[int]) -> list[int]:
    """Delete the target rows of ``keys`` the source does not have, read after the source's
    current position; the keys deleted."""
    wanted = sorted(set(keys))
    position = source.current_position()
    present = source.hashes_of(wanted)
    absent = [k for k in wanted if k not in present]
    if absent:
        target.delete_absent(absent, position, source.dialect)
    return [k for k in absent if k not in target.hashes_of(absent)]
