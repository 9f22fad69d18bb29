"""The capture side of the demo: an engine instance's configuration, the snapshot signal written
into the signal table, and following the snapshot's notifications through the control API."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import yaml

from airflow_cdc.demo.progress import DemoFailed
from airflow_cdc.demo.shop import SIGNAL_TABLE, TABLES
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.triggers.progress import SnapshotWatch, Verdict

#: Rows per snapshot chunk: small enough that a few thousand rows take a dozen watermarked
#: windows (the progress shows), large enough to stay quick.
CHUNK_SIZE = 500


def instance_config(name: str, prefix: str, state_dir: Path, sink: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    """An engine instance on the sample tables: streams from its start (``snapshot.mode:
    no_data``), so the rows that exist come through the incremental snapshot the signal table
    asks for, while the write load goes on; drops its replication slot when stopped."""
    return {
        "name": name,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": prefix,
        "slot.name": name.replace("-", "_"),
        "publication.name": name.replace("-", "_"),
        "table.include.list": ",".join(TABLES),
        "signal.data.collection": SIGNAL_TABLE,
        "snapshot.mode": "no_data",
        "slot.drop.on.stop": True,
        "incremental.snapshot.chunk.size": CHUNK_SIZE,
        "state.dir": str(state_dir),
        "offset.flush.interval.ms": 200,
        "poll.interval.ms": 100,
        "heartbeat.interval.ms": 1000,
        # Each change carries its table's schema: the apply job creates the replica's tables
        # from it (README: Schema changes), lengths and scales included.
        "key.converter.schemas.enable": True,
        "value.converter.schemas.enable": True,
        "column.propagate.source.type": ".*",
        **sink,
        **more,
    }


def sink_settings(state_dir: Path, bootstrap_servers: str | None) -> dict[str, Any]:
    """The Kafka sink on ``bootstrap_servers``, else the changelog in the state directory."""
    if bootstrap_servers:
        return {"sink.type": "kafka", "sink.kafka.producer.bootstrap.servers": bootstrap_servers}
    # Segments close after 200 ms so that the apply job sees the last changes soon after.
    return {"sink.type": "changelog", "sink.changelog.segment.max.ms": 200}


def write_config(config: Mapping[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    return path


def wait_streaming(client: EngineClient, timeout: float = 60.0) -> None:
    """Until the instance streams: its slot exists, so no later change can be missed."""

    def streaming() -> bool:
        status = client.status()
        if status.error:
            raise DemoFailed(f"the engine instance failed: {status.error}")
        return status.phase == "streaming"

    wait_until(streaming, timeout, "the engine instance streaming", interval=0.1)


def signal_through_table(dsn: str, signal_id: str, tables: tuple[str, ...] = TABLES) -> None:
    """``execute-snapshot`` as a row of the signal table, as an application (or a DBA) sends it."""
    data = json.dumps({"data-collections": list(tables), "type": "incremental"})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"insert into {SIGNAL_TABLE} values (%s, 'execute-snapshot', %s)", (signal_id, data))


def wait_committed(client: EngineClient, position: str, timeout: float = 120.0) -> None:
    """Until every change up to ``position`` (an LSN) was delivered to the sink and committed."""
    wait_until(lambda: client.position(target=position).reached, timeout, f"offsets committed up to {position}", 0.1)


@dataclass
class SnapshotFollower:
    """Follows the notifications of the incremental snapshot of ``signal_id``: prints its
    progress, tells its end (:class:`SnapshotWatch` judges it, as the Airflow sensor does)."""

    client: EngineClient
    say: Callable[[str], None]
    signal_id: str
    stall_timeout: float = 120.0
    _cursor: str | None = None
    _shown: int = -100
    _watch: SnapshotWatch | None = None
    _pause: threading.Event = field(default_factory=threading.Event)

    def poll(self) -> Verdict | None:
        """Read the notifications that arrived; the snapshot's verdict once it ended."""
        page = self.client.notifications(self._cursor)
        self._cursor = page.cursor
        for notification in page.notifications:
            if notification.id == self.signal_id:
                self._show(notification.type, notification.additional_data)
        if self._watch is None:
            self._watch = SnapshotWatch(self.signal_id, self.stall_timeout, tasks=1)
        self._watch.feed(page)
        return self._watch.verdict()

    def follow(self, timeout: float = 600.0) -> None:
        """Until the snapshot completed; DemoFailed if it failed or took longer than ``timeout``."""
        deadline = time.monotonic() + timeout
        while (verdict := self.poll()) is None:
            if time.monotonic() > deadline:
                raise DemoFailed(f"the snapshot {self.signal_id} did not complete within {timeout:.0f}s")
            self._pause.wait(0.1)
        if not verdict.succeeded:
            raise DemoFailed(verdict.message)

    def _show(self, kind: str, data: Mapping[str, str]) -> None:
        if kind == "STARTED":
            self.say(f"  snapshot {self.signal_id} started: {data.get('data_collections')}")
        elif kind == "IN_PROGRESS":
            rows, total = int(data.get("rows_scanned") or 0), int(data.get("estimated_total_rows") or 0)
            percent = min(100, rows * 100 // total) if total else 0
            if percent >= self._shown + 20:  # a line per fifth of the way
                self._shown = percent
                self.say(f"  snapshot {percent}% ({rows}/{total} rows)")
        elif kind == "TABLE_SCAN_COMPLETED":
            self.say(f"  {data.get('scanned_collection')}: {data.get('total_rows_scanned')} rows read")
        elif kind == "COMPLETED":
            self.say(f"  snapshot {self.signal_id} completed")
        elif kind in ("ABORTED", "PAUSED", "RESUMED", "REJECTED"):
            self.say(f"  snapshot {self.signal_id} {kind}")
