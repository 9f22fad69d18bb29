"""The asset watchers on a ``kafka_connect`` connection (ADR 0026): Debezium's PostgreSQL connector
on the real Connect worker, the table watcher counting the table's Kafka topic by its end offsets
on the brokers the connection names, and the snapshot watcher reading Debezium's notifications."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_cdc.triggers.table_changes import CdcSnapshotCompletedTrigger
from tests.integration.airflow.conftest import CDC_CONN, Source
from tests.integration.airflow.support import task_context
from tests.integration.airflow.test_connect_operators import connector, start  # noqa: F401 - the fixture
from tests.integration.airflow.test_table_change_watchers import KeptValues, counted, look_until, watcher

pytestmark = pytest.mark.integration


def test_the_watchers_count_the_kafka_topic_and_read_debeziums_notifications(
    connector: str,  # noqa: F811 - the fixture imported above
    source: Source,
) -> None:
    start().execute(task_context())
    prefix = f"ops{source.database[-8:]}"
    store = KeptValues()
    orders = watcher(store, min_changes=2)
    completed = CdcSnapshotCompletedTrigger(CDC_CONN, table="public.orders", poll_interval=0.2)
    completed.asset_state_store = store  # type: ignore[assignment]
    assert look_until(completed, lambda payload: True) is None  # from now on

    with source.connect() as conn:
        conn.execute("insert into orders values (101, 'new', null)")
    assert look_until(orders, counted(orders, 1), timeout=90) is None  # 1 < min_changes
    with source.connect() as conn:
        conn.execute("update orders set status = 'late' where id = 101")
    event = look_until(orders, lambda payload: payload is not None, timeout=90)
    assert event is not None
    assert (event["topic"], event["since"], event["until"]) == (f"{prefix}.public.orders", 0, 2)
    assert event["uri"] == f"cdc://{prefix}/public.orders"
    asyncio.run(orders.save())

    signal_id = CdcSnapshotOperator(task_id="snap", cdc_conn_id=CDC_CONN, tables=["public.orders"]).execute(
        task_context()
    )
    done: Any = look_until(completed, lambda payload: payload is not None, timeout=180)
    assert done["signal_id"] == signal_id and done["rows"] == {"public.orders": 21}
    # The snapshot's reads are changes of the topic too: the table watcher fires from 2.
    event = look_until(orders, lambda payload: payload is not None, timeout=90)
    assert event is not None and event["since"] == 2 and event["until"] >= 2 + 21
