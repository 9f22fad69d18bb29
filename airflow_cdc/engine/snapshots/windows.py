"""The windows of an incremental snapshot waiting for the stream, and which of a chunk's rows
the stream's changes make stale (ADR 0007, "Which changes drop a chunk row").

A chunk's row is stale when a change of its key is streamed before the window's close but the
chunk's read did not see it. With the read's visibility (:class:`ReadVisibility`) that is
exact, whatever the timing:

* a change streamed since the window was queued drops its row if the read did not see its
  transaction (the keys of those changes are remembered per window);
* a transaction that changed the window's table, streamed *before* the window was queued, that
  the read did not see either - its commit was streamed, yet it was not visible: PostgreSQL
  streams a commit a moment before it becomes visible, and longer when the commit waits for a
  synchronous standby - makes the whole window be read again, since which keys it changed is no
  longer known.

So every streamed transaction (and the tables it changed) is remembered until a read saw it
(every later read sees it too), or, when no window closes for a while, until
:meth:`WindowQueue.forget_seen` is given what a read would see now. Without visibility every
change streamed since the window was queued drops its row (the rule before the exact one;
dropping more rows is safe).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from airflow_cdc.engine.records import SourceRecord
from airflow_cdc.engine.snapshots.chunks import Chunk, ReadVisibility

log = logging.getLogger(__name__)

#: Streamed transactions no read has seen yet, at most, before the source is asked what a read
#: would see now (those it sees are forgotten).
REMEMBERED_TRANSACTIONS = 8192


@dataclass(eq=False)
class Window:
    """A window whose watermarks and chunk are being written and read, or wait for the stream."""

    id: str
    topic: str
    read: Future[Chunk | None]  # None: the window before ended the table, nothing was written
    since: int  # how many records had been observed when it was queued


class WindowQueue:
    """Windows in the order the stream meets them, what the stream changed since the oldest of
    them was queued (each key's last change), and the streamed transactions no read has seen.
    Records are numbered in stream order as they are observed."""

    def __init__(
        self, dedup_key: Callable[[SourceRecord], Hashable], transaction: Callable[[SourceRecord], Hashable]
    ) -> None:
        self._dedup_key, self._transaction = dedup_key, transaction
        self._windows: deque[Window] = deque()
        self._topics: frozenset[str] = frozenset()
        self._observed = 0
        self._changed: dict[tuple[str, Hashable], tuple[Hashable, int]] = {}
        #: Each streamed transaction's first record's number and the topics it changed;
        #: forgotten once a read saw it.
        self._transactions: dict[Hashable, tuple[int, set[str]]] = {}
        self._last_transaction: Hashable = None
        self._last_topics: set[str] | None = None  # the last transaction's

    def __len__(self) -> int:
        return len(self._windows)

    @property
    def first(self) -> Window | None:
        return self._windows[0] if self._windows else None

    @property
    def last(self) -> Window | None:
        return self._windows[-1] if self._windows else None

    @property
    def remembers_too_much(self) -> bool:
        return len(self._transactions) > REMEMBERED_TRANSACTIONS

    def queue(self, window_id: str, topic: str, read: Future[Chunk | None]) -> None:
        self._windows.append(Window(window_id, topic, read, self._observed))
        self._topics = self._topics | {topic}

    def observe(self, records: Sequence[SourceRecord]) -> None:
        """Streamed records (every one, in stream order)."""
        number, last, topics = self._observed, self._last_transaction, self._last_topics
        transactions, transaction, watched = self._transactions, self._transaction, self._topics
        for record in records:
            number += 1
            tx, topic = transaction(record), record.topic
            if tx != last:  # a transaction's records come one after the other
                last, topics = tx, None
                if tx is not None:
                    topics = transactions.setdefault(tx, (number, set()))[1]
            if topics is not None and topic:
                topics.add(topic)
            if watched and topic in watched:
                self._changed[(topic, self._dedup_key(record))] = (tx, number)
        self._observed, self._last_transaction, self._last_topics = number, last, topics

    def take(self, window_id: str) -> Window | None:
        """The first window, if it is ``window_id`` (the stream reached its close)."""
        window = self.first
        if window is None or window.id != window_id:
            return None
        self._windows.popleft()
        return window

    def stale_keys(self, window: Window, chunk: Chunk) -> set[Hashable] | None:
        """The keys of ``window``'s rows to drop, or None: the chunk must be read again (a
        transaction it did not see was streamed before the window was queued). Call once the
        stream reached the window's close, after :meth:`take`."""
        seen, since, topic = chunk.visibility, window.since, window.topic
        stale: set[Hashable] | None
        if seen is None:
            stale = {key for (t, key), (_, n) in self._changed.items() if t == topic and n > since}
        else:
            missed = [
                tx
                for tx, (first, topics) in self._transactions.items()
                if first <= since and topic in topics and not seen.sees(tx)
            ]
            if missed:
                log.info(
                    "incremental snapshot: window %s is read again: transaction(s) %s were streamed before it was "
                    "queued but were not yet visible to its read",
                    window.id,
                    ", ".join(sorted(map(str, missed))),
                )
                stale = None
            else:
                sees = seen.sees
                stale = {
                    key
                    for (t, key), (tx, n) in self._changed.items()
                    if t == topic and n > since and (tx is None or not sees(tx))
                }
            self.forget_seen(seen)
        self._forget_changes()
        return stale

    def forget_seen(self, seen: ReadVisibility | None) -> None:
        """Forget the streamed transactions a read saw (every later read sees them too); all of
        them if the source cannot tell (``None``: nothing would use them)."""
        if seen is None:
            self._transactions.clear()
        else:
            sees = seen.sees
            self._transactions = {tx: entry for tx, entry in self._transactions.items() if not sees(tx)}

    def clear(self) -> None:
        """Discard every window (reads still running finish on their own; their watermarks no
        longer match anything)."""
        self._windows.clear()
        self._forget_changes()

    def _forget_changes(self) -> None:
        """Drop the changes no queued window needs: those observed before the oldest was queued."""
        self._topics = frozenset(w.topic for w in self._windows)
        if not self._windows:
            self._changed.clear()
            return
        oldest = self._windows[0].since
        self._changed = {k: v for k, v in self._changed.items() if v[1] > oldest}


def surviving(
    batches: Iterator[list[SourceRecord]], dedup_key: Callable[[SourceRecord], Hashable], stale: set[Hashable]
) -> Iterator[list[SourceRecord]]:
    """The batches without the rows whose key is ``stale``."""
    for records in batches:
        if stale:
            records = [record for record in records if dedup_key(record) not in stale]
        if records:
            yield records
