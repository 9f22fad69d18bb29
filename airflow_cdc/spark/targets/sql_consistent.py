"""The SQL target in the transaction-consistent mode (ADR 0023): one batch, every table, one
database transaction, written by the driver.

The key-consistent target (``sql_target.py``) spreads a batch over lanes, each an executor task
with a transaction of its own: fast, but a reader may see one lane's rows committed and another's
not. Here the batch's latest rows stream to the driver (``toLocalIterator``: one partition at a
time in memory) and go through one connection, with the held-back records and the batch id
(``sql/pending.py``) in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_cdc.spark.targets.sql import SqlTargetSettings, apply_changes, dialect_for, pending


class ConsistentSqlTarget:
    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str]) -> None:
        self.settings = SqlTargetSettings(url=url, tables=dict(table_map), modes=dict(settings))  # type: ignore[arg-type]  # Modes.from_config in __post_init__
        self.dialect = dialect_for(url)
        self._ready = False

    def load(self, query_id: str) -> tuple[int | None, list[tuple[Any, ...]]]:
        conn = self.dialect.connect(self.settings.url)
        try:
            if not self._ready:
                pending.ensure_tables(conn, self.dialect)
                self._ready = True
            return pending.load(conn, query_id)
        finally:
            conn.close()

    def apply_batch(self, latest: Any, batch_id: int, held: list[tuple[Any, ...]], query_id: str) -> dict[str, int]:
        def finish(conn: Any, dialect: Any) -> None:
            pending.replace(conn, dialect, query_id, batch_id, held)

        return apply_changes(latest.toLocalIterator(), self.settings, finish)
