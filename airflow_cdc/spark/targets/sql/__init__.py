"""Apply latest-frame rows (``frames.py``) to PostgreSQL (psycopg 3) or MySQL/MariaDB (PyMySQL).

:func:`apply_changes` runs on the Spark executors, one call per partition and one transaction
per call; :func:`check_target` runs on the driver before the stream starts. The modules:

* ``apply.py``: the per-partition apply loop (segments, keys, parameters, counts) and the
  entry points; what each op does under the position guard is described there.
* ``dialect.py``: the dialect interface, the SQL and messages every dialect shares, and
  :func:`~airflow_cdc.spark.targets.sql.dialect.dialect_for`.
* ``postgres.py``, ``mysql.py``: each dialect's connection, catalog queries and statements.
* ``tables.py``: target tables, the per-process catalog cache and the parameter plans.
* ``settings.py``: :class:`SqlTargetSettings`; ``errors.py``: what is raised.

The target table must exist with the source's columns (same types: values are decoded by the
target column's type, ``values.py``), a primary key or unique index on the event key's columns,
and ``_cdc_position`` (``varchar(64)``, compared byte-wise); ``add_position_column`` adds the
last one when it is missing. Column types are read from the target's catalog once per table per
process.

Deletes leave no trace: a change older than a delete, replayed *after* it (out of order), inserts
the row again. Replays in order, which is what a restarted stream does, are safe.
"""

from __future__ import annotations

from airflow_cdc.spark.targets.sql.apply import COUNTS, apply_changes, apply_changes_retrying, check_target
from airflow_cdc.spark.targets.sql.dialect import Dialect, dialect_for
from airflow_cdc.spark.targets.sql.errors import (
    TargetError,
    TargetPrivilegeError,
    TargetSchemaError,
    TargetWriteError,
)
from airflow_cdc.spark.targets.sql.mysql import mysql_params
from airflow_cdc.spark.targets.sql.settings import SqlTargetSettings, safe_url
from airflow_cdc.spark.targets.sql.tables import TableInfo, TableName, clear_catalog_cache

#: The name ``spark/preflight.py`` imports (it reads a target URL as the job does).
_mysql_params = mysql_params

__all__ = [
    "COUNTS",
    "Dialect",
    "SqlTargetSettings",
    "TableInfo",
    "TableName",
    "TargetError",
    "TargetPrivilegeError",
    "TargetSchemaError",
    "TargetWriteError",
    "apply_changes",
    "apply_changes_retrying",
    "check_target",
    "clear_catalog_cache",
    "dialect_for",
    "mysql_params",
    "safe_url",
]
