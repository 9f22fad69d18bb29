"""``dags/example_cdc_on_change.py`` under Airflow's real scheduler, DAG processor, triggerer and
API server (the watcher lives in the triggerer; ``dag.test()`` runs no watcher): the instance
captures the source (its initial snapshot, then writes), the asset watcher fires, the scheduler
makes an asset-triggered run of the table's DAG, and its apply job makes the replica equal to
the source row by row - after the snapshot and again after new writes, with no run triggered
by hand. The triggerer is then restarted: its watcher resumes from the cursor it kept in the
asset state store, so no run is made for changes already applied. The same DAG file then runs
on Debezium's connector on the real Kafka Connect worker and broker."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.ports import free_port
from airflow_cdc.operators.engine import CdcStartEngineOperator
from tests.integration.airflow.support import task_context
from tests.system.conftest import WITH_SCHEMAS, _connections, _instance, connect_source, local_spark
from tests.system.debezium_on_connect import debezium_shop
from tests.system.first_run_stack import BIN, Metadata, airflow_processes, run_bash, tail, task_log, wait_for_run
from tests.system.support import CHANGED, DAGS, DELETED, INSERTED, Instance, Source, tamper, writing

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAG_ID = "example_cdc_on_change_public_orders"
STORE_KEY = "airflow_cdc.watcher.CdcTableChangesTrigger.cdc_shop.public.orders"


@dataclass
class Airflow:
    home: Path
    env: dict[str, str]
    meta: Metadata
    logs: Path
    dag_id: str = DAG_ID
    task_id: str = "apply_changes"

    def runs(self) -> list[tuple[str, str, str]]:
        """``(run_id, run_type, state)`` of the DAG's runs, oldest first."""
        rows = self.meta._rows("select run_id, run_type, state from dag_run where dag_id = ? order by id", self.dag_id)
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]

    def stored_cursor(self) -> Any:
        rows = self.meta._rows("select value from asset_state_store where key = ?", STORE_KEY)
        return json.loads(rows[0][0]) if rows else None

    def event_payloads(self) -> list[dict[str, Any]]:
        """The watcher's events, as the asset events' ``extra`` keeps them, oldest first."""
        rows = self.meta._rows("select extra from asset_event order by id")
        extras = [json.loads(r[0]) if isinstance(r[0], str) else r[0] for r in rows]
        return [e["payload"] for e in extras if isinstance(e, dict) and e.get("from_trigger")]

    def diagnosis(self) -> str:
        runs = self.runs()
        logs = "\n".join(
            f"--- {run_id}\n{task_log(self.home.parent, self.dag_id, run_id, self.task_id)[-2500:]}"
            for run_id, _, state in runs
            if state != "success"
        )
        processes = "\n".join(f"--- {p.name}\n{tail(p, 2500)}" for p in sorted(self.logs.glob("*.log")))
        return f"runs: {runs}\n{logs}\n{processes}"


@pytest.fixture
def airflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Airflow:
    """A migrated Airflow home of its own whose DAG folder holds the example and
    ``example_cdc_validate`` (whose repair the on-change runs apply)."""
    return airflow_home_for(
        tmp_path, (DAGS / "example_cdc_on_change.py").read_text(), "example_cdc_on_change.py", "example_cdc_validate.py"
    )


def airflow_home_for(tmp_path: Path, dag_text: str, dag_file: str, *examples: str, **fields: str) -> Airflow:
    """A migrated Airflow home in ``tmp_path`` whose DAG folder holds ``dag_text`` as ``dag_file``,
    and the example DAG files named by ``examples`` as they are."""
    home = tmp_path / "airflow"
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / dag_file).write_text(dag_text)
    for example in examples:
        (dags / example).write_text((DAGS / example).read_text())
    api_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://localhost:{api_port}/execution/",
        AIRFLOW__API__PORT=str(api_port),
        PATH=f"{BIN}:{os.environ.get('PATH', '')}",
        PYTHONPATH=os.pathsep.join(filter(None, [str(DAGS.parent), os.environ.get("PYTHONPATH")])),
    )
    run_bash("airflow db migrate && airflow dags reserialize", env, "migrating Airflow's database", timeout=600)
    return Airflow(home, env, Metadata(home / "airflow.db"), tmp_path, **fields)


