"""The one task a declared pipeline adds to the provider's own: a table's snapshot that runs
once (snapshot policy ``initial``), and that knows which snapshot reads its table.

**Once.** Whether the table was snapshotted already is Airflow's own record, not a file of ours:
the pipeline's ``snapshot_done`` sensor emits an event on the table's asset when a snapshot
completes (with its ``signal_id``), and this task reads the asset's events as an inlet. An event
from this DAG's ``snapshot_done`` of the same group means done: the task skips, and with it the
wait for a snapshot; the rest of the group (wait for the instance, apply) runs. Airflow keeps
the events in its metadata database, so this holds across workers, restarts and redeploys; a
cleared group whose snapshot never completed snapshots again.

**Which snapshot.** Each table's group signals its own snapshot, and the groups run in parallel.
An instance that already runs an incremental snapshot adds the tables of a second
``execute-snapshot`` to it and reports it from then on under the second signal's id, with no
STARTED for it (Debezium and the embedded engine alike). A third signal joining renames it
again, possibly before the second's id was ever published. So the task returns the id of the
first notification that names its table - its own signal's, or that of a signal that joined
after it - and the group's sensor waits for that one (and follows later renames:
``SnapshotWatch``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowSkipException

from airflow_cdc.engine.notifications import INCREMENTAL, Notification
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.triggers.progress import tables_named


class CdcPipelineSnapshotOperator(CdcSnapshotOperator):
    """``CdcSnapshotOperator`` that returns the id the snapshot reading its tables is reported
    under (its own signal's, or a later one's that joined it), and that, with ``once``, skips when
    ``done_task_id`` of this DAG has already emitted a completed snapshot's event on one of the
    task's ``inlets`` (the table's asset).

    :param once: snapshot only if no earlier run completed one (policy ``initial``).
    :param done_task_id: the sensor that waits for this task's snapshot (its full task id).
    """

    def __init__(self, *, once: bool = False, done_task_id: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if once and not (done_task_id and self.inlets):
            raise ValueError("once=True needs done_task_id and the table's asset among inlets")
        self.once = once
        self.done_task_id = done_task_id

    def execute(self, context: Context) -> str:
        if self.once and (earlier := self.completed_snapshot(context)) is not None:
            raise AirflowSkipException(
                f"snapshotted already: signal {earlier['signal_id']} completed in run {earlier['run_id']} "
                "(snapshot policy initial); clear that run's snapshot tasks or send a snapshot to read the table again"
            )
        return super().execute(context)

    def send_and_await(self, kind: str, data: Mapping[str, Any], acted: Callable[[Notification, str], bool]) -> str:
        tables = {str(t) for t in data.get("data-collections") or ()}
        joined: list[str] = []

        def acted_or_joined(notification: Notification, signal_id: str) -> bool:
            if acted(notification, signal_id):
                return True
            if notification.aggregate_type == INCREMENTAL and tables & tables_named(notification):
                joined.append(notification.id)
                return True
            return False

        signal_id = super().send_and_await(kind, data, acted_or_joined)
        if joined and joined[0] != signal_id:
            self.log.info(
                "the snapshot reading %s is reported under signal %s (a signal that joined it): waiting for that one",
                ", ".join(sorted(tables)),
                joined[0],
            )
            return joined[0]
        return signal_id

    def completed_snapshot(self, context: Context) -> dict[str, Any] | None:
        """The latest snapshot this DAG's ``done_task_id`` reported for the table, or None."""
        for asset in self.inlets:
            for event in reversed(list(context["inlet_events"][asset])):
                extra = event.extra or {}
                ours = event.source_dag_id == self.dag_id and event.source_task_id == self.done_task_id
                if ours and extra.get("signal_id"):
                    return {"signal_id": extra["signal_id"], "run_id": event.source_run_id}
        return None
