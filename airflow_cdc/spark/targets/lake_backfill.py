"""An added column's default, filled into a Delta or Iceberg table's existing rows so that a kill
between the ``ADD COLUMNS`` and the ``UPDATE`` does not lose it.

The two formats commit each statement on its own (no DDL and DML in one commit), and a rerun
after a kill sees the column already there: nothing would tell it the rows still lack the
default. So the defaults to fill are noted in a table property first, in a commit of their own
before the column is added, and removed after the ``UPDATE``; a job that finds the note when it
first meets the table (``finish``) fills them then. No batch is written between the note and
its removal (the DDL runs on the driver before the batch's rows), so every row the ``UPDATE``
sets predates the column. Parquet needs none of this: its evolution is one rewrite.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

#: The table property holding ``{column: SQL literal}`` while a backfill is pending.
PENDING = "airflow_cdc.pending_defaults"


def note(sql: Callable[[str], None], ref: str, defaults: Mapping[str, str]) -> None:
    """Records ``defaults`` as pending on table ``ref``, before the columns are added."""
    if defaults:
        encoded = base64.urlsafe_b64encode(json.dumps(dict(defaults), sort_keys=True).encode()).decode()
        sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('{PENDING}' = '{encoded}')")


def finish(spark: Any, sql: Callable[[str], None], ref: str, columns: Collection[str]) -> list[str]:
    """Fills the defaults pending on ``ref`` into the columns the table has, then drops the
    note; returns the columns filled. Nothing pending: one read of the table's properties."""
    properties = {row["key"]: row["value"] for row in spark.sql(f"SHOW TBLPROPERTIES {ref}").collect()}
    raw = properties.get(PENDING)
    if raw is None:
        return []
    defaults: dict[str, str] = json.loads(base64.urlsafe_b64decode(raw.encode()))
    # A column not there yet (a kill before its ADD): the rerun adds it and notes it again.
    filled = [name for name in defaults if name in columns]
    if filled:
        sql(f"UPDATE {ref} SET {', '.join(f'`{name}` = {defaults[name]}' for name in filled)}")
    sql(f"ALTER TABLE {ref} UNSET TBLPROPERTIES ('{PENDING}')")
    return filled
