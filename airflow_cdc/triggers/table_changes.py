"""Asset watchers (ADR 0026): event triggers for ``AssetWatcher`` that fire when a captured table
changed (:class:`CdcTableChangesTrigger`) or when a snapshot completed
(:class:`CdcSnapshotCompletedTrigger`), so that a DAG scheduled on ``table_asset(...)`` runs
when there is something to apply, without a polling schedule.

**What "changed" means.** A table's changes are counted where the apply job reads them: the
records its topic holds durably - the changelog sink's per-topic sequence (``topic_ends`` in
the instance's status), or the Kafka topic's end offsets (a Kafka sink, Debezium on Kafka
Connect). Those records are acknowledged by the sink before the instance commits the offsets
past them, and the counts only grow, across engine restarts. The watcher fires when the count
passed the count it last fired at by ``min_changes``, no sooner than ``min_interval`` seconds
after its last event, and - with ``debounce`` - once the count stood still that long (or the
changes waited ``max_delay``).

**The cursor.** The triggerer re-creates a watcher from its kwargs (which identify it: they
cannot change), so the point it last fired at lives in Airflow's asset state store, under
:data:`STORE_KEY` plus the connection and table, written after each event. Without a store
(``dag.test()``, a trigger shared by several assets) the watcher starts from zero: everything
the table's topic holds counts as changes, so it fires at its first look. Events may thus
repeat or, if the triggerer dies between handing over an event and the event's commit, be late:
the cursor says *when* to run, never *what* to apply - the apply job reads from its own
checkpoint, so a repeated run applies nothing twice and the next event catches a lost one up.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_cdc.assets import snapshot_rows, table_uri
from airflow_cdc.backends import AsyncEngineBackend
from airflow_cdc.engine.notifications import INCREMENTAL, INITIAL, Notification
from airflow_cdc.triggers.base import CdcEngineTrigger, NoAnswer, Payload
from airflow_cdc.triggers.kafka_lag import TopicEnds
from airflow_cdc.triggers.offset import KAFKA_FIX, kafka_client_settings

#: The asset state store's key prefix of the watchers' cursors.
STORE_KEY = "airflow_cdc.watcher"


# -- when to fire: pure, fed with looks -----------------------------------------------------------
@dataclass(frozen=True)
class Fired:
    """Where a watcher last fired: the table's count then, and when (epoch seconds)."""

    count: int
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "at": self.at}

    @classmethod
    def from_json(cls, data: Any) -> Fired | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("count"), int):
            return None
        return cls(int(data["count"]), float(data.get("at") or 0.0))


@dataclass(frozen=True)
class FiringRule:
    """:param min_changes: changes past the last event that make the next one.
    :param min_interval: seconds from one event to the next, at least.
    :param debounce: seconds the count must stand still before an event (0: fire at once).
    :param max_delay: with ``debounce``, seconds changes wait at most while writes go on.
    """

    min_changes: int = 1
    min_interval: float = 0.0
    debounce: float = 0.0
    max_delay: float = 600.0

    def __post_init__(self) -> None:
        if self.min_changes < 1:
            raise ValueError(f"min_changes must be at least 1, not {self.min_changes}")
        if min(self.min_interval, self.debounce, self.max_delay) < 0:
            raise ValueError("min_interval, debounce and max_delay are seconds, not negative")


class ChangeWatch:
    """Decides, look after look, when a table's count makes an event (no I/O: ``now`` is given)."""

    def __init__(self, rule: FiringRule, fired: Fired | None = None) -> None:
        self.rule = rule
        #: No event yet: everything the topic holds is new.
        self.fired = fired or Fired(0, 0.0)
        self._count: int | None = None
        self._moved_at = 0.0
        self._pending_since: float | None = None

    def look(self, count: int | None, now: float) -> Payload | None:
        """The event's payload when ``count`` (None: unknown now) makes one; None otherwise."""
        if count is None:
            return None
        if count < self.fired.count:  # the topic was recreated: its count started again
            self.fired = Fired(0, self.fired.at)
        if count != self._count:
            self._count, self._moved_at = count, now
        pending = count - self.fired.count
        if pending <= 0:
            self._pending_since = None
            return None
        if self._pending_since is None:
            self._pending_since = now
        if pending < self.rule.min_changes or now - self.fired.at < self.rule.min_interval:
            return None
        still = now - self._moved_at >= self.rule.debounce
        if not still and now - self._pending_since < self.rule.max_delay:
            return None
        since, self.fired, self._pending_since = self.fired.count, Fired(count, now), None
        return {"status": "success", "since": since, "until": count, "changes": count - since, "fired_at": now}


