"""A new DAG author's first run, as the README tells it: a fresh home and AIRFLOW_HOME, the
README's SQL for a source role that is not a superuser, its shell commands (the connections with
``airflow connections add``, the engine's config file, Airflow's scheduler, DAG processor,
triggerer and API server), its DAG file verbatim, ``airflow dags trigger`` - not ``dag.test()``.

The first run must succeed, the replica equal the source row by row, no row be read twice, the
sensors wait in the triggerer, and the offset sensor end within seconds of the source going
quiet. The same DAG then runs against an engine service started on its own (its process, state
directory and token), reached only through its API URL. Task times go to
``$CDC_TEST_ARTIFACTS/first_run.json``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.ports import free_port
from airflow_cdc.local.postgres import PostgresServer
from tests.readme_blocks import readme_block
from tests.system.first_run_stack import (
    BIN,
    Metadata,
    Names,
    airflow_processes,
    run_bash,
    shell_steps,
    tail,
    task_log,
    user_env,
    wait_for_run,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAG_ID = "cdc_quickstart"
ROWS = 2000
#: The engine service's table, snapshotted a row a chunk: long enough (about 60 s) for its sensor to defer.
SERVICE_ROWS = 30_000
ARTIFACTS = Path(os.environ.get("CDC_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "test-artifacts"))
ORDERS = "create table orders (id int primary key, customer text not null, amount numeric(10,2), placed date)"


@dataclass
class Stack:
    home: Path
    env: dict[str, str]
    names: Names
    server: PostgresServer
    meta: Metadata
    logs: dict[str, Path]

    def rows(self, database: str) -> list[tuple[Any, ...]]:
        with self.server.connect(database) as conn:
            return conn.execute("select id, customer, amount, placed from orders order by id").fetchall()

    def airflow(self, *args: str) -> str:
        return run_bash(shlex.join([str(BIN / "airflow"), *args]), self.env, f"airflow {' '.join(args)}")

    def trigger(self) -> str:
        """``airflow dags trigger`` as the README has it; the new run's id."""
        before = set(self.run_ids())
        run_bash(self.names.apply(f"airflow dags trigger {DAG_ID}"), self.env, "the trigger")
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


def create_databases(server: PostgresServer, names: Names, rows: int = ROWS) -> None:
    """The user's own source table (with rows) and its replica table, before the recipe."""
    with server.connect(autocommit=True) as conn:
        conn.execute(f"create database {names.source_db}")
        conn.execute(f"create database {names.replica_db}")
    with server.connect(names.source_db, autocommit=True) as conn:
        conn.execute(ORDERS)
        conn.execute(
            "insert into orders select g, 'customer ' || (g %% 97), (g * 7 %% 10000) / 100.0, "
            "date '2026-01-01' + g %% 300 from generate_series(1, %s) g",
            (rows,),
        )
    with server.connect(names.replica_db, autocommit=True) as conn:
        conn.execute(ORDERS)


def drop_all(server: PostgresServer, names: Names) -> None:
    """The databases of both tests, with their replication slots, and the roles."""
    for database in (names.source_db, names.replica_db, f"{names.source_db}_svc", f"{names.replica_db}_svc"):
        server.drop_database(database)
    with server.connect(autocommit=True) as conn:
        conn.execute("drop role if exists cdc")
        conn.execute("drop role if exists replica")


def make_replica_owner(server: PostgresServer, names: Names) -> None:
    """The replica's role: it owns the replica table (the job adds its position column)."""
    with server.connect(autocommit=True) as conn:
        conn.execute(f"create role replica login password '{names.password}'")
    with server.connect(names.replica_db, autocommit=True) as conn:
        conn.execute("alter table orders owner to replica")


