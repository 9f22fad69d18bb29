"""``dags/example_cdc_declared.py`` under Airflow's real processes (scheduler, DAG processor,
triggerer, API server; LocalExecutor), not ``dag.test()``: one table's group fails while the
other's succeeds - the grid tells which - and, the cause mended, clearing that group alone reruns
that table alone: the other group's tasks keep their first try, and the replica ends equal to
the source row by row.

The failure is a real one: the replica's ``customers`` exists with a ``name`` column of type
integer, which the apply job refuses to fill with the source's text.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_cdc.engine.server import control
from airflow_cdc.local.ports import free_port
from tests.system.conftest import TOKEN, WITH_SCHEMAS
from tests.system.debezium_on_connect import debezium_shop
from tests.system.first_run_stack import (
    BIN,
    Metadata,
    airflow_processes,
    run_bash,
    tail,
    task_log,
    wait_for_run,
    wait_for_task_log,
)
from tests.system.support import DAGS, Source
from tests.system.test_example_dags import without_position

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAG_ID = "example_cdc_declared"
ORDERS_GROUP, CUSTOMERS_GROUP = "public_orders", "public_customers"
STEPS = ("snapshot", "snapshot_done", "caught_up", "apply")


@dataclass
class Scheduler:
    home: Path
    env: dict[str, str]
    meta: Metadata
    logs: dict[str, Path]

    def airflow(self, *args: str, timeout: float = 300) -> str:
        return run_bash(
            shlex.join([str(BIN / "airflow"), *args]), self.env, f"airflow {' '.join(args)}", timeout=timeout
        )

    def trigger(self) -> str:
        before = set(self.run_ids())
        self.airflow("dags", "trigger", DAG_ID)
        (run_id,) = set(self.run_ids()) - before
        return run_id

    def run_ids(self) -> list[str]:
        return [r[0] for r in self.meta._rows("select run_id from dag_run where dag_id = ?", DAG_ID)]

    def diagnosis(self, run_id: str) -> str:
        tasks = self.meta.tasks(DAG_ID, run_id)
        logs = "\n".join(
            f"--- {task} ({info['state']})\n{task_log(self.home, DAG_ID, run_id, task)[-2500:]}"
            for task, info in tasks.items()
            if info["state"] != "success"
        )
        processes = "\n".join(f"--- {name}.log\n{tail(path, 1500)}" for name, path in self.logs.items())
        return f"{json.dumps(tasks, indent=1, default=str)}\n{logs}\n{processes}"


def connection(conn_type: str, **fields: Any) -> str:
    return json.dumps({"conn_type": conn_type, **fields})


@contextlib.contextmanager
def declared_stack(source: Source, tmp_path: Path, cdc_shop: str | None = None) -> Iterator[tuple[Scheduler, Source]]:
    """Airflow's four processes in a fresh home, the example DAG and its pipeline file in their
    DAG folder, the connections in their environment, an empty replica; ``cdc_shop`` the
    connection of the backend (default: an engine instance of this home's own)."""
    replica = Source(source.server, f"{source.database}_replica", source.user, source.password)
    with source.connect() as conn:
        conn.execute(f"create database {replica.database}")

    home = tmp_path / "home"
    dags = home / "dags"
    (dags / "pipelines").mkdir(parents=True)
    shutil.copy(DAGS / "example_cdc_declared.py", dags)
    shutil.copy(DAGS / "pipelines" / "shop.yaml", dags / "pipelines")
    name = f"declared-{uuid.uuid4().hex[:6]}"
    state = home / "engine"
    config = home / "shop.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "topic.prefix": "shop",
                "slot.name": f"slot_declared_{source.database}",
                "publication.name": f"pub_declared_{source.database}",
                "table.include.list": "public.orders,public.customers",
                "signal.data.collection": "public.debezium_signal",
                "snapshot.mode": "no_data",
                "slot.drop.on.stop": True,
                "state.dir": str(state),
                "api.token": TOKEN,
                "incremental.snapshot.chunk.size": 500,
                "sink.type": "changelog",
                **WITH_SCHEMAS,
            }
        )
    )
    engine = connection("cdc_engine", login=name, password=TOKEN, extra={"config_path": str(config)})
    database = {"host": source.server.host, "port": source.server.port, "login": source.user}
    api_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}:{env.get('PATH', '')}",
        AIRFLOW_HOME=str(home / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://localhost:{api_port}/execution/",
        AIRFLOW_CONN_CDC_SHOP=cdc_shop or engine,
        AIRFLOW_CONN_PG_SHOP=connection("postgres", **database, password=source.password, schema=source.database),
        AIRFLOW_CONN_PG_SHOP_REPLICA=connection(
            "postgres", **database, password=source.password, schema=replica.database
        ),
        AIRFLOW_CONN_SPARK_CDC=connection("spark", host="local[2]"),
    )
    run_bash("airflow db migrate && airflow dags reserialize", env, "migrating and parsing", timeout=600)
    components = [
        "airflow scheduler",
        "airflow dag-processor",
        "airflow triggerer",
        f"airflow api-server --port {api_port}",
    ]
    try:
        with airflow_processes(components, env, home) as logs:
            stack = Scheduler(home, env, Metadata(home / "airflow" / "airflow.db"), logs)
            stack.airflow("dags", "unpause", DAG_ID)
            yield stack, replica
    finally:
        control.stop({"name": name, "state.dir": str(state)}, timeout=30)
        with source.connect() as conn:
            conn.execute(f"drop database if exists {replica.database} with (force)")