# -- the watchers -------------------------------------------------------------------------------
class CdcWatcherTrigger(CdcEngineTrigger, BaseEventTrigger):
    """An event trigger on an engine instance: it yields an event each time :meth:`check` finds
    one and never ends. An error (the instance away past ``unavailable_timeout``, a wrong
    token) is logged and the watch goes on: a watcher has no task to fail."""

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            while True:
                payload = await self.poll()
                if payload is not None and payload.get("status") == "success":
                    yield TriggerEvent(payload)  # type: ignore[no-untyped-call]
                    # After the event, not before: a triggerer dying in between repeats it.
                    await self.save()
                    continue  # another may be ready at once
                if payload is not None:
                    self.log.error("%s; watching on", payload.get("message"))
                    self._unanswered_since = None
                await asyncio.sleep(self.poll_interval)
        finally:
            await self.close()

    @property
    def store_key(self) -> str:
        return f"{STORE_KEY}.{type(self).__name__}.{self.cdc_conn_id}"

    async def load(self) -> Any:
        """The cursor the asset state store kept for this watcher (None: none, or no store)."""
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return None
        try:
            return await store.aget(self.store_key)
        except ValueError as exc:  # several assets share this trigger: they share no cursor
            self.log.warning("the cursor is kept in memory only: %s", exc)
            return None

    async def save(self) -> None:
        store, cursor = getattr(self, "asset_state_store", None), self.cursor()
        if store is None or cursor is None:
            return
        try:
            await store.aset(self.store_key, cursor)
        except ValueError:  # several assets (load said so)
            return

    @abc.abstractmethod
    def cursor(self) -> Any:
        """What :meth:`save` stores (JSON)."""


class CdcTableChangesTrigger(CdcWatcherTrigger):
    """Fires when the changes captured for ``table`` passed the point of its last event (see the
    module). Its event: ``{"status": "success", "table", "uri", "topic", "since", "until",
    "changes", "fired_at"}`` - the table's counts at the previous event and at this one.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine`` or ``kafka_connect``).
    :param table: the data collection, as in ``table_asset(prefix, table)``: ``public.orders``.
    :param min_changes: changes past the last event that make the next one.
    :param min_interval: seconds from one event to the next, at least.
    :param debounce: seconds the table must stay unchanged before an event (0: at once).
    :param max_delay: with ``debounce``, seconds changes wait at most while writes go on.
    :param kafka_conn_id: a ``kafka`` connection with the client settings (a Kafka sink's
        ``sasl.password``, which the instance's API does not hand out).
    """

    def __init__(
        self,
        cdc_conn_id: str,
        table: str,
        min_changes: int = 1,
        min_interval: float = 0.0,
        debounce: float = 0.0,
        max_delay: float = 600.0,
        kafka_conn_id: str | None = None,
        poll_interval: float = 5.0,
        unavailable_timeout: float = 60.0,
    ) -> None:
        super().__init__(cdc_conn_id, poll_interval, unavailable_timeout)
        self.table = table
        self.rule = FiringRule(min_changes, min_interval, debounce, max_delay)
        self.kafka_conn_id = kafka_conn_id
        self.watch: ChangeWatch | None = None
        self._prefix = ""
        self._ends: TopicEnds | None = None

    def kwargs(self) -> dict[str, Any]:
        return {
            **super().kwargs(),
            "table": self.table,
            "min_changes": self.rule.min_changes,
            "min_interval": self.rule.min_interval,
            "debounce": self.rule.debounce,
            "max_delay": self.rule.max_delay,
            "kafka_conn_id": self.kafka_conn_id,
        }

    @property
    def store_key(self) -> str:
        return f"{super().store_key}.{self.table}"

    @property
    def topic(self) -> str:
        return f"{self._prefix}.{self.table}"

    def cursor(self) -> Any:
        return None if self.watch is None else self.watch.fired.to_json()

    async def check(self, client: AsyncEngineBackend) -> Payload | None:
        if self.watch is None:
            self.watch = ChangeWatch(self.rule, Fired.from_json(await self.load()))
            self.log.info("watching %s from count %d", self.table, self.watch.fired.count)
        if not self._prefix:
            self._prefix = str((await client.running_config()).get("topic.prefix") or "")
            if not self._prefix:
                self.log.warning("the instance has no topic.prefix yet")
                return None
        count = await self.count(client)
        payload = self.watch.look(count, time.time())
        if payload is None:
            self.log.debug("%s: count %s, last event at %d", self.table, count, self.watch.fired.count)
            return None
        self.log.info("%s: %d change(s) since the last event", self.table, payload["changes"])
        return {**payload, "table": self.table, "uri": table_uri(self._prefix, self.table), "topic": self.topic}

    async def count(self, client: AsyncEngineBackend) -> int | None:
        """The records the table's topic holds (since its first one); None when unknown now."""
        sink = (await client.status()).sink
        if sink.get("type") == "kafka":
            return await self._kafka_count(client)
        ends = sink.get("topic_ends")
        if not isinstance(ends, Mapping):  # a stopped instance, or one too old to say
            return None
        value = ends.get(self.topic)
        return None if value is None else int(value)

    async def _kafka_count(self, client: AsyncEngineBackend) -> int | None:
        from kafka.errors import KafkaError  # kafka-python loads only where a topic is asked

        if self._ends is None:
            config = await client.running_config()
            self._ends = TopicEnds(await kafka_client_settings(client, config, self.kafka_conn_id))
        try:
            return await asyncio.to_thread(self._ends.total, self.topic)
        except KafkaError as exc:  # brokers away: bounded by unavailable_timeout
            raise NoAnswer(exc, KAFKA_FIX) from exc

    async def close(self) -> None:
        await super().close()
        if self._ends is not None:
            ends, self._ends = self._ends, None
            await asyncio.to_thread(ends.close)