@pytest.fixture
def on_change(
    tmp_path: Path, source: Source, replica: Source, airflow_home: Airflow, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Instance]:
    """The instance of ``cdc_shop`` (an initial snapshot at its start; events with their schemas,
    from which the apply job creates the replica's tables), with the connections in the
    environment the Airflow processes inherit."""
    settings = {"snapshot.mode": "initial", "slot.drop.on.stop": True, **WITH_SCHEMAS}
    with _instance(tmp_path, source, "on-change", **settings) as instance:
        _connections(monkeypatch, source, cdc_shop=instance)
        airflow_home.env.update({k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")})
        yield instance


def components(airflow: Airflow, *names: str) -> contextlib.AbstractContextManager[dict[str, Path]]:
    port = airflow.env["AIRFLOW__API__PORT"]
    commands = {
        "scheduler": "airflow scheduler",
        "dag-processor": "airflow dag-processor",
        "triggerer": "airflow triggerer",
        "api-server": f"airflow api-server --port {port}",
    }
    logs = airflow.logs / f"logs-{len(list(airflow.logs.glob('logs-*')))}"
    logs.mkdir()
    return airflow_processes([commands[n] for n in names], airflow.env, logs)


def replica_matches(replica: Source, source: Source, table: str = "orders") -> bool:
    with contextlib.suppress(Exception):  # the table appears with the first apply
        rows = {k: {c: v for c, v in row.items() if c != "_cdc_position"} for k, row in replica.rows(table).items()}
        return rows == source.rows(table)
    return False


def applies_on_change(airflow: Airflow, source: Source, replica: Source, changes: int) -> dict[str, Any]:
    """Airflow's processes with the DAG unpaused: the initial snapshot's rows, then new writes,
    each reach the replica through an asset-triggered run; the watcher's stored cursor after
    ``changes`` records of the topic."""
    with components(airflow, "api-server", "dag-processor", "triggerer"):
        run_bash(f"airflow dags unpause {DAG_ID}", airflow.env, "unpausing the DAG")
        with components(airflow, "scheduler"):
            # The initial snapshot's 2000 rows: the watcher fires, a run applies them.
            wait_until(lambda: replica_matches(replica, source), 600, "the replica after the snapshot", interval=2)
            first = airflow.runs()
            assert first and all(t == "asset_triggered" for _, t, _ in first), airflow.diagnosis()
            wait_until(lambda: all(s == "success" for _, _, s in airflow.runs()), 300, "the runs' end", interval=1)

            source.execute(
                "update orders set status = 'changed' where id % 100 = 0",
                "delete from orders where id between 1001 and 1005",
                "insert into orders select g, 'new', now() from generate_series(3001, 3010) g",
            )
            wait_until(lambda: len(airflow.runs()) > len(first), 120, "a run for the new writes", interval=1)
            run_id = airflow.runs()[-1][0]
            assert wait_for_run(airflow.meta, DAG_ID, run_id, 600) == "success", airflow.diagnosis()
            wait_until(lambda: replica_matches(replica, source), 120, "the replica after the writes", interval=2)
            wait_until(lambda: all(s == "success" for _, _, s in airflow.runs()), 300, "the runs' end", interval=1)
            return wait_until(
                lambda: (c := airflow.stored_cursor()) and c["count"] >= changes and c, 60, "the stored cursor"
            )


VALIDATE = "example_cdc_validate"


def xcom_value(airflow: Airflow, dag_id: str, run_id: str, task_id: str) -> Any:
    rows = airflow.meta._rows(
        "select value from xcom where dag_id = ? and run_id = ? and task_id = ? and key = 'return_value'",
        dag_id,
        run_id,
        task_id,
    )
    value = json.loads(rows[0][0]) if rows and isinstance(rows[0][0], str) else (rows[0][0] if rows else None)
    return json.loads(value) if isinstance(value, str) else value


def repairs_drift(airflow: Airflow, source: Source, replica: Source) -> None:
    """The replica tampered with behind the pipeline's back; ``example_cdc_validate`` triggered
    through Airflow while the application writes. It names exactly the tampered keys, deletes
    the ghost rows, snapshots the others again (on Connect the signal goes through the signal
    table: Debezium has no API channel), and the on-change
    runs the snapshot's rows set off bring them: the replica equals the source, and ``customers``
    (applied by its own on-change DAG, unpaused here) was found without drift."""
    tamper(replica)
    with components(airflow, "api-server", "dag-processor", "triggerer", "scheduler"):
        run_bash(f"airflow dags unpause {DAG_ID.replace('orders', 'customers')}", airflow.env, "customers' DAG")
        customers = Airflow(
            airflow.home, airflow.env, airflow.meta, airflow.logs, dag_id=DAG_ID.replace("orders", "customers")
        )
        wait_until(lambda: replica_matches(replica, source, "customers"), 600, "customers applied", interval=2)
        wait_until(lambda: all(s == "success" for _, _, s in customers.runs()), 300, "customers' runs", interval=1)
        with writing(source, range(100, 400)):
            run_bash(
                f"airflow dags unpause {VALIDATE} && airflow dags trigger {VALIDATE} --run-id repair",
                airflow.env,
                "the validation",
            )
            validate = Airflow(
                airflow.home, airflow.env, airflow.meta, airflow.logs, dag_id=VALIDATE, task_id="validate_orders"
            )
            assert wait_for_run(airflow.meta, VALIDATE, "repair", 900) == "success", validate.diagnosis()
        wait_until(lambda: replica_matches(replica, source), 300, "the writer's changes applied", interval=2)
    repaired = xcom_value(airflow, VALIDATE, "repair", "validate_orders")
    before, after = repaired["before"], repaired["after"]
    # The writer's changes on their way differ too (the on-change runs apply them a debounce and
    # a Spark start later): past max_keys they are ranges, the tampered keys named or in one.
    named = {*before["missing"], *before["extra"], *before["different"]}
    for key in (*DELETED, *INSERTED, *CHANGED):
        assert key in named or any(r[0] <= key <= r[1] for r in before["truncated"]), (key, repaired)
    assert sorted(repaired["deleted"]) == INSERTED and repaired["signal_ids"], repaired
    assert (after["missing"], after["extra"], after["different"], after["truncated"]) == ([], [], [], []), repaired
    assert xcom_value(airflow, VALIDATE, "repair", "validate_customers")["different"] == []


@pytest.mark.timeout(1800)  # three Spark applies, a few minutes each on a busy machine
def test_the_watcher_runs_the_apply_when_the_table_changed(
    on_change: Instance, source: Source, replica: Source, airflow_home: Airflow
) -> None:
    airflow = airflow_home
    CdcStartEngineOperator(task_id="start", cdc_conn_id="cdc_shop", source_conn_id="pg_shop", timeout=120).execute(
        task_context()
    )
    # The snapshot's reads, 20 updates, 5 deletes (each with its tombstone), 10 inserts.
    cursor = applies_on_change(airflow, source, replica, 2040)

    # Everything restarts (the triggerer makes the watcher again from its kwargs): the watcher
    # resumes from the stored cursor - its next event starts where the last one ended, so no
    # run is made again for what was applied.
    events = len(airflow.event_payloads())
    runs = airflow.runs()
    with components(airflow, "api-server", "dag-processor", "triggerer", "scheduler"):
        source.execute("update orders set status = 'after restart' where id = 42")
        wait_until(lambda: len(airflow.event_payloads()) > events, 180, "the watcher's event after the restart")
        after = airflow.event_payloads()[events]
        assert after["since"] == cursor["count"] and after["until"] == cursor["count"] + 1, (after, cursor)
        wait_until(lambda: len(airflow.runs()) > len(runs), 120, "a run for the write after the restart", interval=1)
        run_id = airflow.runs()[len(runs)][0]
        assert wait_for_run(airflow.meta, DAG_ID, run_id, 600) == "success", airflow.diagnosis()
        wait_until(lambda: replica_matches(replica, source), 120, "the replica after the restart", interval=2)

    repairs_drift(airflow, source, replica)


@pytest.fixture
def on_connect(
    tmp_path: Path,
    source: Source,
    replica: Source,
    airflow_home: Airflow,
    connect_worker: Any,
    kafka_broker: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[str]:
    """``cdc_shop`` as a ``kafka_connect`` connection: Debezium's connector (an initial snapshot)
    on the real Connect worker and broker; the connector and its slot gone afterwards."""
    connect_source(monkeypatch, source)
    local_spark(monkeypatch)
    with debezium_shop(
        tmp_path, source, connect_worker, kafka_broker, "on-change", **{"snapshot.mode": "initial"}
    ) as conn:
        monkeypatch.setenv("AIRFLOW_CONN_CDC_SHOP", conn)
        airflow_home.env.update({k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")})
        yield conn


@pytest.mark.connect_stack
@pytest.mark.timeout(1800)
def test_the_same_dag_runs_on_change_on_kafka_connect(
    on_connect: str, source: Source, replica: Source, airflow_home: Airflow
) -> None:
    """The watcher counts the table's Kafka topic by its end offsets on the brokers the
    connection names; the apply job reads the topic; the DAG file is the same."""
    CdcStartEngineOperator(task_id="start", cdc_conn_id="cdc_shop", source_conn_id="pg_shop", timeout=180).execute(
        task_context()
    )
    cursor = applies_on_change(airflow_home, source, replica, 2040)
    events = airflow_home.event_payloads()
    assert events[0]["topic"] == "shop.public.orders" and events[-1]["until"] == cursor["count"], events
    repairs_drift(airflow_home, source, replica)
