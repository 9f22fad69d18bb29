"""An incremental snapshot running while its server crashes and restarts
(``pg_ctl stop -m immediate``): every connection the snapshot reads on - the stream, the
catalog connection its max keys, estimates and horizons come from, the window and reader
connections - is opened again, the snapshot completes and the target equals the source."""

from __future__ import annotations

import pytest

from airflow_cdc.engine import Engine
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.local.postgres import PostgresServer

from .test_incremental_snapshot import Collector, assert_target_equals_source, completed, config, notifications, send
from .test_incremental_snapshot import setup as create_tables
from .test_postgres_connection_loss import RestartProofLoad, crash_and_restart

pytestmark = pytest.mark.integration

ROWS = 3000


def test_an_incremental_snapshot_completes_through_a_server_restart(own_pg: PostgresServer) -> None:
    database = own_pg.create_database()
    dsn = own_pg.dsn(database)
    create_tables(dsn, ROWS)
    with own_pg.connect(database) as conn:  # a second table: its end point is read after the restart
        conn.execute("create table u (id int primary key, v text)")
        conn.execute("insert into u select g, 'u' || g from generate_series(1, 500) g")
        conn.commit()
    settings = {
        "incremental.snapshot.chunk.size": 50,
        "errors.retry.delay.initial.ms": 100,
        "errors.retry.delay.max.ms": 1000,
    }
    collector = Collector()
    engine = Engine(config(own_pg, database, **settings), consumer=collector)
    with EngineRunner(engine):
        with RestartProofLoad(dsn, first_new_id=ROWS + 1) as load:
            signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public.t", "public.u"]})
            reads = lambda: sum(1 for e in collector.snapshot() if (e["value"] or {}).get("op") == "r")  # noqa: E731
            wait_until(lambda: reads() >= 300, 60, "the snapshot under way")
            crash_and_restart(own_pg)
            wait_until(lambda: reads() >= 600, 60, "the snapshot reading again after the restart")
            load.stop()
        wait_until(lambda: completed(engine, signal_id), 120, "the snapshot completed")
        assert_target_equals_source(collector, dsn)
    scans = [n for n in notifications(engine, "TABLE_SCAN_COMPLETED") if n["id"] == signal_id]
    assert [n["additional_data"]["status"] for n in scans] == ["SUCCEEDED", "SUCCEEDED"]
    read_u = {e["key"]["id"] for e in collector.snapshot("shop.public.u") if e["value"]["op"] == "r"}
    assert read_u == set(range(1, 501))