@pytest.fixture
def scheduler(source: Source, tmp_path: Path) -> Iterator[tuple[Scheduler, Source, Source]]:
    """The stack on the embedded engine, with a replica ``customers`` the apply job cannot fill."""
    with declared_stack(source, tmp_path) as (stack, replica):
        replica.execute("create table customers (id int primary key, name int)")
        yield stack, source, replica


@pytest.mark.timeout(1500)
def test_a_failed_tables_group_is_cleared_and_rerun_alone(scheduler: tuple[Scheduler, Source, Source]) -> None:
    stack, source, replica = scheduler
    run_id = stack.trigger()
    assert wait_for_run(stack.meta, DAG_ID, run_id, timeout=900) == "failed", stack.diagnosis(run_id)
    tasks = stack.meta.tasks(DAG_ID, run_id)
    states = {task: info["state"] for task, info in tasks.items()}
    # The grid tells which table failed: orders went through, customers' apply did not.
    assert {states[f"{ORDERS_GROUP}.{step}"] for step in STEPS} == {"success"}, states
    assert states[f"{CUSTOMERS_GROUP}.apply"] == "failed", states
    assert without_position(replica.rows("orders")) == source.rows("orders")
    wait_for_task_log(stack.home, DAG_ID, run_id, f"{CUSTOMERS_GROUP}.apply", "name")

    # Mended (the wrong table dropped: the job creates it from the events' schemas), a change to
    # the table meanwhile, and only that table's group cleared.
    replica.execute("drop table customers")
    source.execute("update customers set name = 'renamed' where id = 7", "insert into customers values (51, 'late')")
    # Airflow 3.3's --task-regex matches a substring of the task id (SerializedDAG.partial_subset),
    # not a regular expression: the group's prefix with its dot names its tasks only.
    stack.airflow("tasks", "clear", DAG_ID, "--task-regex", f"{CUSTOMERS_GROUP}.", "--yes")
    assert stack.meta.run_state(DAG_ID, run_id) != "failed", "the clear did not reach the run"
    assert wait_for_run(stack.meta, DAG_ID, run_id, timeout=600) == "success", stack.diagnosis(run_id)

    after = stack.meta.tasks(DAG_ID, run_id)
    assert {task: info["state"] for task, info in after.items()} == dict.fromkeys(after, "success") | {
        f"{CUSTOMERS_GROUP}.snapshot": "skipped",  # its snapshot completed in the first try (policy initial)
        f"{CUSTOMERS_GROUP}.snapshot_done": "skipped",
    }
    for task, info in after.items():
        if not task.startswith(f"{CUSTOMERS_GROUP}."):  # the other table and the engine's start: untouched
            assert info == tasks[task], (task, info, tasks[task])
    for step in ("snapshot", "caught_up", "apply"):  # ran again (snapshot_done, skipped by its rule, did not run)
        assert after[f"{CUSTOMERS_GROUP}.{step}"]["tries"] == 2, after
    assert without_position(replica.rows("customers")) == source.rows("customers")
    assert without_position(replica.rows("orders")) == source.rows("orders")


@pytest.mark.connect_stack
@pytest.mark.timeout(1500)
def test_the_same_pipeline_file_runs_on_kafka_connect(
    source: Source, tmp_path: Path, connect_worker: Any, kafka_broker: Any
) -> None:
    """``cdc_shop`` a ``kafka_connect`` connection, the DAG and YAML files unchanged: the start
    task creates Debezium's connector, each table's snapshot signal goes through the signal table
    and is followed on the notification topic, the apply jobs read the Kafka topics, and the
    replica equals the source."""
    source.execute("create table cdc_heartbeat (id int primary key, at timestamptz)")
    source.execute("insert into cdc_heartbeat values (1, now())")
    settings = {
        "snapshot.mode": "no_data",
        "incremental.snapshot.chunk.size": 500,
        # Debezium's offsets pass the server's position only with a later change: the
        # heartbeat's statement makes one on a quiet database (the caught_up sensor's "current").
        "heartbeat.interval.ms": 1000,
        "heartbeat.action.query": "update cdc_heartbeat set at = now() where id = 1",
    }
    with (
        debezium_shop(tmp_path, source, connect_worker, kafka_broker, "declared", **settings) as cdc_shop,
        declared_stack(source, tmp_path, cdc_shop) as (stack, replica),
    ):
        run_id = stack.trigger()
        assert wait_for_run(stack.meta, DAG_ID, run_id, timeout=1200) == "success", stack.diagnosis(run_id)
        assert without_position(replica.rows("orders")) == source.rows("orders")
        assert without_position(replica.rows("customers")) == source.rows("customers")
