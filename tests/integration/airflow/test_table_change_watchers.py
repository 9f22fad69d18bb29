"""The asset watchers against a real engine instance capturing a real PostgreSQL (ADR 0026): the
table watcher fires when its table's changes pass ``min_changes`` and not for another table's,
its cursor carries it over a new watcher and an engine restart without a repeated event, and the
snapshot watcher fires when a snapshot of its table completes, with the rows it scanned."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.triggers.base import CdcEngineTrigger, Payload
from airflow_cdc.triggers.table_changes import CdcSnapshotCompletedTrigger, CdcTableChangesTrigger
from tests.integration.airflow.conftest import CDC_CONN, PG_CONN, Instance, Source
from tests.integration.airflow.support import task_context

pytestmark = pytest.mark.integration


class KeptValues:
    """Where the watchers keep their cursor, with the interface of Airflow's asset state store
    for one asset (``aget``/``aset``); the real store is exercised by the system test."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    async def aget(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    async def aset(self, key: str, value: Any) -> None:
        self.values[key] = value


def look_until(
    trigger: CdcEngineTrigger, done: Callable[[Payload | None], bool], timeout: float = 30
) -> Payload | None:
    """Look (``poll``, as ``run`` does) until ``done`` holds for an answer; its last answer."""

    async def looks() -> Payload | None:
        deadline = time.monotonic() + timeout
        try:
            while True:
                payload = await trigger.poll()
                if done(payload):
                    return payload
                assert time.monotonic() < deadline, f"no such answer within {timeout}s; last {payload}"
                await asyncio.sleep(0.2)
        finally:
            await trigger.close()

    return asyncio.run(looks())


def start() -> None:
    CdcStartEngineOperator(
        task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, config={"snapshot.mode": "no_data"}, timeout=60
    ).execute(task_context())


def watcher(store: KeptValues, table: str = "public.orders", **rule: Any) -> CdcTableChangesTrigger:
    trigger = CdcTableChangesTrigger(CDC_CONN, table, poll_interval=0.2, **rule)
    trigger.asset_state_store = store  # type: ignore[assignment]  # what the triggerer injects
    return trigger


def counted(trigger: CdcTableChangesTrigger, count: int) -> Callable[[Payload | None], bool]:
    """An answer given once the watcher has seen the table's topic at ``count``."""
    return lambda payload: payload is not None or (trigger.watch is not None and trigger.watch._count == count)


def test_the_table_watcher_fires_past_min_changes_and_its_cursor_survives(
    connections: Instance, source: Source
) -> None:
    start()
    store = KeptValues()
    orders = watcher(store, min_changes=3)
    with source.connect() as conn:
        conn.execute("insert into orders values (101, 'new', null), (102, 'new', null)")
    assert look_until(orders, counted(orders, 2)) is None  # 2 < min_changes
    with source.connect() as conn:
        conn.execute("update orders set status = 'late' where id in (1, 2)")
        conn.execute("insert into customers values (6, 'c6')")
    event = look_until(orders, lambda payload: payload is not None)
    assert event is not None
    assert {k: event[k] for k in ("status", "table", "uri", "topic", "since", "until", "changes")} == {
        "status": "success",
        "table": "public.orders",
        "uri": "cdc://shop/public.orders",
        "topic": "shop.public.orders",
        "since": 0,
        "until": 4,
        "changes": 4,
    }
    asyncio.run(orders.save())  # as run() does after handing the event over
    assert store.values == {
        "airflow_cdc.watcher.CdcTableChangesTrigger.cdc_test.public.orders": {"count": 4, "at": event["fired_at"]}
    }

    # The triggerer makes the watcher again (a restart, a new DAG version), the engine restarts:
    # no event for what the last one covered; the next change makes one from there.
    CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())
    start()
    again = watcher(store, min_changes=3)
    assert look_until(again, counted(again, 4)) is None
    with source.connect() as conn:
        conn.execute("delete from orders where id between 10 and 12")
    event = look_until(again, lambda payload: payload is not None)
    # Records, as the topic holds them: a delete is two (its event and the tombstone after it).
    assert event is not None and (event["since"], event["until"]) == (4, 10)

    # Another table's watcher counts its own topic only.
    customers = watcher(KeptValues(), "public.customers")
    event = look_until(customers, lambda payload: payload is not None)
    assert event is not None and (event["since"], event["until"], event["topic"]) == (0, 1, "shop.public.customers")


def test_the_snapshot_watcher_fires_when_a_snapshot_of_its_table_completes(
    connections: Instance, source: Source
) -> None:
    start()
    store = KeptValues()
    completed = CdcSnapshotCompletedTrigger(CDC_CONN, table="public.customers", poll_interval=0.2)
    completed.asset_state_store = store  # type: ignore[assignment]
    assert look_until(completed, lambda payload: True) is None  # its first look: from now on
    orders_only = CdcSnapshotOperator(task_id="s1", cdc_conn_id=CDC_CONN, tables=["public.orders"])
    customers = CdcSnapshotOperator(task_id="s2", cdc_conn_id=CDC_CONN, tables=["public.customers"])
    orders_signal = orders_only.execute(task_context())
    signal_id = customers.execute(task_context())
    event = look_until(completed, lambda payload: payload is not None, timeout=60)
    assert event == {
        "status": "success",
        "signal_id": signal_id,
        "snapshot": "Incremental Snapshot",
        "rows": {"public.customers": 5},
        "table": "public.customers",
    }
    assert signal_id != orders_signal
    asyncio.run(completed.save())
    [cursor] = store.values.values()
    assert isinstance(cursor, str) and cursor


def test_a_watcher_outlives_an_instance_that_is_not_running(
    connections: Instance, source: Source, capfd: pytest.CaptureFixture[str]
) -> None:
    """``run()`` as the triggerer drives it: the instance not started past ``unavailable_timeout``
    is an error it logs, and it watches on; once the instance runs, the changes make an event."""
    trigger = CdcTableChangesTrigger(CDC_CONN, "public.orders", poll_interval=0.2, unavailable_timeout=0.5)
    events: queue.Queue[Payload] = queue.Queue()
    loop = asyncio.new_event_loop()

    async def watch() -> None:
        async for event in trigger.run():
            events.put(event.payload)

    task = loop.create_task(watch())

    def drive() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # how the triggerer ends a watcher too
            loop.run_until_complete(task)
        loop.close()

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    seen = ""

    def logged() -> bool:
        nonlocal seen
        seen += capfd.readouterr().out
        return "watching on" in seen

    try:
        wait_until(logged, 30, "the error logged")
        assert "not running" in seen and events.empty() and thread.is_alive()
        start()
        with source.connect() as conn:
            conn.execute("insert into orders values (201, 'new', null)")
        event = events.get(timeout=60)
        assert (event["since"], event["until"]) == (0, 1)
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(30)
