"""A declared pipeline's ``table_pattern`` resolved against a real source's catalog (PostgreSQL
and MariaDB, through their Airflow connections' SQL hooks) when the DAG is parsed, and kept on
disk: while fresh, parsing does not reach the database; stale, it asks again; unreachable, it
falls back to the list kept, and with nothing kept says what to do."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.pipeline import CdcPipeline, parse_pipeline
from airflow_cdc.pipeline.catalog import CatalogUnavailableError, airflow_catalog, resolve_tables

pytestmark = pytest.mark.integration

PIPELINE = """\
dag_id: patterned
source: {conn_id: pg_catalog_test}
backend: {conn_id: cdc_test, topic_prefix: app}
table_pattern:
  pattern: 'public\\.(orders|order_items|customers)'
  exclude: ['public\\.order_items']
  cache_ttl: 600
apply: {target_conn_id: pg_replica}
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_connection(server: PostgresServer, database: str, port: int | None = None) -> str:
    return json.dumps(
        {
            "conn_type": "postgres",
            "host": server.host,
            "port": port or server.port,
            "login": server.user,
            "password": server.password,
            "schema": database,
        }
    )


class Counting:
    """The real lister, counted: how many times parsing reached the database."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, conn_id: str) -> list[str]:
        self.calls += 1
        return airflow_catalog(conn_id)


def test_the_pattern_is_resolved_at_parse_time_and_cached(
    pg_server: PostgresServer, pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        for table in ("orders", "order_items", "customers", "audit"):
            conn.execute(f"create table {table} (id int primary key)")
        conn.execute("create view open_orders as select * from orders")
    monkeypatch.setenv("AIRFLOW_CONN_PG_CATALOG_TEST", postgres_connection(pg_server, pg_database))
    lister = Counting()
    pipeline = CdcPipeline(parse_pipeline(PIPELINE), cache_dir=tmp_path, lister=lister)

    dag = pipeline.dag()
    groups = sorted(k for k in dag.task_group.children if k != "start_engine")
    assert groups == ["public_customers", "public_orders"]  # order_items excluded, audit not matched
    assert dag.get_task("public_orders.apply").tables == ["public.orders"]
    assert lister.calls == 1

    # Parsed again (the DAG processor does, every few minutes): from the cache, even with the
    # database unreachable.
    monkeypatch.setenv("AIRFLOW_CONN_PG_CATALOG_TEST", postgres_connection(pg_server, pg_database, closed_port()))
    again = CdcPipeline(parse_pipeline(PIPELINE), cache_dir=tmp_path, lister=lister).dag()
    assert sorted(again.task_dict) == sorted(dag.task_dict) and lister.calls == 1


def test_a_stale_list_is_read_again_and_kept_when_the_database_is_down(
    pg_server: PostgresServer, pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table orders (id int primary key)")
    monkeypatch.setenv("AIRFLOW_CONN_PG_CATALOG_TEST", postgres_connection(pg_server, pg_database))
    spec = parse_pipeline(PIPELINE).table_pattern
    assert spec is not None
    clock = [1000.0]

    def resolve(**kwargs: Any) -> list[str]:
        return resolve_tables("patterned", "pg_catalog_test", spec, cache_dir=tmp_path, now=lambda: clock[0], **kwargs)

    assert resolve() == ["public.orders"]
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table customers (id int primary key)")
    clock[0] += 599
    assert resolve() == ["public.orders"]  # fresh: the new table waits for the TTL
    clock[0] += 2
    assert resolve() == ["public.customers", "public.orders"]

    monkeypatch.setenv("AIRFLOW_CONN_PG_CATALOG_TEST", postgres_connection(pg_server, pg_database, closed_port()))
    clock[0] += 10_000
    assert resolve() == ["public.customers", "public.orders"]  # stale but kept: the DAG does not vanish
    with pytest.raises(CatalogUnavailableError, match="list the tables under `tables:`"):
        resolve_tables("other", "pg_catalog_test", spec, cache_dir=tmp_path)


def test_a_mysql_sources_tables_are_database_dot_table(
    mariadb_server: MariaDBServer, mariadb_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cursor:
        cursor.execute("create table orders (id int primary key)")
        cursor.execute("create table audit (id int primary key)")
    monkeypatch.setenv(
        "AIRFLOW_CONN_MARIA_CATALOG_TEST",
        json.dumps(
            {
                "conn_type": "mysql",
                "host": mariadb_server.host,
                "port": mariadb_server.port,
                "login": mariadb_server.user,
                "password": mariadb_server.password,
                "schema": mariadb_database,
            }
        ),
    )
    text = PIPELINE.replace("pg_catalog_test", "maria_catalog_test").replace("public\\.", f"{mariadb_database}\\.")
    dag = CdcPipeline(parse_pipeline(text), cache_dir=tmp_path).dag()
    assert dag.get_task(f"{mariadb_database}_orders.apply").tables == [f"{mariadb_database}.orders"]
    assert not any("audit" in task_id for task_id in dag.task_dict)
