"""Wait for a snapshot, triggered by a signal, to complete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from airflow_cdc.assets import emit_table_events
from airflow_cdc.links import CdcInstanceLink, CdcSnapshotLink
from airflow_cdc.operators.base import CdcOperatorError
from airflow_cdc.sensors.base import CdcBaseSensor
from airflow_cdc.triggers.base import Payload
from airflow_cdc.triggers.progress import ACCEPTED_STATUSES
from airflow_cdc.triggers.snapshot import CdcSnapshotTrigger


class CdcSnapshotSensor(CdcBaseSensor):
    """Wait until the snapshot of a signal completes, following the notifications the instance
    publishes about it (Debezium's, with rows, estimate and ETA, which go to the task log).

    Succeeds on the snapshot's COMPLETED (every task's, when several databases share the
    signal). Fails on ABORTED, on a table scan that ends with a status not in
    ``accept_statuses`` (NO_PRIMARY_KEY, SKIPPED, SQL_EXCEPTION, UNKNOWN_SCHEMA), on the
    signal's rejection, and after ``stall_timeout`` seconds without any notification about it
    (a paused snapshot does not stall). A snapshot that ends the wait has delivered every row:
    the target can be read.

    Table assets among ``outlets`` (``airflow_cdc.assets.table_asset``), or an ``AssetAlias``,
    get an event per table with ``extra`` ``{"rows", "signal_id", "offsets"}``.

    ::

        snapshot = CdcSnapshotOperator(task_id="snapshot", cdc_conn_id="cdc_shop", tables=["public.orders"])
        CdcSnapshotSensor(
            task_id="snapshot_done",
            cdc_conn_id="cdc_shop",
            signal_id=snapshot.output,
            outlets=[table_asset("shop", "public.orders")],
        )

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param signal_id: the ``execute-snapshot`` signal's id (templated; the snapshot operator's XCom).
    :param stall_timeout: seconds without progress before the task fails (deferred or in
        ``mode="poke"``; ``mode="reschedule"`` starts over at every poke, so only ``timeout``
        bounds it there).
    :param accept_statuses: table statuses that count as done (default ``SUCCEEDED`` and
        ``EMPTY``: an empty table, or a filtered window without rows, was read completely; pass
        ``["SUCCEEDED"]`` to fail when a table turns out empty).
    :param deferrable: wait in the triggerer (default True); False pokes.
    :return: (XCom) ``{"signal_id", "topic_prefix", "rows", "offsets"}``: ``rows`` by table,
        ``offsets`` each partition's committed offset and position at completion.
    """

    operator_extra_links = (CdcInstanceLink(), CdcSnapshotLink())

    template_fields: Sequence[str] = ("cdc_conn_id", "signal_id")

    def __init__(
        self,
        *,
        signal_id: str,
        stall_timeout: float = 600.0,
        accept_statuses: Sequence[str] = ACCEPTED_STATUSES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if stall_timeout <= 0:
            raise ValueError(f"stall_timeout must be positive seconds, not {stall_timeout!r}")
        if isinstance(accept_statuses, str) or not accept_statuses:
            raise ValueError("accept_statuses: a list of table statuses, e.g. ['SUCCEEDED', 'EMPTY']")
        self.signal_id = signal_id
        self.stall_timeout = stall_timeout
        self.accept_statuses = list(accept_statuses)

    def trigger(self) -> CdcSnapshotTrigger:
        if not self.signal_id or not str(self.signal_id).strip():
            raise CdcOperatorError("signal_id is empty: pass the snapshot operator's XCom (snapshot.output)")
        return CdcSnapshotTrigger(
            cdc_conn_id=self.cdc_conn_id,
            signal_id=str(self.signal_id).strip(),
            stall_timeout=self.stall_timeout,
            accept_statuses=self.accept_statuses,
            poll_interval=self.poke_interval,
            unavailable_timeout=self.unavailable_timeout,
        )

    def succeeded(self, context: Context, event: Payload) -> dict[str, Any]:
        prefix = str(event.get("topic_prefix") or "")
        rows = {str(table): int(count) for table, count in (event.get("rows") or {}).items()}
        extra = {"signal_id": event["signal_id"], "offsets": event.get("offsets") or []}
        if self.outlets and prefix:
            moved = emit_table_events(context, self.outlets, prefix, rows, extra)
            self.log.info("asset events for %s", ", ".join(moved) or "no table with rows")
        return {"signal_id": event["signal_id"], "topic_prefix": prefix, "rows": rows, "offsets": extra["offsets"]}