class CdcSnapshotCompletedTrigger(CdcWatcherTrigger):
    """Fires each time a snapshot (incremental or initial) completes on the instance - one that
    scanned ``table`` when it is given. Its event: ``{"status": "success", "signal_id",
    "snapshot", "rows", "table"}``, ``rows`` per table from the snapshot's TABLE_SCAN_COMPLETED
    notifications (those the watcher saw: a snapshot under way when it started counts less).

    The cursor is the notification cursor. Without a stored one the watcher starts after the
    notifications there are at its first look: only snapshots that complete from then on fire.
    """

    def __init__(
        self,
        cdc_conn_id: str,
        table: str | None = None,
        poll_interval: float = 5.0,
        unavailable_timeout: float = 60.0,
    ) -> None:
        super().__init__(cdc_conn_id, poll_interval, unavailable_timeout)
        self.table = table
        self._cursor: str | None = None
        self._started = False
        #: Rows per table of the snapshots under way, by snapshot.
        self._rows: dict[str, dict[str, int]] = {}
        self._ready: deque[Payload] = deque()

    def kwargs(self) -> dict[str, Any]:
        return {**super().kwargs(), "table": self.table}

    @property
    def store_key(self) -> str:
        return f"{super().store_key}.{self.table or '*'}"

    def cursor(self) -> Any:
        return self._cursor

    async def check(self, client: AsyncEngineBackend) -> Payload | None:
        if not self._started:
            stored = await self.load()
            self._cursor = stored if isinstance(stored, str) else None
            if self._cursor is None:  # from now on: skip what is there
                await self._read(client, fire=False)
            self._started = True
        if not self._ready:
            await self._read(client, fire=True)
        return self._ready.popleft() if self._ready else None

    async def _read(self, client: AsyncEngineBackend, *, fire: bool) -> None:
        while True:  # every page there is now
            page = await client.notifications(self._cursor)
            self._cursor = page.cursor
            if not page.notifications:
                return
            for payload in self.completions(page.notifications):
                if fire:
                    self._ready.append(payload)

    def completions(self, notifications: Sequence[Notification]) -> list[Payload]:
        """The events of the snapshots these notifications complete. Rows are counted per
        snapshot: an incremental one by its signal id, the initial one by its kind."""
        events = []
        for notification in notifications:
            kind = notification.aggregate_type
            if kind not in (INCREMENTAL, INITIAL):
                continue
            key = notification.id if kind == INCREMENTAL else INITIAL
            if notification.type == "STARTED":
                self._rows.setdefault(key, {})
            elif notification.type == "TABLE_SCAN_COMPLETED":
                rows = self._rows.setdefault(key, {})
                for table, count in snapshot_rows([notification], notification.id).items():
                    rows[table] = rows.get(table, 0) + count
            elif notification.type == "ABORTED":
                self._rows.pop(key, None)
            elif notification.type == "COMPLETED":
                rows = self._rows.pop(key, {})
                if self.table is None or self.table in rows:
                    events.append(
                        {
                            "status": "success",
                            "signal_id": notification.id if kind == INCREMENTAL else None,
                            "snapshot": kind,
                            "rows": rows,
                            "table": self.table,
                        }
                    )
        return events


__all__ = ["CdcSnapshotCompletedTrigger", "CdcTableChangesTrigger", "ChangeWatch", "Fired", "FiringRule"]
