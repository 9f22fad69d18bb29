"""What a source task's polls return while signals and snapshots run: the polled records, each
closed window's rows right after its close, then the notifications - in that order, a batch at
a time. A released chunk is thousands of records; big batches cost more per record than they
save, so they are handed over one poll at a time."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.snapshots.coordinator import Segment


class HandOver:
    def __init__(self) -> None:
        self._backlog: deque[Iterator[list[SourceRecord]]] = deque()

    @property
    def pending(self) -> bool:
        """Records of an earlier poll wait: the next poll returns those (``next``), not new ones."""
        return bool(self._backlog)

    def first(self, segments: list[Segment], tail: list[SourceRecord]) -> list[SourceRecord]:
        """What this poll returns, given the coordinator's segments and what comes after them
        (notifications); the rest waits for the next polls."""
        if len(segments) == 1:  # no window closed: the records as they are
            only = segments[0]
            assert isinstance(only, list)
            return only + tail if tail else only
        self.hold([*segments, tail])
        return self.next()

    def hold(self, segments: list[Segment]) -> None:
        """Keep these for the next polls, after what already waits (a poll that read them failed
        before handing them over: they go with the retried one)."""
        self._backlog.extend(iter((s,)) if isinstance(s, list) else s for s in segments if not isinstance(s, list) or s)

    def next(self) -> list[SourceRecord]:
        while self._backlog:
            batch = next(self._backlog[0], None)
            if batch is None:
                self._backlog.popleft()
            elif batch:
                return batch
        return []

    def drain(self) -> list[SourceRecord]:
        """Everything still waiting, in order (the task stops: it is delivered now or never)."""
        out: list[SourceRecord] = []
        while batch := self.next():
            out.extend(batch)
        return out
