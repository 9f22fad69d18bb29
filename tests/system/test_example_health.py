"""``dags/example_cdc_health.py`` with ``dag.test()`` against a real instance on a real
PostgreSQL: a healthy instance passes and the task returns its figures. (An idle slot that
retains WAL failing the check: tests/integration/airflow/test_health_operator.py.)"""

from __future__ import annotations

from airflow_cdc.engine.testing import wait_until
from tests.system.support import Instance, Source, load_dag, xcom
from tests.system.test_example_dags import ORDERS, succeeded


def test_the_health_dag_passes_on_a_healthy_instance_and_returns_the_figures(shop: Instance, source: Source) -> None:
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_cdc.operators.engine import CdcStartEngineOperator

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
