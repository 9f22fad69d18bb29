"""Helpers of the CdcSparkApplyOperator tests: a changelog holding one change, Airflow
connections as ``AIRFLOW_CONN_*`` JSON, an operator on the changelog source, a task context."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.operators.spark import ApplyConfig, CdcSparkApplyOperator, SubmitConfig

TOPIC = "shop.public.orders"
TABLE = "public.orders"
#: Spark on loopback, without its UI: a test machine's hostname may resolve nowhere useful.
DRIVER_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false"}


def one_change(directory: Path) -> Path:
    """A changelog directory (as the engine's changelog sink writes it) with one insert into
    ``public.orders``, so the job has something to apply to its target."""
    value = {
        "before": None,
        "after": {"id": "1", "status": "open"},
        "op": "c",
        "source": {"schema": "public", "table": "orders", "lsn": 100, "snapshot": "false"},
    }
    line = {"topic": TOPIC, "key": json.dumps({"id": 1}), "value": value, "seq": 1, "ts_ms": 0}
    (directory / TOPIC).mkdir(parents=True)
    (directory / TOPIC / "00000001.jsonl").write_text(json.dumps(line) + "\n")
    return directory


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def apply_operator(
    changelog: Path,
    checkpoint: Path,
    *,
    target_url: str | None = None,
    table_map: dict[str, str] | None = None,
    master: str = "local[1]",
    schema_change_policy: str = "lenient",
    **kwargs: Any,
) -> CdcSparkApplyOperator:
    job = ApplyConfig(
        source="changelog",
        changelog_dir=str(changelog),
        topics=[TOPIC],
        checkpoint=str(checkpoint),
        target_url=target_url,
        table_map=table_map or {},
        schema_change_policy=schema_change_policy,
    )
    return CdcSparkApplyOperator(
        task_id="apply", job=job, submit=SubmitConfig(master=master, conf=DRIVER_CONF), **kwargs
    )


@dataclass
class TaskInstanceFields:
    """What the operator reads of ``context["ti"]`` (Airflow's RuntimeTaskInstance has these)."""

    run_id: str
    try_number: int


def task_context(run_id: str, try_number: int = 1) -> dict[str, Any]:
    return {"run_id": run_id, "ti": TaskInstanceFields(run_id, try_number)}


@pytest.fixture
def pg_target(
    pg_server: PostgresServer, pg_database: str, password_role: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> str:
    """``replica``: the target database with ``public.orders``, reached as the password role."""
    with psycopg.connect(pg_server.dsn(pg_database), autocommit=True) as conn:
        conn.execute("create table orders (id int primary key, status text)")
    user, password = password_role
    fields = {"conn_type": "postgres", "host": pg_server.host, "port": pg_server.port, "login": user}
    set_connection(monkeypatch, "replica", **fields, password=password, schema=pg_database)
    set_connection(monkeypatch, "replica_wrong_pw", **fields, password=f"not-{password}", schema=pg_database)
    set_connection(monkeypatch, "replica_no_db", **fields, password=password, schema=f"{pg_database}_absent")
    return user
