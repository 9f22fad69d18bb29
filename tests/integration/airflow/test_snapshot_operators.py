"""CdcSnapshotOperator and CdcSnapshotControlOperator against a real PostgreSQL and an instance
started by the start operator: the signal travels on each channel, a templated filter selects
the rows, bad input fails the task with the instance's reason while the instance keeps
streaming."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.snapshot import CdcSnapshotControlOperator, CdcSnapshotOperator
from tests.integration.airflow.conftest import CDC_CONN, PG_CONN, Instance, Source
from tests.integration.airflow.support import changelog, client_of, task_context, wait_for

pytestmark = pytest.mark.integration


def start_instance(**config: Any) -> dict[str, Any]:
    operator = CdcStartEngineOperator(
        task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, config=config or None, timeout=60
    )
    return operator.execute(task_context())


def snapshot(**kwargs: Any) -> CdcSnapshotOperator:
    return CdcSnapshotOperator(task_id="snapshot", cdc_conn_id=CDC_CONN, acceptance_timeout=30, **kwargs)


def test_a_templated_filter_snapshots_the_data_interval_only(connections: Instance, source: Source) -> None:
    xcom = start_instance(**{"snapshot.mode": "no_data"})
    operator = snapshot(
        tables=["public.orders"],
        additional_conditions="updated_at >= '{{ data_interval_start | ds }}' "
        "and updated_at < '{{ data_interval_end | ds }}'",
    )
    interval = {
        "data_interval_start": datetime(2026, 1, 5, tzinfo=UTC),
        "data_interval_end": datetime(2026, 1, 10, tzinfo=UTC),
    }
    operator.render_template_fields(interval)
    assert operator.additional_conditions == "updated_at >= '2026-01-05' and updated_at < '2026-01-10'"
    signal_id = operator.execute(task_context())
    server = operator.hook.running_config()
    assert operator.lineage_inputs == [
        (f"postgres://{server['database.hostname']}:{server['database.port']}", f"{source.database}.public.orders")
    ]
    assert operator.lineage_outputs == [("file", f"{connections.state_dir}/changelog/shop.public.orders")]
    with client_of(xcom, connections.token) as client:
        seen = wait_for(client, signal_id, "COMPLETED")
    scanned = [n for n in seen if n.type == "TABLE_SCAN_COMPLETED"]
    assert (
        scanned[0].additional_data["total_rows_scanned"] == "5" and scanned[0].additional_data["status"] == "SUCCEEDED"
    )
    rows = wait_until(lambda: len(r := changelog(connections.state_dir, "shop.public.orders")) >= 5 and r, 30, "rows")
    assert sorted(r["after"]["id"] for r in rows) == [4, 5, 6, 7, 8]  # 2026-01-01 + id
    assert {r["op"] for r in rows} == {"r"} and {r["source"]["snapshot"] for r in rows} == {"incremental"}


def test_the_signal_table_over_the_source_connection(connections: Instance, source: Source) -> None:
    xcom = start_instance(**{"snapshot.mode": "no_data"})
    signal_id = snapshot(tables="public.customers", channel="source", source_conn_id=PG_CONN).execute(task_context())
    with source.connect() as conn:
        assert conn.execute("select type from debezium_signal where id = %s", (signal_id,)).fetchone() == (
            "execute-snapshot",
        )
    with client_of(xcom, connections.token) as client:
        wait_for(client, signal_id, "COMPLETED")
    wait_until(lambda: len(changelog(connections.state_dir, "shop.public.customers")) == 5, 30, "5 rows delivered")


def test_an_unknown_table_or_a_bad_filter_fails_the_task_and_streaming_goes_on(
    connections: Instance, source: Source
) -> None:
    xcom = start_instance(**{"snapshot.mode": "no_data"})
    with pytest.raises(AirflowFailException) as unknown:
        snapshot(tables=["public.nope"]).execute(task_context())
    assert "rejected" in str(unknown.value) and "no captured table matches" in str(unknown.value)
    assert "schema.table" in str(unknown.value)  # the fix
    with pytest.raises(AirflowFailException) as refused:
        snapshot(tables=["public.orders"], additional_conditions={"public.orders": "no_such_column = 1"}).execute(
            task_context()
        )
    assert "refused by the server" in str(refused.value) and "no_such_column" in str(refused.value)
    with pytest.raises(AirflowFailException, match="not a single predicate"):
        snapshot(tables=["public.orders"], additional_conditions="true; drop table orders").execute(task_context())

    with source.connect() as conn:
        conn.execute("insert into orders values (100, 'after the bad signals', date '2026-02-01')")
    lsn = source.lsn()
    with client_of(xcom, connections.token) as client:
        status = client.status()
        assert status.running and status.phase == "streaming"
        wait_until(lambda: client.position(target=lsn).reached, 30, "streamed past the bad signals")
    assert [r["after"]["id"] for r in changelog(connections.state_dir, "shop.public.orders")] == [100]


def test_pause_resume_and_stop_a_running_snapshot(connections: Instance, source: Source) -> None:
    with source.connect() as conn:
        conn.execute("create table big (id int primary key)")
        conn.execute("insert into big select generate_series(1, 200000)")
    xcom = start_instance(**{"snapshot.mode": "no_data", "incremental.snapshot.chunk.size": 10})
    with pytest.raises(AirflowFailException, match="no incremental snapshot is running"):
        CdcSnapshotControlOperator(task_id="pause", cdc_conn_id=CDC_CONN, action="pause").execute(task_context())
    signal_id = snapshot(tables=["public.big", "public.customers"]).execute(task_context())
    for action in ("pause", "resume"):
        CdcSnapshotControlOperator(task_id=action, cdc_conn_id=CDC_CONN, action=action).execute(task_context())
    CdcSnapshotControlOperator(
        task_id="stop", cdc_conn_id=CDC_CONN, action="stop", tables=["public.customers"]
    ).execute(task_context())
    CdcSnapshotControlOperator(task_id="stop", cdc_conn_id=CDC_CONN, action="stop").execute(task_context())
    with client_of(xcom, connections.token) as client:
        kinds = [n.type for n in wait_for(client, signal_id, "ABORTED")]
    assert kinds[0] == "STARTED" and {"PAUSED", "RESUMED", "ABORTED"} <= set(kinds)
    assert not changelog(connections.state_dir, "shop.public.customers")  # left the snapshot before its turn


def test_the_signal_topic(connections: Instance, kafka_broker: Any, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.signals"
    xcom = start_instance(
        **{
            "snapshot.mode": "no_data",
            "signal.enabled.channels": "source,api,kafka",
            "signal.kafka.topic": topic,
            "signal.kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
        }
    )
    signal_id = snapshot(tables=["public.customers"], channel="kafka").execute(task_context())
    assert signal_id.startswith(f"{topic}-0-")  # Debezium's id of a Kafka signal
    with client_of(xcom, connections.token) as client:
        wait_for(client, signal_id, "COMPLETED")
    wait_until(lambda: len(changelog(connections.state_dir, "shop.public.customers")) == 5, 30, "5 rows delivered")


def test_a_channel_the_instance_does_not_listen_on_names_the_fix(connections: Instance) -> None:
    start_instance(**{"snapshot.mode": "no_data"})
    with pytest.raises(AirflowFailException) as failed:
        snapshot(tables=["public.orders"], channel="kafka").execute(task_context())
    assert "does not listen on the kafka channel" in str(failed.value)
    assert "signal.enabled.channels" in str(failed.value)
