"""The SQL target in the transaction-consistent mode (ADR 0023): one batch, every table, one
database transaction, written by the driver.

The key-consistent target (``sql_target.py``) spreads a batch over lanes, each an executor task
with a transaction of its own: fast, but a reader may see one lane's rows committed and another's
not. Here the batch's latest rows stream to the driver (``toLocalIterator``: one partition at a
time in memory) and go through one connection, with the held-back records and the batch id
(``sql/pending.py``) in the same transaction.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from airflow_cdc.spark.schema_policy import policy_of
from airflow_cdc.spark.table_schemas import TableSchema
from airflow_cdc.spark.targets.sql import SqlTargetSettings, apply_changes, dialect_for, pending
from airflow_cdc.spark.targets.sql.evolution import evolve_tables
from airflow_cdc.spark.transaction_order import Waiting
from airflow_cdc.spark.transactions import Stored

log = logging.getLogger(__name__)


class ConsistentSqlTarget:
    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str], tx_topic: str) -> None:
        self.settings = SqlTargetSettings(
            url=url,
            tables=dict(table_map),
            modes=dict(settings),  # type: ignore[arg-type]  # Modes.from_config in __post_init__
            schema_change_policy=policy_of(settings),
        )
        self.dialect = dialect_for(url)
        self.tx_topic = tx_topic
        self._ready = False

    def _connect(self) -> Any:
        conn = self.dialect.connect(self.settings.url)
        if not self._ready:
            pending.ensure_tables(conn, self.dialect)
            self._ready = True
        return conn

    def prepare(self, versions: Mapping[str, list[TableSchema]]) -> list[str]:
        """As the key-consistent target: create and evolve the tables before the batch's transaction."""
        done = evolve_tables(self.settings, self.settings.schema_change_policy, versions)
        dropped = {**self.settings.dropped, **done.dropped}
        self.settings = replace(self.settings, dropped=dropped, encodings=getattr(versions, "encodings", {}))
        return done.statements

    def load(self, query_id: str) -> Stored:
        conn = self._connect()
        try:
            return Stored(*pending.load(conn, query_id))
        finally:
            conn.close()

    def report_orphans(self, query_id: str) -> None:
        """Logs other queries' rows for the same transaction topic, with the statement that deletes
        them. Not deleted here: two jobs may share a target and a topic, and only their owner knows
        whether a checkpoint is gone."""
        conn = self._connect()
        try:
            others = pending.others(conn, query_id, self.tx_topic)
        finally:
            conn.close()
        if others:
            message = (
                f"the target holds transaction-consistent state of other streaming queries on {self.tx_topic} "
                f"({', '.join(others)}; this job is {query_id}): held records and batch ids of a job whose "
                "checkpoint was deleted stay until deleted. If no running job uses them: "
                + pending.delete_statement(others)
            )
            log.warning(message)
            print(message, file=sys.stderr, flush=True)

    def apply_batch(
        self, latest: Any, batch_id: int, held: list[tuple[Any, ...]], query_id: str, waiting: Waiting | None
    ) -> dict[str, int]:
        def finish(conn: Any, dialect: Any) -> None:
            pending.replace(conn, dialect, query_id, batch_id, held, self.tx_topic, waiting)

        return apply_changes(() if latest is None else latest.toLocalIterator(), self.settings, finish)
