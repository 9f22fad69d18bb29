"""CdcHealthCheckOperator against a real engine instance on a real PostgreSQL: a healthy instance
passes and returns its figures; a slot that retains the WAL other databases write while its
instance is paused fails the check with the reason and the fix; an old last event fails it too."""

from __future__ import annotations

import psycopg
import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.operators.base import CdcOperatorError
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.health import CdcHealthCheckOperator
from tests.integration.airflow.conftest import CDC_CONN, PG_CONN, Instance, Source
from tests.integration.airflow.support import task_context

pytestmark = pytest.mark.integration


def check(**thresholds: float) -> CdcHealthCheckOperator:
    return CdcHealthCheckOperator(task_id="health", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, **thresholds)


def retained(source: Source, slot: str) -> int:
    with source.connect() as conn:
        row = conn.execute(
            "select pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint from pg_replication_slots "
            "where slot_name = %s",
            (slot,),
        ).fetchone()
    assert row is not None, f"no slot {slot}"
    return int(row[0])


def test_an_idle_slot_retaining_other_databases_wal_fails_the_check_with_the_fix(
    connections: Instance, source: Source
) -> None:
    # No heartbeat: the slot stays where the last captured change left it (Debezium's default).
    config = {"table.include.list": "public.orders", "heartbeat.interval.ms": 0}
    CdcStartEngineOperator(
        task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, timeout=60, config=config
    ).execute(task_context())
    with source.connect() as conn:
        conn.execute("update orders set status = 'checked' where id = 1")
    healthy = check(max_retained_wal_bytes=1 << 30, max_seconds_since_last_event=3600)
    figures = wait_until(
        lambda: (f := healthy.execute(task_context()))["idle_s"] is not None and f,
        30,
        "the change committed (its offset's commit time)",
    )
    assert figures["retained_bytes"] is not None and figures["retained_bytes"] < 1 << 30
    assert figures["idle_s"] < 3600 and figures["health"] == "RUNNING", figures

    # Paused (a running engine lets an idle slot advance on the server's keepalives; a paused one
    # reads nothing), while another database of the same server writes: its WAL is kept.
    backend = CdcEngineHook(CDC_CONN).get_backend()
    assert backend.pause().state == "PAUSED"
    slot = f"slot_{source.database}"
    other = f"{source.database}_noise"
    with source.connect() as conn:
        conn.execute(f'create database "{other}"')
    try:
        with psycopg.connect(source.server.dsn(other), autocommit=True) as conn:
            conn.execute("create table noise (id serial primary key, payload text)")
            for _ in range(20):
                conn.execute("insert into noise (payload) select repeat('x', 500) from generate_series(1, 1000)")
        wait_until(lambda: retained(source, slot) > 4_000_000, 30, "WAL retained by the idle slot")
        with pytest.raises(CdcOperatorError) as failed:
            check(max_retained_wal_bytes=2_000_000).execute(task_context())
        message = str(failed.value)
        assert "replication slot retains" in message and "past the threshold of 2,000,000" in message, message
        assert "heartbeat.interval.ms" in message and "heartbeat.action.query" in message, message
        assert retained(source, slot) > 4_000_000  # the check itself moved nothing

        with pytest.raises(CdcOperatorError, match=r"the last committed event is .* s old"):
            check(max_seconds_since_last_event=0).execute(task_context())
    finally:
        backend.resume()
        with source.connect() as conn:
            conn.execute(f'drop database if exists "{other}" with (force)')


def test_a_check_needs_a_threshold() -> None:
    with pytest.raises(ValueError, match="at least one of"):
        CdcHealthCheckOperator(task_id="health", cdc_conn_id=CDC_CONN)
