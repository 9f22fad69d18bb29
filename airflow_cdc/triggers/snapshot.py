"""The trigger of the snapshot sensor: follows a snapshot's notifications until it completes,
fails or stalls (the rules: :mod:`airflow_cdc.triggers.progress`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_cdc.assets import snapshot_rows
from airflow_cdc.backends import AsyncEngineBackend, InstancePosition, OffsetEntry
from airflow_cdc.triggers.base import CdcEngineTrigger, Payload, failed
from airflow_cdc.triggers.progress import ACCEPTED_STATUSES, SnapshotWatch


class CdcSnapshotTrigger(CdcEngineTrigger):
    """Waits for the snapshot of ``signal_id`` on an engine instance; yields one event:
    ``success`` with ``rows`` per table, the instance's ``topic_prefix`` and committed
    ``offsets``, or ``failed`` / ``error`` with a message.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param signal_id: the ``execute-snapshot`` signal's id.
    :param stall_timeout: seconds without a notification about the snapshot before it fails.
    :param accept_statuses: table statuses that do not fail the snapshot.
    :param cursor: the notification cursor to read after (None: every notification kept).
    :param settle: seconds to wait, after the last open sequence ended, for another task's
        STARTED when fewer sequences started than the instance has tasks.
    """

    def __init__(
        self,
        cdc_conn_id: str,
        signal_id: str,
        stall_timeout: float = 600.0,
        accept_statuses: Sequence[str] = ACCEPTED_STATUSES,
        cursor: str | None = None,
        settle: float = 2.0,
        poll_interval: float = 5.0,
        unavailable_timeout: float = 60.0,
    ) -> None:
        super().__init__(cdc_conn_id, poll_interval, unavailable_timeout)
        self.signal_id = signal_id
        self.stall_timeout = stall_timeout
        self.accept_statuses = list(accept_statuses)
        self.cursor = cursor
        self.settle = settle
        self.watch = SnapshotWatch(signal_id, stall_timeout, tuple(self.accept_statuses), settle=settle)
        self._next_cursor = cursor

    def kwargs(self) -> dict[str, Any]:
        return {
            **super().kwargs(),
            "signal_id": self.signal_id,
            "stall_timeout": self.stall_timeout,
            "accept_statuses": list(self.accept_statuses),
            "cursor": self.cursor,
            "settle": self.settle,
        }

    async def check(self, client: AsyncEngineBackend) -> Payload | None:
        if self.watch.tasks is None:
            self.watch.tasks = len((await client.status()).tasks) or None
        while True:  # every page there is now
            page = await client.notifications(self._next_cursor)
            self._next_cursor = page.cursor
            for line in self.watch.feed(page):
                self.log.info("%s", line)
            if not page.notifications:
                break
        verdict = self.watch.verdict()
        if verdict is None:
            await self.retry_note(client)  # logs a fault the instance retries meanwhile
            return None
        if not verdict.succeeded:  # a stall while the instance retries: the retried fault is why
            return failed(await self.with_retry_note(client, verdict.message), signal_id=self.signal_id)
        positions = await client.position()
        offsets = await client.offsets()
        # The instance's topic.prefix names its table assets (Kafka Connect's connector config:
        # Debezium on Connect answers the same).
        config = await client.running_config()
        return {
            "status": "success",
            "message": verdict.message,
            "signal_id": self.signal_id,
            "topic_prefix": str(config.get("topic.prefix") or ""),
            "rows": snapshot_rows(self.watch.scans, self.signal_id),
            "offsets": committed_offsets(offsets, positions),
            "cursor": self._next_cursor,
        }


def committed_offsets(entries: Sequence[OffsetEntry], positions: InstancePosition) -> list[dict[str, Any]]:
    """Each partition's committed offset and, where a task names it, its position as the
    source writes them (the asset events' ``offsets``)."""
    by_partition = {_key(t.partition): t.committed for t in positions.tasks if t.partition}
    return [
        {"partition": dict(e.partition), "offset": dict(e.offset), "position": by_partition.get(_key(e.partition))}
        for e in entries
    ]


def _key(partition: Any) -> str:
    return repr(sorted(dict(partition).items()))
