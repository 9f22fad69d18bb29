"""CdcCaptureOperator against a real PostgreSQL: bounded runs that go on from each other's
offsets, stop at max_records, a target position or max_duration, report rows per table and
emit asset events for the tables that moved data; refused while the instance runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.exceptions import AirflowFailException

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.capture import CdcCaptureOperator
from airflow_cdc.operators.engine import CdcStartEngineOperator
from tests.integration.airflow.conftest import CDC_CONN, PASSWORD, PG_CONN, Instance, Source
from tests.integration.airflow.support import changelog, running, task_context

pytestmark = pytest.mark.integration

ALIAS = AssetAlias("cdc-shop-tables")


def capture(**kwargs: Any) -> CdcCaptureOperator:
    return CdcCaptureOperator(task_id="capture", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, **kwargs)


def events(context: dict[str, Any]) -> dict[str, Any]:
    """The asset events the task recorded: ``{uri: extra}``."""
    accessor = context["outlet_events"]
    out = {event.dest_asset_key.uri: event.extra for event in accessor[ALIAS].asset_alias_events}
    out.update({key.uri: value.extra for key, value in accessor._dict.items() if hasattr(key, "uri")})
    return out


def lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def test_bounded_runs_go_on_from_each_other(connections: Instance, source: Source, caplog: Any) -> None:
    customers = table_asset("shop", "public.customers")
    first_context = task_context()
    first = capture(max_records=25, max_duration=60, outlets=[ALIAS]).execute(first_context)
    assert first["stopped_by"] == "max_records" and first["records"] >= 25
    assert first["rows"] == {"public.orders": 20, "public.customers": 5}
    assert events(first_context) == {
        "cdc://shop/public.customers": {"rows": 5, "offsets": first["offsets"]},
        "cdc://shop/public.orders": {"rows": 20, "offsets": first["offsets"]},
    }
    assert first["offsets"][0]["partition"] == {"server": "shop"} and "/" in first["offsets"][0]["position"]
    assert not running(connections.props)  # nothing left behind

    with source.connect() as conn:
        conn.execute("insert into orders values (101, 'new', date '2026-03-01'), (102, 'new', date '2026-03-02')")
        conn.execute("update orders set status = 'done' where id = 2")
    target = source.lsn()
    second_context = task_context()
    second = capture(target_position=target, max_duration=60, outlets=[ALIAS, customers]).execute(second_context)
    assert second["stopped_by"] == "target_position" and second["rows"] == {"public.orders": 3}
    assert events(second_context) == {
        "cdc://shop/public.orders": {"rows": 3, "offsets": second["offsets"]},
        customers.uri: {"rows": 0, "offsets": second["offsets"]},  # listed, so Airflow emits it: rows say 0
    }
    orders = changelog(connections.state_dir, "shop.public.orders")
    assert [e["op"] for e in orders].count("r") == 20 and [e["after"]["id"] for e in orders[-3:]] == [101, 102, 2]

    third = capture(max_duration=1.5).execute(task_context())
    assert (third["stopped_by"], third["rows"]) == ("max_duration", {})
    assert lsn(third["offsets"][0]["position"]) >= lsn(second["offsets"][0]["position"]) >= lsn(target)
    assert PASSWORD not in json.dumps([first, second, third]) + caplog.text


def test_refused_while_the_instance_runs_detached(connections: Instance) -> None:
    CdcStartEngineOperator(task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN).execute(task_context())
    with pytest.raises(AirflowFailException) as refused:
        capture(max_records=1).execute(task_context())
    assert "is running" in str(refused.value) and "stop the instance first" in str(refused.value)
    assert running(connections.props)


def test_explicit_table_assets_get_their_rows(connections: Instance) -> None:
    orders = Asset(uri="cdc://shop/public.orders")
    context = task_context()
    result = capture(max_records=25, max_duration=60, outlets=[orders]).execute(context)
    assert context["outlet_events"][orders].extra == {"rows": 20, "offsets": result["offsets"]}
