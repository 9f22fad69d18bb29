"""Drift between a captured table and its target: found by key ranges, repaired by an
incremental snapshot of the differing keys (ADR 0027). Imports neither Airflow nor PySpark;
``operators/validate.py`` is the Airflow side.

* ``dialects.py``: PostgreSQL's and MySQL's canonical row text, hashes and log positions;
* ``sides.py``: one table on one server and the queries the check runs there;
* ``compare.py``: the range checksums, the narrowing down to keys, the second look (settle);
* ``repair.py``: the snapshot filter of the differing keys, the deletes a snapshot cannot do.
"""

from __future__ import annotations

from airflow_cdc.drift.compare import Drift, KeyRange, compare, settle
from airflow_cdc.drift.dialects import Dialect, dialect_for
from airflow_cdc.drift.errors import DriftError
from airflow_cdc.drift.repair import delete_extra, key_runs, snapshot_filter
from airflow_cdc.drift.sides import TableSide

__all__ = [
    "Dialect",
    "Drift",
    "DriftError",
    "KeyRange",
    "TableSide",
    "compare",
    "delete_extra",
    "dialect_for",
    "key_runs",
    "settle",
    "snapshot_filter",
]
