"""CdcOffsetsOperator against a real PostgreSQL and an instance the start operator runs: refused
while the instance runs (saying why and what to do), seek skips what lies before the position,
reset makes the next start a first start."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from airflow_cdc.operators.offsets import CdcOffsetsOperator
from tests.integration.airflow.conftest import CDC_CONN, PG_CONN, Instance, Source
from tests.integration.airflow.support import changelog, client_of, running, task_context

pytestmark = pytest.mark.integration


def start() -> dict[str, object]:
    operator = CdcStartEngineOperator(task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, timeout=60)
    return operator.execute(task_context())


def stop() -> None:
    CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())


def test_refused_while_running_then_seek_and_reset(connections: Instance, source: Source) -> None:
    xcom = start()
    orders = lambda: changelog(connections.state_dir, "shop.public.orders")  # noqa: E731
    wait_until(lambda: len(orders()) == 20, 30, "the initial snapshot delivered")
    with pytest.raises(AirflowFailException) as refused:
        CdcOffsetsOperator(task_id="reset", cdc_conn_id=CDC_CONN, action="reset").execute(task_context())
    assert "is running: stop it first" in str(refused.value) and "CdcStopEngineOperator" in str(refused.value)
    assert "overwritten at its next commit" in str(refused.value)  # the reason
    assert running(connections.props)

    with client_of(xcom, connections.token) as client:  # everything so far committed before the stop
        lsn = source.lsn()
        wait_until(lambda: client.position(target=lsn).reached, 30, "committed")
    stop()
    with source.connect() as conn:
        conn.execute("insert into orders values (101, 'skipped by the seek', date '2026-03-01')")
    skip_to = source.lsn()
    sought = CdcOffsetsOperator(  # its password reaches the source to check the LSN against it
        task_id="seek",
        cdc_conn_id=CDC_CONN,
        source_conn_id=PG_CONN,
        action="seek",
        position="{{ params.lsn }}",
        params={"lsn": skip_to},
    )
    sought.render_template_fields({"params": {"lsn": skip_to}})
    moved = sought.execute(task_context())
    assert moved["action"] == "seek" and moved["partition"] == {"server": "shop"}
    assert moved["position"] == skip_to.upper() and moved["before"] != moved["offset"]

    start()
    with source.connect() as conn:
        conn.execute("insert into orders values (102, 'after the seek', date '2026-03-02')")
    wait_until(lambda: any(e["after"]["id"] == 102 for e in orders()), 30, "102 streamed")
    assert not any(e["after"]["id"] == 101 for e in orders())

    stop()
    removed = CdcOffsetsOperator(task_id="reset", cdc_conn_id=CDC_CONN, action="reset").execute(task_context())
    assert removed["action"] == "reset" and removed["removed"][0]["partition"] == {"server": "shop"}
    start()  # a first start again: snapshot.mode=initial reads every row once more
    wait_until(lambda: len([e for e in orders() if e["op"] == "r"]) == 20 + 22, 60, "a new initial snapshot")


def test_a_position_that_is_not_one_names_the_form(connections: Instance) -> None:
    with pytest.raises(AirflowFailException) as failed:
        CdcOffsetsOperator(task_id="seek", cdc_conn_id=CDC_CONN, action="seek", position="yesterday").execute(
            task_context()
        )
    assert "0/16B3748" in str(failed.value)  # the codec's example of an LSN
