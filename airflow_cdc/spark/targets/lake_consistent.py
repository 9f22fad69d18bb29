"""Delta, Parquet and Iceberg targets in the transaction-consistent mode (ADR 0023): incomplete source
transactions held back, but the tables of a batch commit one after another.

No format commits several tables at once (Delta's and Iceberg's commits are per table), so a reader can see
a transaction's change to one table before its change to another; what holds is that a batch
applies only complete transactions, in commit order, and every table converges. The held records
and the batch id are a JSON file per streaming query under ``<root>/_cdc_pending/``, replaced
(write, then rename) *after* the tables committed: a driver killed before the replace replays the
batch against the same held records, so the same split re-applies the same changes (the position
guard makes that a no-op); killed after it, the recorded batch id skips the replay.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.spark.table_schemas import TableSchema
from airflow_cdc.spark.targets.lake import LakeTarget
from airflow_cdc.spark.transaction_order import Waiting
from airflow_cdc.spark.transactions import Stored

log = logging.getLogger(__name__)

NOT_ATOMIC = (
    "consistency=transaction on a {kind} target: each batch applies only complete source transactions, "
    "but its tables commit one after another ({kind} has no multi-table commit), so a reader can see one "
    "table of a transaction before another"
)


class ConsistentLakeTarget:
    def __init__(self, url: str, table_map: Mapping[str, str], settings: Mapping[str, str], tx_topic: str) -> None:
        self.lake = LakeTarget(url, table_map, settings)
        if str(self.lake.root).startswith("catalog="):
            problem = ConfigProblem(
                "consistency",
                f"transaction on {url}: the held records need a directory, and a catalog has none here",
                "iceberg:PATH (a Hadoop catalog there), or consistency=key",
            )
            raise ConfigError([problem])
        self.tx_topic = tx_topic
        self.state = self.lake.root / "_cdc_pending"
        message = NOT_ATOMIC.format(kind=self.lake.kind.capitalize())
        log.warning(message)
        print(message, file=sys.stderr, flush=True)

    def prepare(self, versions: Mapping[str, list[TableSchema]]) -> Any:
        """Tables created and evolved for the ready changes, as ``LakeTarget.prepare``."""
        return self.lake.prepare(versions)

    def load(self, query_id: str) -> Stored:
        path = self.state / f"{query_id}.json"
        if not path.exists():
            return Stored(None, [])
        data = json.loads(path.read_text())
        waiting = Waiting(**data["waiting"]) if data.get("waiting") else None
        return Stored(int(data["batch_id"]), [tuple(record) for record in data["held"]], waiting)

    def report_orphans(self, query_id: str) -> None:
        """Logs other queries' state files for the same transaction topic (not deleted: two jobs
        may share a target)."""
        others = []
        for path in sorted(self.state.glob("*.json")) if self.state.is_dir() else ():
            if path.stem != query_id and json.loads(path.read_text()).get("transaction_topic") == self.tx_topic:
                others.append(str(path))
        if others:
            message = (
                f"the target holds transaction-consistent state of other streaming queries on {self.tx_topic} "
                f"(this job is {query_id}): a job whose checkpoint was deleted leaves it. If no running job uses "
                f"them: rm {' '.join(others)}"
            )
            log.warning(message)
            print(message, file=sys.stderr, flush=True)

    def apply_batch(
        self, latest: Any, batch_id: int, held: list[tuple[Any, ...]], query_id: str, waiting: Waiting | None
    ) -> dict[str, int]:
        counts = {} if latest is None else self.lake.apply(latest)
        self.state.mkdir(parents=True, exist_ok=True)
        path = self.state / f"{query_id}.json"
        partial = path.with_suffix(".json.partial")
        with open(partial, "w") as out:
            state = {"batch_id": batch_id, "transaction_topic": self.tx_topic, "held": [list(r) for r in held]}
            json.dump({**state, "waiting": asdict(waiting) if waiting else None}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
        return counts