@pytest.fixture(scope="module")
def stack(pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    assert not pg_server.external, "the first run makes roles cdc and replica: only on a server started here"
    home = tmp_path_factory.mktemp("new-user")
    suffix = uuid.uuid4().hex[:6]
    names = Names(pg_server.port, f"shop_{suffix}", f"shop_replica_{suffix}", f"pw-{uuid.uuid4().hex}")
    drop_all(pg_server, names)
    create_databases(pg_server, names)
    hba = pg_server.data_dir / "pg_hba.conf"  # type: ignore[operator]
    original = hba.read_text()
    env = user_env(home, names)
    try:
        hba.write_text(
            "host all cdc,replica 127.0.0.1/32 scram-sha-256\nhost replication cdc 127.0.0.1/32 scram-sha-256\n"
            + original
        )
        with pg_server.connect(names.source_db, autocommit=True) as conn:
            conn.execute("select pg_reload_conf()")
            conn.execute(names.apply(readme_block("first-run:sql")))  # as the tables' owner
        make_replica_owner(pg_server, names)
        with pytest.raises(psycopg.OperationalError):  # the password is really asked for
            psycopg.connect(pg_server.dsn(names.source_db, user="cdc"), connect_timeout=5).close()
        before, components, after = shell_steps(names)
        run_bash(before, env, "the README's set-up commands", timeout=600)
        meta = Metadata(home / "airflow" / "airflow.db")
        with airflow_processes(components, env, home) as logs:
            stack = Stack(home, env, names, pg_server, meta, logs)
            run_bash(after.replace(f"airflow dags trigger {DAG_ID}\n", ""), env, "unpausing the DAG")
            yield stack
    finally:
        hba.write_text(original)
        with pg_server.connect(autocommit=True) as conn:
            conn.execute("select pg_reload_conf()")
        subprocess.run(
            [str(BIN / "airflow-cdc"), "engine", "stop", "--config", str(home / "airflow-cdc" / "shop.yaml")],
            env=env,
            capture_output=True,
            timeout=120,
        )
        drop_all(pg_server, names)


def connection_types(stack: Stack) -> dict[str, str]:
    listed = json.loads(stack.airflow("connections", "list", "--output", "json"))
    return {c["conn_id"]: c["conn_type"] for c in listed}


def changes(stack: Stack, database: str, ids: range) -> None:
    """A user's writes while the pipeline runs: inserts, updates, a delete."""
    with stack.server.connect(database, autocommit=True) as conn:
        conn.execute(
            "insert into orders select g, 'late ' || g, 1.5, date '2026-11-01' "
            "from generate_series(%s::int, %s::int) g",
            (ids.start, ids.stop - 1),
        )
        conn.execute("update orders set amount = amount + 1 where id % 100 = 0")
        conn.execute("delete from orders where id = 7")


def reads_per_key(changelog: Path) -> dict[int, int]:
    counts: dict[int, int] = {}
    for segment in sorted(changelog.glob("*.jsonl")):
        for line in segment.read_text().splitlines():
            record = json.loads(line)
            if record["value"] and record["value"]["op"] == "r":
                key = record["key"]["id"]
                counts[key] = counts.get(key, 0) + 1
    return counts


def run_and_check(
    stack: Stack,
    source_db: str,
    replica_db: str,
    changelog: Path,
    label: str,
    rows: int = ROWS,
    must_defer: tuple[str, ...] = (),
) -> dict[str, Any]:
    run_id = stack.trigger()
    changes(stack, source_db, range(rows + 1, rows + 51))
    state = wait_for_run(stack.meta, DAG_ID, run_id, timeout=900)
    assert state == "success", f"{label}: the first run ended {state}\n{stack.diagnosis(run_id)}"
    tasks = stack.meta.tasks(DAG_ID, run_id)
    assert all(t["tries"] == 1 for t in tasks.values()), f"{label}: a task needed a retry: {tasks}"
    assert stack.rows(replica_db) == stack.rows(source_db), f"{label}: the replica differs from the source"
    reads = reads_per_key(changelog)
    twice = sorted(k for k, n in reads.items() if n > 1)
    assert len(reads) >= rows - 1 and not twice, f"{label}: {len(reads)} rows read, these twice: {twice[:10]}"
    for sensor in ("snapshot_done", "caught_up"):
        # A sensor looks in its task for defer_after (15 s), then waits in the triggerer.
        deferred = "Pausing task as DEFERRED" in task_log(stack.home, DAG_ID, run_id, sensor)
        assert deferred or tasks[sensor]["duration"] < 20, f"{label}: {sensor} held its worker slot: {tasks[sensor]}"
        assert deferred or sensor not in must_defer, f"{label}: {sensor} never waited in the triggerer"
    assert tasks["caught_up"]["duration"] < 15, f"{label}: the offset sensor took {tasks['caught_up']['duration']} s"
    return {
        "run_id": run_id,
        "run_seconds": stack.meta.run_seconds(DAG_ID, run_id),
        "task_seconds": {k: v["duration"] for k, v in tasks.items()},
    }


def record(label: str, result: dict[str, Any]) -> None:
    """The run's times, for the closing note and the README's figure."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / "first_run.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**known, label: result}, indent=2))


def test_the_readme_recipe_succeeds_on_the_first_run(stack: Stack) -> None:
    assert connection_types(stack) == {
        "cdc_shop": "cdc_engine",
        "pg_shop": "postgres",
        "pg_shop_replica": "postgres",
        "spark_cdc": "spark",
    }
    changelog = stack.home / "airflow-cdc" / "shop" / "changelog" / "shop.public.orders"
    result = run_and_check(stack, stack.names.source_db, stack.names.replica_db, changelog, "embedded")
    record("embedded", result)


@pytest.fixture
def engine_service(stack: Stack) -> Iterator[tuple[str, Path]]:
    """An engine service started on its own, as on its own pod: ``airflow-cdc engine serve``
    with its own state directory, token and database credentials, capturing a second database
    (its owner made the publication; the ``cdc`` role has SELECT); the DAG's connections are
    moved to it - ``cdc_shop`` by URL and token alone - and the apply job's checkpoint of the
    first engine is removed (it tracks that engine's changelog)."""
    server, names = stack.server, stack.names
    source_db, replica_db = f"{names.source_db}_svc", f"{names.replica_db}_svc"
    svc = Names(names.port, source_db, replica_db, names.password, names.api_port)
    create_databases(server, svc, SERVICE_ROWS)
    with server.connect(source_db, autocommit=True) as conn:
        conn.execute("grant select on public.orders to cdc")
        conn.execute("create publication dbz_publication for table public.orders")
    with server.connect(replica_db, autocommit=True) as conn:
        conn.execute("alter table orders owner to replica")
    # The user moves from the engine beside the worker to a service: the first one is stopped.
    run_bash("airflow-cdc engine stop --config ~/airflow-cdc/shop.yaml", stack.env, "stopping the first engine")
    state, port, token = stack.home / "engine-service", free_port(), f"svc-{uuid.uuid4().hex}"
    config = stack.home / "engine-service.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "shop",
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "topic.prefix": "shop",
                "database.hostname": "127.0.0.1",
                "database.port": names.port,
                "database.user": "cdc",
                "database.password": names.password,
                "database.dbname": source_db,
                "slot.name": "shop_svc",  # slot names are the cluster's: the first engine's is "debezium"
                "state.dir": str(state),
                "sink.type": "changelog",
                # small chunks: the snapshot outlasts the sensor's look in its task, and it defers
                "incremental.snapshot.chunk.size": 1,
                "api.port": port,
                "api.token": token,
            }
        )
    )
    log = (stack.home / "engine-service.log").open("wb")
    process = subprocess.Popen(
        [str(BIN / "airflow-cdc"), "engine", "serve", "--stopped", "--config", str(config)],
        env=stack.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(url + "/health"), 60, "the engine service's API", interval=0.2)
        stack.airflow("connections", "delete", "cdc_shop")
        stack.airflow("connections", "delete", "pg_shop")
        stack.airflow("connections", "delete", "pg_shop_replica")
        run_bash(
            "\n".join(
                line
                for line in svc.apply(readme_block("first-run:shell")).splitlines()
                if line.startswith(("airflow connections add pg_shop", "airflow connections add pg_shop_replica"))
            ),
            stack.env,
            "the README's source and replica connections, to the service's databases",
        )
        stack.airflow(
            "connections", "add", "cdc_shop", "--conn-type", "cdc_engine", "--conn-host", url, "--conn-password", token
        )
        shutil.rmtree(stack.home / "airflow" / "cdc" / "checkpoints", ignore_errors=True)
        yield source_db, state
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_same_dag_runs_against_an_engine_service(stack: Stack, engine_service: tuple[str, Path]) -> None:
    source_db, state = engine_service
    changelog = state / "changelog" / "shop.public.orders"
    replica_db = f"{stack.names.replica_db}_svc"
    result = run_and_check(
        stack, source_db, replica_db, changelog, "engine service", rows=SERVICE_ROWS, must_defer=("snapshot_done",)
    )
    record("engine service", result)
