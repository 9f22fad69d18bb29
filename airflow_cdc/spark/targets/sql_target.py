"""The SQL target on Spark: each lane's partition applies through ``sql.apply_changes`` on an
executor, one transaction per partition; the driver sums the counts.

The rows reach the executor's Python worker as Arrow batches (``mapInArrow``,
``arrow_rows.py``), not as pickled ``Row`` objects: a quarter of the write's time went to those.

Each partition also reports its rows and how long it spent in the target (from its first row to
its commit), so the batch's phases come out of the one Spark job that computes and writes the
latest frame (``phases``): running the plan once to time it and once to write it would compute
its shuffle twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_cdc.spark.targets.arrow_rows import latest_rows
from airflow_cdc.spark.targets.sql import COUNTS, SqlTargetSettings, apply_changes

#: What each partition returns: the counts of ``apply_changes``, its rows, its seconds in the target.
_RESULT_SCHEMA = ", ".join([*(f"{name} long" for name in COUNTS), "rows long", "write_s double"])


class SqlTarget:
    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> None:
        self.settings = SqlTargetSettings(url=url, tables=dict(table_map), modes=dict(settings))
        #: The last ``apply``'s rows and phases: ``transform`` (the shuffle, the last change per
        #: key, the lanes' sort: everything before the target gets rows) and ``write`` (the
        #: slowest lane's time in the target).
        self.rows = 0
        self.phases: dict[str, float] = {}

    def apply(self, latest: Any) -> dict[str, int]:
        settings = self.settings  # the closure sends the settings, not this object, to executors

        def partition(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa

            seen = {"rows": 0, "first": 0.0}

            def counted() -> Iterator[Any]:
                for batch in batches:
                    if not seen["first"]:  # the plan's sorts are done once the first rows come
                        seen["first"] = time.perf_counter()
                    seen["rows"] += batch.num_rows
                    yield batch

            counts = apply_changes(latest_rows(counted()), settings)
            write_s = time.perf_counter() - seen["first"] if seen["first"] else 0.0
            result = {name: counts.get(name, 0) for name in COUNTS}
            yield pa.RecordBatch.from_pylist([{**result, "rows": seen["rows"], "write_s": write_s}])

        started = time.perf_counter()
        results = latest.mapInArrow(partition, _RESULT_SCHEMA).collect()
        elapsed = time.perf_counter() - started
        totals = dict.fromkeys(COUNTS, 0)
        for row in results:
            for name in COUNTS:
                totals[name] += int(row[name])
        self.rows = sum(int(row["rows"]) for row in results)
        write = min(elapsed, max((float(row["write_s"]) for row in results), default=0.0))
        self.phases = {"transform": elapsed - write, "write": write}
        return totals
