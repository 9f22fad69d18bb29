"""The SQL target on Spark: each lane's partition applies through ``sql.apply_changes`` on an
executor, one transaction per partition; the driver sums the counts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from airflow_cdc.spark.targets.sql import COUNTS, SqlTargetSettings, apply_changes


class SqlTarget:
    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> None:
        self.settings = SqlTargetSettings(url=url, tables=dict(table_map), modes=dict(settings))

    def apply(self, latest: Any) -> dict[str, int]:
        settings = self.settings  # the closure sends the settings, not this object, to executors

        def partition(rows: Iterator[Any]) -> Iterator[dict[str, int]]:
            yield apply_changes(rows, settings)

        totals = dict.fromkeys(COUNTS, 0)
        for counts in latest.rdd.mapPartitions(partition).collect():
            for name, value in counts.items():
                totals[name] = totals.get(name, 0) + value
        return totals
