"""``dags/example_cdc_health.py`` against a real instance on a real PostgreSQL: with
``dag.test()``, a healthy instance passes and the task returns its figures; under Airflow's real
scheduler, DAG processor, triggerer and API server, a scheduled run fails on an idle slot that
retains WAL - the reason, the fix and the DAG's alert in its log - and passes once a captured
change moved the slot. (The operator's cases: tests/integration/airflow/test_health_operator.py.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.operators.engine import CdcStartEngineOperator
from tests.integration.airflow.support import task_context
from tests.integration.airflow.test_health_operator import retained
from tests.system.conftest import _connections, _instance
from tests.system.first_run_stack import run_bash, wait_for_run, wait_for_task_log
from tests.system.support import DAGS, Instance, Source, load_dag, xcom
from tests.system.test_example_dags import ORDERS, succeeded
from tests.system.test_example_on_change import airflow_home_for, components

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAG_ID = "example_cdc_health"


def test_the_health_dag_passes_on_a_healthy_instance_and_returns_the_figures(shop: Instance, source: Source) -> None:
    from airflow.sdk.execution_time.context import OutletEventAccessors

    CdcStartEngineOperator(task_id="start", cdc_conn_id="cdc_shop", source_conn_id="pg_shop").execute(
        {"outlet_events": OutletEventAccessors()}  # type: ignore[arg-type]
    )
    source.execute("update orders set status = 'checked' where id = 1")
    wait_until(lambda: shop.table_state(ORDERS).get(1, {}).get("status") == "checked", 60, "delivered")

    run = load_dag("example_cdc_health").test()
    succeeded(run)
    figures = xcom(run, "health")
    assert figures["health"] == "RUNNING" and figures["retained_bytes"] is not None, figures
    assert figures["idle_s"] is not None and figures["idle_s"] < 6 * 3600, figures


@pytest.fixture
def idle_shop(tmp_path: Path, source: Source, monkeypatch: pytest.MonkeyPatch) -> Iterator[Instance]:
    """``cdc_shop`` capturing only ``orders``, with no heartbeat (Debezium's default)."""
    settings = {"table.include.list": "public.orders", "heartbeat.interval.ms": 0, "slot.drop.on.stop": True}
    with _instance(tmp_path, source, "health", **settings) as instance:
        _connections(monkeypatch, source, cdc_shop=instance)
        yield instance


@pytest.mark.timeout(1200)
def test_the_scheduled_health_check_fails_on_retained_wal_and_passes_once_the_slot_moves(
    tmp_path: Path, idle_shop: Instance, source: Source
) -> None:
    """The example under Airflow's scheduler, DAG processor, triggerer and API server, with a
    retained-WAL threshold of 1 MB (the file's 2 GiB replaced). The instance is paused (a
    running engine lets an idle slot advance on the server's keepalives; a paused one reads
    nothing) while another database writes: the scheduled run fails with the reason, the fix,
    and the DAG's alert in the task's log. Resumed, with a captured change, a run passes."""
    text = (DAGS / "example_cdc_health.py").read_text()
    assert "max_retained_wal_bytes=2 * 1024**3" in text
    text = text.replace("max_retained_wal_bytes=2 * 1024**3", "max_retained_wal_bytes=1024 * 1024")
    airflow = airflow_home_for(tmp_path, text, "example_cdc_health.py", dag_id=DAG_ID, task_id="health")
    airflow.env.update({k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")})
    CdcStartEngineOperator(task_id="start", cdc_conn_id="cdc_shop", source_conn_id="pg_shop", timeout=120).execute(
        task_context()
    )
    source.execute("update orders set status = 'captured' where id = 1")
    backend = CdcEngineHook("cdc_shop").get_backend()
    wait_until(lambda: idle_shop.table_state(ORDERS).get(1, {}).get("status") == "captured", 60, "captured")
    assert backend.pause().state == "PAUSED"
    slot = f"slot_health_{source.database}"
    noise = f"{source.database}_noise"
    source.execute(f'create database "{noise}"')
    try:
        with psycopg.connect(source.server.dsn(noise), autocommit=True) as conn:
            conn.execute("create table noise (id serial primary key, payload text)")
            for _ in range(10):
                conn.execute("insert into noise (payload) select repeat('x', 500) from generate_series(1, 1000)")
        wait_until(lambda: retained(source, slot) > 2 * 1024 * 1024, 60, "WAL retained by the idle slot")

        with components(airflow, "api-server", "dag-processor", "triggerer", "scheduler"):
            run_bash(f"airflow dags unpause {DAG_ID}", airflow.env, "unpausing the DAG")
            wait_until(lambda: airflow.runs(), 180, "the scheduled run", interval=1)
            scheduled, run_type, _ = airflow.runs()[0]
            assert run_type == "scheduled", airflow.runs()
            assert wait_for_run(airflow.meta, DAG_ID, scheduled, 300) == "failed", airflow.diagnosis()
            # The reason, the fix, and the DAG's on_failure_callback's alert.
            wait_for_task_log(
                airflow.home.parent,
                DAG_ID,
                scheduled,
                "health",
                "replication slot retains",
                "heartbeat.interval.ms",
                "CDC health check failed",
            )

            # Resumed, a captured change: the engine confirms its position, the slot lets the WAL go.
            # (It confirms when it commits its offsets, every offset.flush.interval.ms, 60 s as
            # Debezium's: committed at once here, so the wait does not ride on that interval.)
            assert backend.resume().state != "PAUSED"
            source.execute("update orders set status = 'moved' where id = 1")
            wait_until(lambda: idle_shop.table_state(ORDERS).get(1, {}).get("status") == "moved", 60, "captured")
            with idle_shop.client() as client:

                def moved() -> bool:
                    client.flush()
                    return retained(source, slot) < 1024 * 1024

                wait_until(moved, 60, "the slot moved past the noise", interval=1)
            run_bash(f"airflow dags trigger {DAG_ID} --run-id after-the-change", airflow.env, "triggering a run")
            assert wait_for_run(airflow.meta, DAG_ID, "after-the-change", 300) == "success", airflow.diagnosis()
    finally:
        source.execute(f'drop database if exists "{noise}" with (force)')
