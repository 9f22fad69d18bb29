"""Schema changes into lake tables from Debezium on Kafka Connect: Debezium's PostgreSQL connector
(JSON converter with schemas) → Kafka → the Spark apply job → a Delta table (``consistency=key``)
or an Iceberg table (``consistency=transaction``, Debezium's transaction topic), neither existing
before the run.

The same steps as ``test_lake_schema_changes_end_to_end.py`` (which captures with our engine): a
column added with a default and one without, ``int → bigint``, ``numeric(10,2) → numeric(12,2)``,
a dropped column, then rows changed; applied until the lake equals the source row by row
(Connect gives no position to wait for).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import ApplyJob, run
from airflow_cdc.spark.reading import SourceOptions
from airflow_cdc.spark.targets.lake import LakeTarget
from tests.integration.spark.evolution_support import SIGNAL_DDL, ConnectCapture, Source
from tests.integration.spark.test_lake_schema_changes_end_to_end import (
    CHANGES,
    assert_evolved_types,
    lake_rows,
    same,
    source_rows,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

COLUMNS = ["id", "name", "qty", "price", "gone"]
EVOLVED = ["id", "name", "qty", "price", "note", "extra"]


@pytest.mark.parametrize(
    ("evolving_source", "kind", "consistency"),
    [("postgresql", "delta", "key"), ("postgresql", "iceberg", "transaction")],
    indirect=["evolving_source"],
)
def test_a_lake_table_follows_debeziums_schema_changes(
    evolving_source: Source,
    pg_server: Any,
    pg_database: str,
    kafka_broker: Any,
    connect_worker: Any,
    spark: Any,
    tmp_path: Path,
    kind: str,
    consistency: str,
) -> None:
    source = evolving_source
    source.execute(
        SIGNAL_DDL,
        "create table items (id int primary key, name text, qty int, price numeric(10,2), gone text)",
        "insert into items select g, 'item ' || g, g, g * 1.25, 'gone ' || g from generate_series(1, 200) g",
    )
    dsn = pg_server.dsn(pg_database)  # the source's database
    prefix = f"lk{uuid.uuid4().hex[:8]}"
    url = f"{kind}:{tmp_path / 'lake'}"
    target = LakeTarget(url, {}, {})
    job = ApplyJob(
        source=SourceOptions(
            kind="kafka", bootstrap_servers=kafka_broker.bootstrap_servers, topics=(f"{prefix}.public.items",)
        ),
        target_url=url,
        checkpoint=str(tmp_path / "checkpoint"),
        consistency=consistency,
        **({"transaction_topic": f"{prefix}.transaction"} if consistency == "transaction" else {}),
    )
    problems: list[Any] = []

    def equal(columns: list[str]) -> bool:
        run(spark, job)
        if target.format.columns(spark, "public.items") is None:
            return False
        try:
            problems[:] = same(source_rows(dsn), lake_rows(spark, target), columns)
        except KeyError as missing:  # a column the lake has not got yet
            problems[:] = [f"no column {missing} yet"]
        return not problems

    with ConnectCapture(source, prefix, connect_worker, kafka_broker, transactions=consistency == "transaction"):
        wait_until(lambda: equal(COLUMNS), 240, f"the snapshot in the lake ({problems})")
        original = source_rows(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in CHANGES:
                conn.execute(statement)
        try:
            wait_until(lambda: equal(EVOLVED), 240, "the changes in the lake")
        except TimeoutError:
            raise AssertionError(f"the lake differs from the source: {problems}") from None
    assert_evolved_types(spark, target)
    got = lake_rows(spark, target)
    assert all(got[k]["gone"] == original[k]["gone"] for k in original if k in got)  # lenient keeps them
