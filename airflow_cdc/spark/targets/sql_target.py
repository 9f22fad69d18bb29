"""The SQL target on Spark: each lane's partition applies through ``sql.apply_changes`` on an
executor, one transaction per partition; the driver sums the counts.

The rows reach the executor's Python worker as Arrow batches (``mapInArrow``,
``arrow_rows.py``), not as pickled ``Row`` objects: a quarter of the write's time went to those.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from airflow_cdc.spark.targets.arrow_rows import latest_rows
from airflow_cdc.spark.targets.sql import COUNTS, SqlTargetSettings, apply_changes

#: One row of counts per partition, what ``apply_changes`` returns.
_COUNTS_SCHEMA = ", ".join(f"{name} long" for name in COUNTS)


class SqlTarget:
    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> None:
        self.settings = SqlTargetSettings(url=url, tables=dict(table_map), modes=dict(settings))

    def apply(self, latest: Any) -> dict[str, int]:
        settings = self.settings  # the closure sends the settings, not this object, to executors

        def partition(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa

            counts = apply_changes(latest_rows(batches), settings)
            yield pa.RecordBatch.from_pylist([{name: counts.get(name, 0) for name in COUNTS}])

        totals = dict.fromkeys(COUNTS, 0)
        for row in latest.mapInArrow(partition, _COUNTS_SCHEMA).collect():
            for name in COUNTS:
                totals[name] += int(row[name])
        return totals
