"""CdcStartEngineOperator and CdcStopEngineOperator against a real PostgreSQL: the source
connection's password reaches the detached instance (and nothing else), starting is idempotent,
a different configuration is refused, stopping is graceful and idempotent."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.hooks.engine import EFFECTIVE_CONFIG
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from tests.integration.airflow.conftest import CDC_CONN, PASSWORD, PG_CONN, Instance, Source
from tests.integration.airflow.support import running, task_context

pytestmark = pytest.mark.integration


def start(**kwargs: object) -> CdcStartEngineOperator:
    return CdcStartEngineOperator(task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, timeout=60, **kwargs)


def test_start_streams_with_the_connections_password_and_is_idempotent(
    connections: Instance, source: Source, caplog: pytest.LogCaptureFixture
) -> None:
    first = start(config={"table.include.list": "public.orders"}).execute(task_context())
    assert first["name"] == connections.name and first["started"] is True and first["phase"] == "streaming"
    assert first["api_url"].startswith("http://127.0.0.1:") and first["run_id"]
    position = first["positions"][0]
    assert position["partition"] == {"server": "shop"} and "/" in position["current"]  # an LSN
    assert position["committed"] is None or "/" in position["committed"]  # the snapshot's may not be yet

    again = start(config={"table.include.list": "public.orders"}).execute(task_context())
    assert (again["started"], again["run_id"]) == (False, first["run_id"])

    with EngineClient(first["api_url"], connections.token) as client:
        captured = client.connector(connections.name)["config"]
    assert captured["database.user"] == source.user and captured["database.dbname"] == source.database
    assert "database.password" not in captured

    # The password is in no XCom, log line or file the instance keeps.
    effective = connections.state_dir / EFFECTIVE_CONFIG
    assert effective.stat().st_mode & 0o077 == 0
    seen = json.dumps([first, again]) + caplog.text + connections.log()
    seen += "".join(p.read_text(errors="replace") for p in connections.state_dir.iterdir() if p.is_file())
    assert PASSWORD not in seen


def test_a_running_instance_with_another_configuration_is_refused_naming_the_keys(connections: Instance) -> None:
    start(config={"table.include.list": "public.orders"}).execute(task_context())
    with pytest.raises(AirflowFailException) as refused:
        start(config={"table.include.list": "public.customers"}).execute(task_context())
    message = str(refused.value)
    assert "already running with another configuration" in message
    assert "table.include.list: running 'public.orders', asked 'public.customers'" in message
    assert "CdcStopEngineOperator" in message
    assert running(connections.props)  # untouched


def test_stop_is_graceful_and_idempotent(connections: Instance, source: Source) -> None:
    start().execute(task_context())
    stopped = CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())
    assert stopped == {"name": connections.name, "stopped": True, "state": "STOPPED"}
    assert not running(connections.props)
    again = CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())
    assert again == {"name": connections.name, "stopped": False, "state": "STOPPED"}
    with source.connect() as conn:  # the slot outlives a stop without slot.drop.on.stop
        assert conn.execute("select count(*) from pg_replication_slots").fetchone() == (1,)


def test_drop_slot_needs_an_instance_that_drops_it(connections: Instance, source: Source) -> None:
    start().execute(task_context())
    with pytest.raises(AirflowFailException, match=r"runs without slot\.drop\.on\.stop"):
        CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN, drop_slot=True).execute(task_context())
    assert running(connections.props)
    CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN).execute(task_context())

    start(config={"slot.drop.on.stop": True}).execute(task_context())
    CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN, drop_slot=True).execute(task_context())
    with source.connect() as conn:
        assert conn.execute("select count(*) from pg_replication_slots").fetchone() == (0,)


def test_a_wrong_source_password_fails_the_start_with_the_servers_words(
    connections: Instance, monkeypatch: pytest.MonkeyPatch, source: Source
) -> None:
    if source.server.external:
        pytest.skip("the test server's own role is used on an external server")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{PG_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": source.server.host,
                "port": source.server.port,
                "login": source.user,
                "password": "not-the-password",
                "schema": source.database,
            }
        ),
    )
    with pytest.raises(AirflowFailException) as failed:  # no retries: the instance gives up at once
        start(config={"errors.max.retries": 0}).execute(task_context())
    assert "password authentication failed" in str(failed.value)
    assert "not-the-password" not in str(failed.value)


def test_the_link_opens_the_cdc_page_at_the_instance(connections: Instance) -> None:
    operator = start()
    xcom = operator.execute(task_context())
    assert xcom["api_url"].startswith("http://127.0.0.1:")  # the API itself, for logs and scripts
    link = operator.operator_extra_links[0].get_link(operator, ti_key=None)
    assert link == f"/plugin/cdc/cdc/?instance={CDC_CONN}"  # the page inside Airflow's frame
    # A task that failed before it reached the instance links to the same place.
    fresh = CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN)
    assert fresh.operator_extra_links[0].get_link(fresh, ti_key=None) == link
