"""Find where a target table drifted from its source, and optionally repair it (ADR 0027)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from airflow.sdk import Context

from airflow_cdc.drift import Drift, TableSide, compare, delete_extra, dialect_for, settle, snapshot_filter
from airflow_cdc.drift.sides import Side
from airflow_cdc.engine.signals.signal import EXECUTE
from airflow_cdc.operators.base import CdcOperatorError
from airflow_cdc.operators.snapshot import _end_cursor, _SignalOperator
from airflow_cdc.operators.spark import connection_url
from airflow_cdc.triggers.progress import SnapshotWatch


class CdcValidateOperator(_SignalOperator):
    """Compare a captured table with the table the apply job keeps, and name the keys that
    differ; with ``repair=True`` mend them by an incremental snapshot of those keys only.

    Each server summarises its side (row count and a checksum of the rows' canonical text per
    key range, ``airflow_cdc.drift``): with no difference each table is read once and no row
    crosses the network. Differing ranges are narrowed down to keys, at most ``max_keys`` of
    them (the rest are reported as ranges). The source is read without locks while capture
    runs: keys that differ are looked at again until they agree or the target holds a change
    from after the source's position at that look (``settle_timeout``).

    ``repair=True`` then deletes the target rows the source does not have (a snapshot only
    re-reads existing rows), sends ``execute-snapshot`` with an ``additional-conditions`` filter
    of the differing keys and ranges, waits for the snapshot to complete and for the target to
    agree on those keys (the apply job must run meanwhile: a streaming job, or one the table's
    asset schedules), and validates again::

        CdcValidateOperator(
            task_id="validate_orders",
            cdc_conn_id="cdc_shop",
            table="public.orders",
            source_conn_id="pg_shop",
            target_conn_id="pg_shop_replica",
            repair=True,
        )

    :param table: the source table (``schema.table``; MySQL ``database.table``), templated.
    :param source_conn_id: the source database's connection (``postgres`` or ``mysql``).
    :param target_conn_id: the target database's connection (``postgres`` or ``mysql``).
    :param target_url: instead, a lake target as the apply job names it (``delta:PATH``,
        ``iceberg:PATH``, ``parquet:PATH``), summarised by Spark in the task (the ``spark`` extra);
        a repair there cannot delete rows the source does not have (the task says so).
    :param target_table: the target table (templated); default: ``table`` on PostgreSQL, the
        target connection's database and ``table``'s name on MySQL (as the apply job names it).
    :param repair: mend what differs (above); the task fails if drift is left after it.
    :param fail_on_drift: without ``repair``, fail the task when drift is found (so that
        Airflow's callbacks and notifiers report it).
    :param max_keys: the most keys named; ranges beyond are reported as ranges.
    :param ranges: key ranges of the first pass (each side's one grouped scan).
    :param settle_timeout: seconds to look again at differing keys while the target has not
        passed the source's position.
    :param repair_timeout: seconds for the snapshot to complete and the target to agree.
    :param repair_rounds: repairs at most this often, validating after each: a second round
        mends what the first could not name (rows extra in ranges past ``max_keys``, which a
        snapshot cannot delete) or what changed meanwhile.
    :return: (XCom) the drift found (``missing``, ``extra``, ``different`` keys, the ``ranges``
        they are in, ``truncated`` ranges, rows per side, the source ``position``, ``settled``);
        with ``repair``, under ``"before"`` and ``"after"`` (the last round's), with ``"deleted"``,
        ``"signal_ids"`` (one per round that snapshotted; ``"signal_id"`` the first) and ``"rounds"``.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "table", "target_table")
    ui_color = "#eef6e8"

    def __init__(
        self,
        *,
        table: str,
        source_conn_id: str,
        target_conn_id: str | None = None,
        target_url: str | None = None,
        target_table: str | None = None,
        repair: bool = False,
        fail_on_drift: bool = False,
        max_keys: int = 100,
        ranges: int = 1024,
        settle_timeout: float = 120.0,
        repair_timeout: float = 1800.0,
        repair_rounds: int = 3,
        **kwargs: Any,
    ) -> None:
        super().__init__(source_conn_id=source_conn_id, **kwargs)
        if not table or "." not in table:
            raise ValueError(f"table: name it schema.table (MySQL: database.table), not {table!r}")
        for name, value in (("max_keys", max_keys), ("ranges", ranges), ("repair_rounds", repair_rounds)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value!r}")
        self.table = table
        if bool(target_conn_id) == bool(target_url):
            raise ValueError("give target_conn_id (a postgres or mysql connection) or target_url (delta:PATH, ...)")
        self.target_conn_id = target_conn_id
        self.target_url = target_url
        self.target_table = target_table
        self.repair = repair
        self.fail_on_drift = fail_on_drift
        self.max_keys = max_keys
        self.ranges = ranges
        self.settle_timeout = settle_timeout
        self.repair_timeout = repair_timeout
        self.repair_rounds = repair_rounds

    @contextmanager
    def sides(self) -> Iterator[tuple[TableSide, Side]]:
        source_url = connection_url(str(self.source_conn_id))
        source_dialect = dialect_for(source_url)
        source_conn = source_dialect.connect(source_url)
        try:
            source = TableSide(source_dialect, source_conn, self.table)
            if self.target_url:  # a lake table, summarised by Spark in this task
                from airflow_cdc.spark.drift_lake import lake_side

                yield source, lake_side(self.target_url, self.table, self.target_table)
                return
            target_url = connection_url(str(self.target_conn_id))
            target_dialect = dialect_for(target_url)
            target_table = self.target_table or target_dialect.target_name(self.table, target_url)
            target_conn = target_dialect.connect(target_url)
            try:
                yield source, TableSide(target_dialect, target_conn, target_table)
            finally:
                target_conn.close()
        finally:
            source_conn.close()

    def validate(self, source: TableSide, target: Side) -> Drift:
        drift = compare(source, target, ranges=self.ranges, max_keys=self.max_keys)
        self.log.info(
            "%s: %d source rows, %d target rows, first pass %.1fs: %d keys differ (%d ranges not narrowed)",
            self.table, drift.source_rows, drift.target_rows, drift.seconds, len(drift.keys), len(drift.truncated),
        )  # fmt: skip
        if drift.keys:
            drift = settle(source, target, drift, timeout=self.settle_timeout)
            state = "the target passed the source's position" if drift.settled else "NOT SETTLED: the target did not"
            self.log.info("after a second look (%s): %s", state, _describe(drift))
        return drift

    def execute(self, context: Context) -> dict[str, Any]:
        with self.failures(f"validation of {self.table}"), self.sides() as (source, target):
            before = self.validate(source, target)
            if not before.found:
                return before.to_json()
            if not self.repair:
                if self.fail_on_drift:
                    raise CdcOperatorError(f"{self.table} drifted from its source: {_describe(before)}")
                return before.to_json()
            deleted: list[int] = []
            signals: list[str] = []
            drift = before
            for round_ in range(1, self.repair_rounds + 1):
                deleted += self._repair(source, target, drift, signals)
                after = self.validate(source, target)
                if not after.found:
                    break
                if round_ < self.repair_rounds:
                    # Extra keys in ranges the cap left unnamed (max_keys), or a change meanwhile:
                    # named now, so the next round deletes or re-reads exactly those.
                    self.log.info("round %d left %s: repairing again", round_, _describe(after))
                drift = after
            result = {
                "before": before.to_json(),
                "after": after.to_json(),
                "deleted": deleted,
                "signal_id": signals[0] if signals else "",
                "signal_ids": signals,
                "rounds": round_,
            }
            if after.found:
                raise CdcOperatorError(f"{self.table} still differs after {round_} repair round(s): {_describe(after)}")
            return result

    def _repair(self, source: TableSide, target: Side, drift: Drift, signals: list[str]) -> list[int]:
        """One round: delete the target rows the source lacks, snapshot the keys and ranges that
        are missing or differ, wait for the apply job to bring them; the keys deleted."""
        deleted = delete_extra(source, target, drift.extra)
        self.log.info("deleted %d target rows the source does not have: %s", len(deleted), deleted[:20])
        if drift.missing or drift.different or drift.truncated:
            signals.append(self._snapshot(source, drift))
            self._await_target(source, target, drift)
        return deleted

    def _snapshot(self, source: TableSide, drift: Drift) -> str:
        """Send the snapshot of the differing keys and wait until it completed."""
        condition = snapshot_filter(drift, source.dialect.quote(drift.key))
        data = {
            "data-collections": [self.table],
            "type": "incremental",
            "additional-conditions": [{"data-collection": self.table, "filter": condition}],
        }
        with self.engine_backend() as client:
            cursor = _end_cursor(client)
        signal_id = self.send_and_await(EXECUTE, data, lambda n, sid: n.id == sid)
        watch = SnapshotWatch(signal_id, stall_timeout=self.repair_timeout)
        deadline = time.monotonic() + self.repair_timeout
        with self.engine_backend() as client:
            while (verdict := watch.verdict()) is None and time.monotonic() < deadline:
                page = client.notifications(cursor)
                for line in watch.feed(page):
                    self.log.info("%s", line)
                cursor = page.cursor
                if not page.notifications:
                    time.sleep(1.0)
        if verdict is None or not verdict.succeeded:
            raise CdcOperatorError(verdict.message if verdict else f"snapshot {signal_id}: not done in time")
        self.log.info("%s", verdict.message)
        return signal_id

    def _await_target(self, source: TableSide, target: Side, drift: Drift) -> None:
        """Wait until the apply job brought the snapshot's rows: the repaired keys agree."""
        keys = [*drift.missing, *drift.different]
        deadline = time.monotonic() + self.repair_timeout
        while keys and time.monotonic() < deadline:
            mine, theirs = source.hashes_of(keys), target.hashes_of(keys)
            keys = [k for k in keys if mine.get(k) != theirs.get(k)]
            if keys:
                time.sleep(2.0)
        if keys:
            self.log.warning(
                "%d repaired keys still differ after %.0fs: is the apply job running?", len(keys), self.repair_timeout
            )


def _describe(drift: Drift) -> str:
    parts = [f"{name} {keys[:10]}{'...' if len(keys) > 10 else ''}" for name, keys in
             (("missing", drift.missing), ("extra", drift.extra), ("different", drift.different)) if keys]  # fmt: skip
    if drift.truncated:
        parts.append(f"{len(drift.truncated)} more ranges past max_keys")
    return "; ".join(parts) or "no difference"
