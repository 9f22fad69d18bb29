"""When the asset watchers fire (ADR 0026): the firing rule over a table's counts (thresholds,
min interval, debounce, a recreated topic, a cursor carried over), the snapshot watcher's
completions, and their kwargs."""

from __future__ import annotations

import json

import pytest
from airflow.triggers.base import BaseEventTrigger

from airflow_cdc.engine.notifications import INCREMENTAL, INITIAL, Notification
from airflow_cdc.triggers.table_changes import (
    CdcSnapshotCompletedTrigger,
    CdcTableChangesTrigger,
    ChangeWatch,
    Fired,
    FiringRule,
)


def fires(watch: ChangeWatch, count: int | None, now: float) -> tuple[int, int] | None:
    payload = watch.look(count, now)
    return None if payload is None else (payload["since"], payload["until"])


def test_a_new_watch_counts_everything_the_topic_holds_and_fires_once_per_change() -> None:
    watch = ChangeWatch(FiringRule())
    assert fires(watch, None, 0) is None  # unknown: the instance is not running
    assert fires(watch, 0, 1) is None
    assert fires(watch, 5, 2) == (0, 5)
    assert fires(watch, 5, 3) is None  # nothing new
    assert fires(watch, 6, 4) == (5, 6)
    assert watch.fired == Fired(6, 4)


def test_min_changes_waits_for_enough_changes_past_the_last_event() -> None:
    watch = ChangeWatch(FiringRule(min_changes=10), Fired(100, 0))
    assert fires(watch, 105, 1) is None
    assert fires(watch, 109, 2) is None
    assert fires(watch, 112, 3) == (100, 112)
    assert fires(watch, 121, 4) is None


def test_min_interval_holds_the_next_event_and_then_it_carries_every_change() -> None:
    watch = ChangeWatch(FiringRule(min_interval=60), Fired(0, 1000))
    assert fires(watch, 3, 1010) is None
    assert fires(watch, 8, 1059) is None
    assert fires(watch, 9, 1060) == (0, 9)
    assert fires(watch, 10, 1061) is None
    assert fires(watch, 10, 1121) == (9, 10)


def test_debounce_fires_after_the_burst_or_after_max_delay_while_writes_go_on() -> None:
    watch = ChangeWatch(FiringRule(debounce=10, max_delay=30))
    assert fires(watch, 1, 0) is None
    assert fires(watch, 4, 5) is None
    assert fires(watch, 4, 14) is None
    assert fires(watch, 4, 15) == (0, 4)  # still for 10 s
    # A steady stream: it moves at every look, yet fires once its first change waited 30 s.
    for second in range(16, 46):
        assert fires(watch, 4 + second, second) is None, second
    assert fires(watch, 100, 46) == (4, 100)


def test_a_recreated_topic_starts_the_count_again() -> None:
    watch = ChangeWatch(FiringRule(), Fired(500, 0))
    assert fires(watch, 3, 1) == (0, 3)


def test_a_cursor_survives_as_json() -> None:
    fired = Fired(42, 1234.5)
    assert Fired.from_json(json.loads(json.dumps(fired.to_json()))) == fired
    assert Fired.from_json(None) is None and Fired.from_json({"count": "x"}) is None
    assert fires(ChangeWatch(FiringRule(), fired), 42, 2000) is None


def test_rules_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="min_changes"):
        FiringRule(min_changes=0)
    with pytest.raises(ValueError, match="negative"):
        FiringRule(debounce=-1)


def test_the_watchers_are_event_triggers_whose_kwargs_make_them_again() -> None:
    table = CdcTableChangesTrigger("cdc_shop", "public.orders", min_changes=5, min_interval=30, debounce=2)
    snapshot = CdcSnapshotCompletedTrigger("cdc_shop", table="public.orders")
    for trigger in (table, snapshot):
        assert isinstance(trigger, BaseEventTrigger)
        path, kwargs = trigger.serialize()
        assert json.loads(json.dumps(kwargs)) == kwargs
        module, name = path.rsplit(".", 1)
        again = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
        assert again.serialize() == (path, kwargs)
    assert table.store_key == "airflow_cdc.watcher.CdcTableChangesTrigger.cdc_shop.public.orders"


def notification(kind: str, aggregate: str = INCREMENTAL, snapshot: str = "sig-1", **data: str) -> Notification:
    return Notification(aggregate, kind, {"connector_name": "shop", **data}, id=snapshot)


def test_the_snapshot_watcher_fires_per_completed_snapshot_with_its_rows() -> None:
    trigger = CdcSnapshotCompletedTrigger("cdc_shop")
    scanned = {"status": "SUCCEEDED"}
    events = trigger.completions(
        [
            notification("STARTED"),
            notification("TABLE_SCAN_COMPLETED", data_collection="public.orders", total_rows_scanned="7", **scanned),
            notification("STARTED", snapshot="sig-2"),
            notification("ABORTED", snapshot="sig-2"),
            notification("COMPLETED"),
            notification("STARTED", INITIAL, snapshot="a"),
            notification("TABLE_SCAN_COMPLETED", INITIAL, snapshot="b", data_collection="public.customers"),
            notification("COMPLETED", INITIAL, snapshot="c"),
            Notification("Signal", "COMPLETED", {}, id="sig-3"),  # not a snapshot's
        ]
    )
    assert events == [
        {
            "status": "success",
            "signal_id": "sig-1",
            "snapshot": INCREMENTAL,
            "rows": {"public.orders": 7},
            "table": None,
        },
        {"status": "success", "signal_id": None, "snapshot": INITIAL, "rows": {"public.customers": 0}, "table": None},
    ]
    only_customers = CdcSnapshotCompletedTrigger("cdc_shop", table="public.customers")
    assert (
        only_customers.completions(
            [
                notification("TABLE_SCAN_COMPLETED", data_collection="public.orders", total_rows_scanned="7"),
                notification("COMPLETED"),
            ]
        )
        == []
    )
