"""End to end, schema changes into lake targets that did not exist: PostgreSQL → engine (JSON
schemas in the events) → changelog → the Spark apply job → Delta, Parquet or Iceberg.

The job creates the table from the first batch's schemas; then the source adds a column with a
default and one without, widens ``int → bigint`` and ``numeric(10,2) → numeric(12,2)``, drops a
column, and changes rows; the second run leaves the lake equal to the source row by row (the
dropped column keeping its values: ``lenient``, the default).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import ApplyJob, run
from airflow_cdc.spark.frames import POSITION_COLUMN
from airflow_cdc.spark.reading import SourceOptions
from airflow_cdc.spark.targets.lake import LakeTarget

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHANGES = (
    "alter table items add column note text not null default 'n/a'",
    "alter table items add column extra int",
    "alter table items alter column qty type bigint",
    "alter table items alter column price type numeric(12,2)",
    "alter table items drop column gone",
    "update items set qty = qty * 10000000000, note = 'changed', price = price * 1000 where mod(id, 10) = 0",
    "insert into items select g, 'item ' || g, g * 20000000000, g * 1000.25, 'new', g from generate_series(201, 240) g",
    "delete from items where id between 50 and 54",
)


@pytest.fixture
def capturing(tmp_path: Path, pg_server: Any, pg_database: str) -> Iterator[tuple[EngineInstance, str, SourceOptions]]:
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text, qty int, price numeric(10,2), gone text)")
        conn.execute(
            "insert into items select g, 'item ' || g, g, g * 1.25, 'gone ' || g from generate_series(1, 200) g"
        )
    props = {
        "name": f"lake-{pg_database}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": pg_database,
        "database.hostname": pg_server.host,
        "database.port": pg_server.port,
        "database.user": pg_server.user,
        "database.dbname": pg_database,
        "slot.name": f"slot_{pg_database}",
        "publication.name": f"pub_{pg_database}",
        "table.include.list": "public.items",
        "state.dir": str(tmp_path / "state"),
        "offset.flush.interval.ms": 100,
        "poll.interval.ms": 50,
        "slot.drop.on.stop": True,
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "sink.type": "changelog",
        "sink.changelog.segment.max.ms": 50,
    }
    instance = EngineInstance(props)
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    options = SourceOptions(
        kind="changelog", changelog_dir=str(tmp_path / "state" / "changelog"), topics=(f"{pg_database}.public.items",)
    )
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", 60, "polling")
        yield instance, dsn, options
    finally:
        instance.request_stop()
        thread.join(60)


def delivered(instance: EngineInstance, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        lsn = conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
    wait_until(lambda: bool(instance.position(target=lsn).reached), 60, "everything committed")


def source_rows(dsn: str) -> dict[int, dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        cursor = conn.execute("select * from items")
        names = [d.name for d in cursor.description or ()]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor}


def lake_rows(spark: Any, target: LakeTarget) -> dict[int, dict[str, Any]]:
    table = "public.items"
    frame = target.read(spark, table)
    return {r["id"]: {k: v for k, v in r.asDict().items() if k != POSITION_COLUMN} for r in frame.collect()}


def assert_evolved_types(spark: Any, target: LakeTarget) -> None:
    """The lake table's columns after ``CHANGES``: widened, and the two added."""
    columns = target.format.columns(spark, "public.items")
    assert columns is not None
    assert (columns["qty"], columns["price"], columns["note"], columns["extra"]) == (
        "bigint",
        "decimal(12,2)",
        "string",
        "int",
    )


def same(want: dict[int, dict[str, Any]], got: dict[int, dict[str, Any]], columns: list[str]) -> list[Any]:
    """The first rows that differ in ``columns`` (decimals by value)."""

    def plain(v: Any) -> Any:
        return v.normalize() if isinstance(v, Decimal) else v

    out = [k for k in sorted(set(want) | set(got)) if k not in want or k not in got]
    out += [k for k in want if k in got and any(plain(want[k][c]) != plain(got[k][c]) for c in columns)]
    return [(want.get(k), got.get(k)) for k in out[:3]]


@pytest.mark.parametrize("kind", ["delta", "parquet", "iceberg"])
def test_a_lake_table_is_created_and_follows_the_sources_schema_changes(
    capturing: tuple[EngineInstance, str, SourceOptions], tmp_path: Path, spark: Any, kind: str
) -> None:
    instance, dsn, options = capturing
    url = f"{kind}:{tmp_path / 'lake'}"
    target = LakeTarget(url, {}, {})
    job = ApplyJob(source=options, target_url=url, checkpoint=str(tmp_path / "checkpoint"))
    delivered(instance, dsn)
    first = run(spark, job)
    assert first["records"] == 200
    original = source_rows(dsn)
    assert same(original, lake_rows(spark, target), ["id", "name", "qty", "price", "gone"]) == []

    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in CHANGES:
            conn.execute(statement)
    delivered(instance, dsn)
    second = run(spark, job)
    assert second["records"] > 40
    assert_evolved_types(spark, target)
    got = lake_rows(spark, target)
    assert same(source_rows(dsn), got, ["id", "name", "qty", "price", "note", "extra"]) == []
    # The dropped column keeps its values (lenient); rows inserted after the drop have none.
    assert all(got[k]["gone"] == original[k]["gone"] for k in original if k in got)
    assert all(got[k]["gone"] is None for k in range(201, 241))
