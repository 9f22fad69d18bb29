"""The SQL target on Spark: each lane's partition applies through ``sql.apply_changes`` on an
executor, one transaction per partition; the driver sums the counts.

The rows reach the executor's Python worker as Arrow batches (``mapInArrow``,
``arrow_rows.py``), not as pickled ``Row`` objects: a quarter of the write's time went to those.

A lane's transaction that the target refuses for a reason that passes (a deadlock between two
lanes, which MariaDB's gap locks make possible) runs again (``flush.max.retries``,
``flush.retry.delay.ms``: the names of Debezium's JDBC sink).

Each partition also reports its rows and how long it spent in the target (from its first row to
its commit), so the batch's phases come out of the one Spark job that computes and writes the
latest frame (``phases``): running the plan once to time it and once to write it would compute
its shuffle twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from airflow_cdc.spark.schema_policy import policy_of
from airflow_cdc.spark.table_schemas import TableSchema
from airflow_cdc.spark.targets.arrow_rows import latest_rows
from airflow_cdc.spark.targets.sql import COUNTS, SqlTargetSettings, apply_changes_retrying
from airflow_cdc.spark.targets.sql.evolution import evolve_tables

#: What each partition returns: the counts of ``apply_changes``, its rows, its seconds in the target.
_RESULT_SCHEMA = ", ".join([*(f"{name} long" for name in COUNTS), "rows long", "write_s double"])


class _Lane:
    """One partition's Arrow batches on an executor: counted, timed from the first, and kept
    (Arrow: compact) so that a transaction the target refused for a passing reason - a deadlock
    between two lanes on MariaDB - can run again; the first attempt still writes while Spark
    sends the rest."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._source = self._counted(batches)
        self._kept: list[Any] = []
        self._started = False
        self.rows = 0
        self.first = 0.0  # perf_counter when the first rows came: the plan's sorts were done

    def _counted(self, batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            if not self.first:
                self.first = time.perf_counter()
            self.rows += batch.num_rows
            yield batch

    def _keeping(self) -> Iterator[Any]:
        for batch in self._source:
            self._kept.append(batch)
            yield batch

    def rows_once_more(self) -> Iterator[tuple[Any, ...]]:
        """The lane's rows: as they come the first time, all of them from what was kept after."""
        if not self._started:
            self._started = True
            return latest_rows(self._keeping())
        self._kept.extend(self._source)  # what the failed attempt had not read yet
        return latest_rows(list(self._kept))


def _apply_lane(batches: Iterator[Any], settings: SqlTargetSettings) -> Iterator[Any]:
    """``mapInArrow``'s function: one lane into the target, one row of counts and times out."""
    import pyarrow as pa  # type: ignore[import-untyped]

    lane = _Lane(batches)
    counts = apply_changes_retrying(lane.rows_once_more, settings)
    write_s = time.perf_counter() - lane.first if lane.first else 0.0
    result = {name: counts.get(name, 0) for name in COUNTS}
    yield pa.RecordBatch.from_pylist([{**result, "rows": lane.rows, "write_s": write_s}])


class SqlTarget:
    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> None:
        self.settings = SqlTargetSettings(
            url=url,
            tables=dict(table_map),
            modes=dict(settings),  # type: ignore[arg-type]  # Modes.from_config in __post_init__
            max_retries=int(settings.get("flush.max.retries", 5)),
            retry_delay_s=int(settings.get("flush.retry.delay.ms", 1000)) / 1000,
            schema_change_policy=policy_of(settings),
        )
        #: The last ``apply``'s rows and phases: ``transform`` (the shuffle, the last change per
        #: key, the lanes' sort: everything before the target gets rows) and ``write`` (the
        #: slowest lane's time in the target).
        self.rows = 0
        self.phases: dict[str, float] = {}

    def prepare(self, versions: Mapping[str, list[TableSchema]]) -> list[str]:
        """Create and evolve the batch's target tables from their schemas (``sql/evolution.py``),
        on the driver, before the lanes write; the columns each table's source dropped go to the
        lanes with the settings (kept for the batches after)."""
        done = evolve_tables(self.settings, self.settings.schema_change_policy, versions)
        dropped = {**self.settings.dropped, **done.dropped}
        self.settings = replace(self.settings, dropped=dropped, encodings=getattr(versions, "encodings", {}))
        return done.statements

    def apply(self, latest: Any) -> dict[str, int]:
        settings = self.settings  # the closure sends the settings, not this object, to executors
        started = time.perf_counter()
        results = latest.mapInArrow(lambda batches: _apply_lane(batches, settings), _RESULT_SCHEMA).collect()
        elapsed = time.perf_counter() - started
        totals = dict.fromkeys(COUNTS, 0)
        for row in results:
            for name in COUNTS:
                totals[name] += int(row[name])
        self.rows = sum(int(row["rows"]) for row in results)
        write = min(elapsed, max((float(row["write_s"]) for row in results), default=0.0))
        self.phases = {"transform": elapsed - write, "write": write}
        return totals
