"""The example DAGs (``dags/``), each run with ``dag.test()`` against a real PostgreSQL and a real
engine instance: task states, XComs, asset events and the captured data (the changelog, replayed
last-change-per-key, equals the source), and no secret in anything the runs leave."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from airflow_cdc.triggers.snapshot import CdcSnapshotTrigger
from tests.system.conftest import PASSWORD, TOKEN
from tests.system.support import Instance, Source, asset_events, load_dag, task_states, xcom

pytestmark = pytest.mark.integration

ORDERS, CUSTOMERS = "shop.public.orders", "shop.public.customers"
#: An advisory lock the signal table's inserts wait for: no watermark, so no snapshot chunk,
#: until the test lets go.
HOLD = 4242


def assert_no_secret(*seen: Any) -> None:
    text = json.dumps(seen, default=str)
    assert PASSWORD not in text
    assert TOKEN not in text


def succeeded(run: Any) -> None:
    states = task_states(run)
    assert set(states.values()) == {"success"}, states


def hold_watermarks(source: Source) -> psycopg.Connection[Any]:
    """Make the signal table's inserts (the snapshot's watermarks) wait for the advisory lock
    ``HOLD``, which the returned connection holds until it unlocks it or closes."""
    source.execute(
        "create function hold_watermarks() returns trigger language plpgsql as "
        f"$$ begin perform pg_advisory_xact_lock_shared({HOLD}); return new; end $$",
        "create trigger hold before insert on debezium_signal for each row execute function hold_watermarks()",
    )
    holder = source.connect()
    holder.execute(f"select pg_advisory_lock({HOLD})")
    return holder


def without_position(rows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {key: {k: v for k, v in row.items() if k != "_cdc_position"} for key, row in rows.items()}


def test_pipeline_streams_snapshots_and_the_sensor_waits_for_the_real_snapshot(
    shop: Instance,
    source: Source,
    replica: Source,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # The snapshot can read no chunk before the sensor's trigger has looked once; then rows
    # change while it runs (streamed meanwhile) and the test lets it go on.
    looks: list[dict[str, Any] | None] = []
    first_look = threading.Event()
    check = CdcSnapshotTrigger.check

    async def observed(self: CdcSnapshotTrigger, client: Any) -> dict[str, Any] | None:
        payload = await check(self, client)
        looks.append(payload)
        first_look.set()
        return payload

    monkeypatch.setattr(CdcSnapshotTrigger, "check", observed)
    holder = hold_watermarks(source)

    def write_then_release() -> None:
        try:
            if first_look.wait(120):
                source.execute(
                    "update orders set status = 'changed' where id % 100 = 0",
                    "delete from orders where id between 1001 and 1005",
                    # A schema change mid-run: the apply job adds the column to the replica
                    # (which it created), with the default the source's rows got.
                    "alter table orders add column note text not null default 'none'",
                    "insert into orders select g, 'new', now() from generate_series(3001, 3010) g",
                    "update orders set note = 'noted' where id % 50 = 0",
                    "update customers set name = 'renamed' where id = 7",
                )
        finally:
            holder.close()  # releases the lock

    releaser = threading.Thread(target=write_then_release, daemon=True)
    releaser.start()
    try:
        run = load_dag("example_cdc_pipeline").test()
    finally:
        holder.close()
        releaser.join(30)

    succeeded(run)
    assert looks[0] is None, "the snapshot was complete at the trigger's first look: it did not wait"
    assert looks[-1] is not None and looks[-1]["status"] == "success" and len(looks) >= 2

    signal_id = xcom(run, "snapshot")
    done = xcom(run, "snapshot_done")
    assert isinstance(signal_id, str) and signal_id
    assert done["signal_id"] == signal_id and done["topic_prefix"] == "shop"
    assert done["rows"]["public.customers"] == 50
    assert 0 < done["rows"]["public.orders"] <= 2005
    [offset] = done["offsets"]
    assert offset["partition"] == {"server": "shop"} and "/" in offset["position"]

    events = {uri: extra for uri, extra, _ in asset_events(run)}
    assert set(events) == {"cdc://shop/public.orders", "cdc://shop/public.customers"}
    assert events["cdc://shop/public.customers"] == {"rows": 50, "signal_id": signal_id, "offsets": done["offsets"]}
    assert events["cdc://shop/public.orders"]["rows"] == done["rows"]["public.orders"]

    caught_up = xcom(run, "caught_up")
    assert caught_up["target"] == "current"
    [position] = caught_up["positions"]
    assert position["partition"] == {"server": "shop"} and position["target"]

    # Snapshot and stream together leave the tables as the source has them (a change from
    # before the ALTER has no ``note``: compare the columns every change has).
    state = {k: {c: v for c, v in row.items() if c != "note"} for k, row in shop.table_state(ORDERS).items()}
    assert state == {k: {c: v for c, v in row.items() if c != "note"} for k, row in source.rows("orders").items()}
    assert shop.table_state(CUSTOMERS) == source.rows("customers")
    reads = shop.snapshot_reads(CUSTOMERS)
    assert len(reads) == 50 and {r["source"]["snapshot"] for r in reads} == {"incremental"}

    # The Spark job applied all of it: the replica equals the source row by row.
    applied = xcom(run, "apply_changes")
    assert applied["records"] >= 2060 and applied["batches"] >= 1
    assert without_position(replica.rows("orders")) == source.rows("orders")
    assert without_position(replica.rows("customers")) == source.rows("customers")
    assert_no_secret(signal_id, done, caught_up, events, applied, capfd.readouterr(), shop.log())


def test_snapshot_backfill_resnapshots_the_rows_of_the_data_interval(
    shop: Instance, source: Source, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = load_dag("example_snapshot_backfill")
    run = dag.test(logical_date=datetime(2026, 1, 5, tzinfo=UTC))
    succeeded(run)
    start, end = run.data_interval_start, run.data_interval_end
    window = f"updated_at >= '{start.isoformat()}' and updated_at < '{end.isoformat()}'"
    expected = source.rows("orders", window)
    assert len(expected) == 200  # one day of the ten

    signal_id = xcom(run, "backfill")
    done = xcom(run, "backfill_done")
    assert done["signal_id"] == signal_id and done["rows"] == {"public.orders": 200}
    reads = shop.snapshot_reads(ORDERS)
    assert sorted(r["after"]["id"] for r in reads) == sorted(expected)
    assert shop.table_state(ORDERS) == expected  # only the window was re-read (the instance streams from its start)
    [(uri, extra, task_id)] = asset_events(run)
    assert (uri, task_id) == ("cdc://shop/public.orders", "backfill_done")
    assert extra["rows"] == 200 and extra["signal_id"] == signal_id

    # A day without changes: the table scan ends EMPTY, which this DAG accepts. The instance
    # started by the first run is reused (same configuration).
    quiet = dag.test(logical_date=datetime(2026, 3, 1, tzinfo=UTC))
    succeeded(quiet)
    assert xcom(quiet, "ensure_engine")["started"] is False
    assert xcom(quiet, "backfill_done")["rows"] == {"public.orders": 0}
    assert [(uri, extra["rows"]) for uri, extra, _ in asset_events(quiet)] == [("cdc://shop/public.orders", 0)]
    assert len(shop.snapshot_reads(ORDERS)) == 200
    assert_no_secret(done, capfd.readouterr(), shop.log())


def test_microbatch_captures_a_bounded_batch_per_run(
    shop_batch: Instance, source: Source, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CDC_EXAMPLE_BATCH_SECONDS", "5")
    dag = load_dag("example_cdc_microbatch")

    first = dag.test(logical_date=datetime(2026, 1, 1, 0, 0, tzinfo=UTC))
    succeeded(first)
    batch = xcom(first, "capture")
    assert batch["rows"] == {"public.orders": 2000, "public.customers": 50}
    assert batch["stopped_by"] == "max_duration"
    assert shop_batch.table_state(ORDERS) == source.rows("orders")
    events = {uri: extra for uri, extra, _ in asset_events(first)}
    assert {uri: extra["rows"] for uri, extra in events.items()} == {
        "cdc://shop/public.orders": 2000,
        "cdc://shop/public.customers": 50,
    }
    assert events["cdc://shop/public.orders"]["offsets"] == batch["offsets"]

    source.execute(
        "update orders set status = 'changed' where id <= 3",
        "delete from orders where id in (10, 11)",
        "insert into customers values (51, 'late customer')",
    )
    second = dag.test(logical_date=datetime(2026, 1, 1, 0, 15, tzinfo=UTC))
    succeeded(second)
    batch = xcom(second, "capture")
    assert batch["rows"] == {"public.orders": 5, "public.customers": 1}  # 3 updates, 2 deletes; 1 insert
    assert {uri: extra["rows"] for uri, extra, _ in asset_events(second)} == {
        "cdc://shop/public.orders": 5,
        "cdc://shop/public.customers": 1,
    }
    assert shop_batch.table_state(ORDERS) == source.rows("orders")
    assert shop_batch.table_state(CUSTOMERS) == source.rows("customers")
    assert_no_secret(batch, capfd.readouterr(), shop_batch.log())


def test_teardown_drains_stops_dropping_the_slot_and_resets_offsets(
    shop: Instance, source: Source, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_cdc.operators.engine import CdcStartEngineOperator

    CdcStartEngineOperator(task_id="start", cdc_conn_id="cdc_shop", source_conn_id="pg_shop").execute(
        {"outlet_events": OutletEventAccessors()}  # type: ignore[arg-type]
    )
    source.execute("insert into orders select g, 'late', now() from generate_series(5001, 5020) g")

    run = load_dag("example_cdc_teardown").test()
    succeeded(run)
    drained = xcom(run, "drained")
    assert drained["target"] == "current" and drained["positions"][0]["committed"]
    assert xcom(run, "stop_engine") == {"name": shop.name, "stopped": True, "state": "STOPPED"}
    reset = xcom(run, "reset_offsets")
    assert reset["action"] == "reset" and reset["removed"]
    # Every change made before the wait was delivered; the slot is gone; a next start is a first one.
    assert set(shop.table_state(ORDERS)) == set(range(5001, 5021))
    assert source.slots() == []
    assert_no_secret(drained, reset, capfd.readouterr(), shop.log())


def test_the_snapshot_trigger_fails_on_a_signal_the_instance_rejects(shop: Instance, source: Source) -> None:
    """A bad signal (a table that does not exist) fails the wait with the instance's reason,
    and the instance goes on streaming."""
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_cdc.operators.engine import CdcStartEngineOperator

    CdcStartEngineOperator(task_id="start", cdc_conn_id="cdc_shop", source_conn_id="pg_shop").execute(
        {"outlet_events": OutletEventAccessors()}  # type: ignore[arg-type]
    )
    with shop.client() as client:
        signal_id = client.signal("execute-snapshot", {"data-collections": ["public.nope"]})
    trigger = CdcSnapshotTrigger("cdc_shop", signal_id, stall_timeout=60, poll_interval=0.2)
    event = asyncio.run(anext(trigger.run()))
    assert event.payload["status"] == "failed"
    assert "rejected" in event.payload["message"] and "public.nope" in event.payload["message"]
    with shop.client() as client:
        assert client.status().running
