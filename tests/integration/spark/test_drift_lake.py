"""The drift check against a Delta target: a PostgreSQL source summarised by its server, the Delta
table (with the lake types the apply job creates: decimal, timestamp, date, boolean, binary) by
Spark; the same canonical row text on both sides, so equal tables compare equal and the keys
corrupted in the Delta table behind the pipeline's back are named exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.drift import TableSide, compare, settle, snapshot_filter
from airflow_cdc.drift.dialects import PostgresDialect
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.operators.validate import CdcValidateOperator
from airflow_cdc.spark.drift_lake import LakeSide
from tests.integration.airflow.apply_support import set_connection

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROWS = 3000
SCHEMA = (
    "id int, status string, amount decimal(10,2), at timestamp, day date, paid boolean, blob binary, note string, "
    "_cdc_position string"
)


def test_a_delta_target_compares_equal_then_names_the_corrupted_keys(
    spark: Any, pg_server: PostgresServer, pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pg_server.connect(pg_database) as conn:
        conn.execute(
            "create table orders (id int primary key, status text, amount numeric(10,2), at timestamptz, day date, "
            "paid boolean, blob bytea, note text)"
        )
        conn.execute(
            "insert into orders select g, case when g %% 3 = 0 then 'open' else 'done' end, g * 1.25, "
            "timestamptz '2026-01-01 00:00:00+00' + g * interval '1.5 second', date '2026-01-01' + g %% 30, "
            "g %% 2 = 0, decode(md5(g::text), 'hex'), case when g %% 7 = 0 then null else 'n' || g end "
            "from generate_series(1, %s) g",
            (ROWS,),
        )
        rows = conn.execute("select *, repeat('0', 32) from orders order by id").fetchall()
        path = str(tmp_path / "public.orders")  # where the apply job's delta:ROOT keeps public.orders
        # A session in another time zone wrote it: timestamps are instants, rendered in UTC.
        spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
        try:
            spark.createDataFrame([(*r[:6], bytes(r[6]), *r[7:]) for r in rows], SCHEMA).write.format("delta").save(
                path
            )
            source = TableSide(PostgresDialect(), conn, "public.orders")
            target = LakeSide(lambda: spark.read.format("delta").load(path), "orders")
            same = compare(source, target)
            assert not same.found, same.to_json()
            assert (same.source_rows, same.target_rows) == (ROWS, ROWS)

            spark.sql(f"update delta.`{path}` set status = 'tampered' where id in (17, 2001)")
            spark.sql(f"update delta.`{path}` set note = 'was null' where id = 700")
            spark.sql(f"delete from delta.`{path}` where id in (2, 1500)")
            spark.sql(f"insert into delta.`{path}` values (5000, 'ghost', null, null, null, null, null, null, null)")
            drift = settle(source, target, compare(source, target, ranges=64), timeout=0.5, interval=0.1)
            # The operator, on the apply job's target URL (the task's Spark session: the active one).
            set_connection(
                monkeypatch, "pg_src", conn_type="postgres", host=pg_server.host, port=pg_server.port,
                login=pg_server.user, schema=pg_database,
            )  # fmt: skip
            found = CdcValidateOperator(
                task_id="validate",
                table="public.orders",
                source_conn_id="pg_src",
                target_url=f"delta:{tmp_path}",
                settle_timeout=0.5,
            ).execute({})
        finally:
            spark.conf.unset("spark.sql.session.timeZone")
    assert (drift.missing, drift.extra, drift.different) == ([2, 1500], [5000], [17, 700, 2001])
    assert snapshot_filter(drift, '"id"') == '"id" in (2, 17, 700, 1500, 2001)'
    assert (found["missing"], found["extra"], found["different"]) == ([2, 1500], [5000], [17, 700, 2001])
    assert found["target"] == "public.orders"
