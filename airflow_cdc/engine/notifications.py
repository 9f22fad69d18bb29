"""Notifications in Debezium's shape: ``{id, aggregate_type, type, additional_data, timestamp}``
(``additional_data`` a map of strings, ``timestamp`` epoch milliseconds as a string).

A :class:`NotificationBus` belongs to an engine; tasks publish to it and its channels deliver:
``log`` (a log line), ``api`` (kept for ``GET /notifications?cursor=<cursor>``) and ``sink`` (a
record on ``notification.sink.topic.name``, taken by the task into its next poll so it travels
through transforms, serializer and sink like any record).

Every bus is one *run* with its own id. A cursor names a run and a place in it
(``<run id>:<seq>``), so a reader that outlives the engine process - a deferred Airflow sensor
across an instance restart - is never answered with another run's numbers. An engine instance
keeps the api channel in a journal in its state directory (:meth:`NotificationBus.persist`):
a cursor from an earlier run then gets the rest of that run and everything after it; a cursor
the journal no longer knows gets everything kept, flagged ``reset``.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

log = logging.getLogger(__name__)

INCREMENTAL = "Incremental Snapshot"
INITIAL = "Initial Snapshot"
BLOCKING = "Blocking Snapshot"
SIGNAL = "Signal"

#: What the api channel keeps for readers that come late (across runs when persisted).
KEEP = 10_000
#: Runs without a notification kept that the journal still knows (a cursor "<run>:0").
KEEP_RUNS = 100


@dataclass(frozen=True)
class Notification:
    aggregate_type: str
    type: str
    additional_data: Mapping[str, str] = field(default_factory=dict)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: str = field(default_factory=lambda: str(time.time_ns() // 1_000_000))

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "aggregate_type": self.aggregate_type,
            "type": self.type,
            "additional_data": dict(self.additional_data),
            "timestamp": self.timestamp,
        }

    def as_sink_value(self) -> dict[str, Any]:
        """The value of its record on the sink topic: Debezium's SinkNotificationChannel writes
        ``timestamp`` as the int64 its schema declares (the API's and the log's are strings)."""
        return {**self.as_dict(), "timestamp": int(self.timestamp)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Notification:
        return cls(
            aggregate_type=str(data["aggregate_type"]),
            type=str(data["type"]),
            additional_data={str(k): str(v) for k, v in (data.get("additional_data") or {}).items()},
            id=str(data["id"]),
            timestamp=str(data.get("timestamp") or "0"),
        )


@dataclass(frozen=True)
class NotificationPage:
    """An answer of ``GET /notifications``: what follows a cursor, and the cursor to ask with next."""

    run_id: str
    cursor: str
    notifications: tuple[Notification, ...] = ()
    #: The cursor was not recognised (a run the journal no longer keeps, or garbage): the page
    #: starts at the oldest notification kept, so some may have been seen before.
    reset: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "cursor": self.cursor,
            "notifications": [n.as_dict() for n in self.notifications],
            "reset": self.reset,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NotificationPage:
        return cls(
            run_id=str(data.get("run_id") or ""),
            cursor=str(data["cursor"]),
            notifications=tuple(Notification.from_dict(n) for n in data.get("notifications") or ()),
            reset=bool(data.get("reset")),
        )


@dataclass(frozen=True)
class _Kept:
    run: str
    seq: int
    notification: Notification


class NotificationBus:
    """Thread-safe; ``channels`` from ``notification.enabled.channels``."""

    def __init__(
        self, channels: list[str] | tuple[str, ...] = ("log", "api"), sink_topic: str = "", *, run_id: str = ""
    ) -> None:
        self.channels = frozenset(channels)
        self.sink_topic = sink_topic
        self.run_id = run_id or uuid.uuid4().hex[:16]
        self._lock = threading.Lock()
        self._kept: deque[_Kept] = deque(maxlen=KEEP)
        #: Every run the kept notifications may come from, oldest first (the journal's order).
        self._runs: dict[str, int] = {self.run_id: 0}
        self._for_sink: list[Notification] = []
        self._next = 1
        self._journal: _Journal | None = None

    def persist(self, path: Path) -> None:
        """Keep the api channel's notifications in ``path`` as well, after those of earlier runs
        found there. Only the process that holds the instance may call it, before publishing."""
        if "api" not in self.channels:
            return
        with self._lock:
            runs, earlier = _Journal.read(path)
            earlier = earlier[-KEEP:]
            # Runs with a notification kept, and the last few (their cursors are "<run>:0").
            with_notifications = {k.run for k in earlier}
            runs = [r for i, r in enumerate(runs) if r in with_notifications or i >= len(runs) - KEEP_RUNS]
            runs = [r for r in runs if r != self.run_id]
            self._runs = {run: order for order, run in enumerate([*runs, self.run_id])}
            self._kept.extendleft(reversed(earlier))
            self._journal = _Journal(path)
            self._journal.rewrite(self._runs, self._kept)

    def publish(self, notification: Notification) -> None:
        if "log" in self.channels:
            log.info(
                "notification %s %s %s: %s",
                notification.aggregate_type,
                notification.type,
                notification.id,
                dict(notification.additional_data),
            )
        with self._lock:
            if "api" in self.channels:
                kept = _Kept(self.run_id, self._next, notification)
                self._kept.append(kept)
                self._next += 1
                if self._journal is not None:
                    self._journal.append(kept, self._runs, self._kept)
            if "sink" in self.channels and self.sink_topic:
                self._for_sink.append(notification)

    def since(self, cursor: int = 0, limit: int = 1000) -> tuple[list[dict[str, Any]], int]:
        """This run's notifications after its number ``cursor``, and the number to ask with next
        time (for readers inside the engine's process; others use :meth:`page`)."""
        with self._lock:
            items = [k for k in self._kept if k.run == self.run_id and k.seq > cursor][:limit]
            last = items[-1].seq if items else cursor
        return [k.notification.as_dict() for k in items], last

    def page(self, cursor: str | None = None, limit: int = 1000) -> NotificationPage:
        """The notifications after ``cursor`` (None: every one kept), at most ``limit``."""
        with self._lock:
            start, reset = self._start(cursor)
            items = list(itertools.islice(self._kept, start, start + limit))
            next_cursor = f"{items[-1].run}:{items[-1].seq}" if items else self._end_cursor(cursor, reset)
            return NotificationPage(self.run_id, next_cursor, tuple(k.notification for k in items), reset)

    def _start(self, cursor: str | None) -> tuple[int, bool]:
        """The index of the first kept notification after ``cursor``, and whether it was unknown."""
        if cursor is None or cursor == "":
            return 0, False
        run, seq = _parse_cursor(cursor, self.run_id)
        order = self._runs.get(run)
        if order is None or seq is None:
            return 0, True
        for index, kept in enumerate(self._kept):
            kept_order = self._runs.get(kept.run, -1)
            if kept_order > order or (kept_order == order and kept.seq > seq):
                return index, False
        return len(self._kept), False

    def _end_cursor(self, cursor: str | None, reset: bool) -> str:
        """The cursor when nothing follows ``cursor``: the end of this run."""
        if cursor and not reset:
            run, seq = _parse_cursor(cursor, self.run_id)
            if run == self.run_id and seq is not None:
                return f"{run}:{max(seq, self._next - 1)}"
        return f"{self.run_id}:{self._next - 1}"

    def take_for_sink(self) -> list[Notification]:
        with self._lock:
            taken, self._for_sink = self._for_sink, []
        return taken

    def close(self) -> None:
        """Close the journal; what is published afterwards is kept in memory only."""
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None


def _parse_cursor(cursor: str, current_run: str) -> tuple[str, int | None]:
    """``<run>:<seq>``; a bare number is a place in the current run (the cursors before runs)."""
    run, _, seq = cursor.rpartition(":")
    try:
        return (run or current_run), int(seq)
    except ValueError:
        return run, None


class _Journal:
    """The api channel's notifications as JSON lines: a line ``{"run"}`` when a run begins, and
    ``{"run", "seq", "notification"}`` per notification. Lines are written unbuffered, so a
    ``kill -9`` loses none that were published; a torn last line is skipped when read, and the
    file is rewritten (compacted to the kept notifications) at every start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        self._lines = 0

    @staticmethod
    def read(path: Path) -> tuple[list[str], list[_Kept]]:
        runs: dict[str, None] = {}
        kept: list[_Kept] = []
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            return [], []
        for line in lines:
            try:
                entry = orjson.loads(line)
                run = str(entry["run"])
                runs.setdefault(run)
                if "notification" in entry:
                    kept.append(_Kept(run, int(entry["seq"]), Notification.from_dict(entry["notification"])))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                log.warning("notification journal %s: skipped a damaged line", path)
        return list(runs), kept

    def append(self, kept: _Kept, runs: Mapping[str, int], everything: Iterable[_Kept]) -> None:
        if self._lines > 2 * KEEP:
            self.rewrite(runs, everything)
            return
        self._write([_line(kept)])

    def rewrite(self, runs: Mapping[str, int], kept: Iterable[_Kept]) -> None:
        """Replace the file with these runs and notifications (atomically), then append to it."""
        lines = [orjson.dumps({"run": run}) + b"\n" for run in runs]
        lines += [_line(k) for k in kept]
        temp = self.path.with_name(f".{self.path.name}.tmp")
        temp.write_bytes(b"".join(lines))
        os.replace(temp, self.path)
        if self._file is not None:
            self._file.close()
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - open for the run
        self._lines = len(lines)

    def _write(self, lines: Sequence[bytes]) -> None:
        assert self._file is not None
        self._file.write(b"".join(lines))
        self._lines += len(lines)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _line(kept: _Kept) -> bytes:
    return orjson.dumps({"run": kept.run, "seq": kept.seq, "notification": kept.notification.as_dict()}) + b"\n"


class InitialSnapshotNotifications:
    """Debezium's ``Initial Snapshot`` notifications of one task's snapshot (Debezium's
    ``InitialSnapshotNotificationService``): SKIPPED when no snapshot is needed, STARTED,
    IN_PROGRESS as each table begins, TABLE_SCAN_COMPLETED (``status`` SUCCEEDED, with its rows)
    as each ends, then COMPLETED, or ABORTED when the task stops before.

    COMPLETED comes once the source says the snapshot's last offset is committed
    (:meth:`committed`), not when the last row is read as in Debezium: every row is delivered by
    then, so a sensor that sees it can read the target. Tables are named ``schema.table`` and
    listed with Debezium's delimiter (``,``); ``connector_name`` is the logical server name
    (``topic.prefix``), as Debezium's.
    """

    def __init__(self, bus: NotificationBus, connector_name: str) -> None:
        self.bus = bus
        self.connector_name = connector_name
        self._tables = ""
        #: idle -> reading -> read -> done; stopped() while reading or read is ABORTED.
        self._step = "idle"

    def skipped(self) -> None:
        self._notify("SKIPPED")

    def started(self, tables: Sequence[str]) -> None:
        self._tables = ",".join(tables)
        self._step = "reading"
        self._notify("STARTED")

    def table_started(self, table: str) -> None:
        self._notify("IN_PROGRESS", current_collection_in_progress=table, data_collections=self._tables)

    def table_completed(self, table: str, rows: int) -> None:
        self._notify(
            "TABLE_SCAN_COMPLETED",
            scanned_collection=table,
            data_collections=self._tables,
            total_rows_scanned=str(rows),
            status="SUCCEEDED",
        )

    def read(self) -> None:
        """Every row is read; COMPLETED follows at :meth:`committed`."""
        if self._step == "reading":
            self._step = "read"

    def committed(self) -> None:
        """Everything read so far is committed."""
        if self._step == "read":
            self._step = "done"
            self._notify("COMPLETED")

    def stopped(self) -> None:
        if self._step in ("reading", "read"):
            self._step = "idle"
            self._notify("ABORTED")

    def _notify(self, kind: str, **data: str) -> None:
        self.bus.publish(Notification(INITIAL, kind, {"connector_name": self.connector_name, **data}))
