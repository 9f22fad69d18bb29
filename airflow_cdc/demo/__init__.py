"""``airflow-cdc demo``: the pipeline on embedded defaults, end to end, checking itself.

1. A throwaway PostgreSQL (``wal_level=logical``) with the sample tables (``customers``,
   ``orders``: a few thousand rows) and a steady write load on them.
2. An engine instance (its own process, with its control API) streaming from its start, to the
   changelog sink - or to a throwaway Apache Kafka broker with ``--kafka``. ``execute-snapshot``
   is inserted into the signal table: an incremental snapshot reads the existing rows in
   watermarked chunks while the writes go on; its notifications show the progress.
3. Once the snapshot completed, the writes stop and the engine commits up to the source's last
   position; the Spark apply job (``spark-submit``) applies everything to a replica database.
4. The check: per table, row count and checksum of the source and of the replica (``check.py``);
   any difference fails the demo.
5. The same through Airflow: ``example_cdc_pipeline`` with ``dag.test()`` in a throwaway
   ``AIRFLOW_HOME``, into a second replica, checked the same way (``airflow_run.py``).

Everything it started is stopped and removed at the end, after a failure or a Ctrl-C as well.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import psycopg

from airflow_cdc.demo import airflow_run
from airflow_cdc.demo.apply import MASTER, run_apply
from airflow_cdc.demo.capture import (
    SnapshotFollower,
    instance_config,
    signal_through_table,
    sink_settings,
    wait_committed,
    wait_streaming,
    write_config,
)
from airflow_cdc.demo.check import compare, failure, report
from airflow_cdc.demo.progress import DemoFailed, Progress
from airflow_cdc.demo.shop import SIGNAL_TABLE, TABLES, WriteLoad, create_replica, create_source
from airflow_cdc.engine.server import control
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer

__all__ = ["DemoFailed", "DemoOptions", "run_demo"]

SOURCE_DB = "shop"
SIGNAL_ID = "demo-snapshot-1"


@dataclass(frozen=True)
class DemoOptions:
    #: Rows of ``orders`` (``customers`` gets a tenth).
    rows: int = 5000
    #: Transactions per second of the write load (0: none).
    writes: float = 20.0
    #: The Kafka sink on a throwaway broker, and Spark's Kafka source, instead of the changelog.
    kafka: bool = False
    #: Run the Airflow part.
    airflow: bool = True


@dataclass
class Demo:
    """What the parts share: the services, the scratch directory, the printer, the cleanup."""

    options: DemoOptions
    progress: Progress
    cleanup: ExitStack
    work: Path
    server: PostgresServer
    broker: KafkaBroker | None = None

    @property
    def source_dsn(self) -> str:
        return self.server.dsn(SOURCE_DB)

    @property
    def sink_text(self) -> str:
        return "Kafka sink" if self.broker else "changelog sink"

    def target_url(self, database: str) -> str:
        """The apply job's target (trust authentication: no password)."""
        return f"postgresql://{self.server.user}@{self.server.host}:{self.server.port}/{database}"

    def sink(self, state_dir: Path) -> dict[str, Any]:
        return sink_settings(state_dir, self.broker.bootstrap_servers if self.broker else None)

    def write_load(self) -> WriteLoad:
        load = WriteLoad(self.source_dsn, self.options.writes).start()
        self.cleanup.callback(load.halt)
        return load

    def replica(self, name: str) -> None:
        with self.server.connect() as admin:
            create_replica(admin, name)

    def check(self, replica: str, hint: str = "") -> None:
        """The report; DemoFailed when the replica differs from the source."""
        checks = compare(self.source_dsn, self.server.dsn(replica), TABLES)
        self.progress.say(f"check: source database {SOURCE_DB} against {replica}")
        for line in report(checks):
            self.progress.plain(line)
        problem = failure(checks)
        if problem:
            raise DemoFailed(f"check FAILED: target {replica} differs from the source: {problem}{hint}")
        self.progress.plain("check passed: target equals source")


def run_demo(options: DemoOptions | None = None, out: TextIO = sys.stdout) -> None:
    """Run the demo; DemoFailed (with what failed or differs) if it does not pass."""
    options = options or DemoOptions()
    progress = Progress(out)
    sink = "Kafka" if options.kafka else "changelog"
    progress.say(
        f"airflow-cdc demo: PostgreSQL -> engine ({sink}) -> Spark -> PostgreSQL, checked"
        + ("; then the same with Airflow" if options.airflow else "")
    )
    with ExitStack() as cleanup:
        work = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="airflow-cdc-demo-")))
        try:
            demo = _services(options, progress, cleanup, work)
            _capture_and_apply(demo)
            if options.airflow:
                _through_airflow(demo)
        finally:
            progress.say("cleaning up: engine instances, Spark jobs, servers, temporary files ...")
    progress.say("  cleaned up")
    progress.say(f"demo passed in {progress.elapsed:.0f}s")


def _services(options: DemoOptions, progress: Progress, cleanup: ExitStack, work: Path) -> Demo:
    with progress.step("starting a throwaway PostgreSQL (wal_level=logical)") as step:
        server = cleanup.enter_context(PostgresServer())
        step.done(f"PostgreSQL on {server.address}")
    broker = None
    if options.kafka:
        with progress.step("starting a throwaway Apache Kafka broker (KRaft)") as step:
            broker = cleanup.enter_context(KafkaBroker())
            step.done(f"Kafka on {broker.bootstrap_servers}")
    demo = Demo(options, progress, cleanup, work, server, broker)
    with progress.step(f"sample database {SOURCE_DB}") as step:
        with server.connect() as admin:
            admin.execute(f"create database {SOURCE_DB}")
        with psycopg.connect(demo.source_dsn, autocommit=True) as conn:
            sizes = create_source(conn, options.rows)
        demo.replica("shop_replica")
        step.done(", ".join(f"{table} {rows} rows" for table, rows in sizes.items()) + f", {SIGNAL_TABLE}")
    return demo


def _capture_and_apply(demo: Demo) -> None:
    say = demo.progress.say
    load = demo.write_load()
    say(f"write load: {demo.options.writes:g} transactions/s (new orders, updates, deletes) until the snapshot is done")
    state = demo.work / "engine-demo"
    database = {
        "database.hostname": demo.server.host,
        "database.port": demo.server.port,
        "database.user": demo.server.user,
        "database.dbname": SOURCE_DB,
    }
    config = instance_config("demo", "demo", state, demo.sink(state), **database)
    with demo.progress.step(f"starting engine instance 'demo' ({demo.sink_text})") as step:
        demo.cleanup.callback(_stop_instance, config)
        status = control.start_detached(write_config(config, demo.work / "demo.yaml"), config, timeout=120)
        client = demo.cleanup.enter_context(control.client_for(config))
        wait_streaming(client)
        step.done(f"streaming (pid {status.get('pid')}, control API {status.get('api')})")

    with demo.progress.step("incremental snapshot, signalled through the signal table") as step:
        signal_through_table(demo.source_dsn, SIGNAL_ID)
        say(f"  execute-snapshot {SIGNAL_ID} inserted into {SIGNAL_TABLE}: the engine reads it from the stream")
        SnapshotFollower(client, say, SIGNAL_ID).follow()
        step.done("snapshot complete; streaming went on meanwhile")

    with demo.progress.step("stopping the write load; the engine commits all it wrote") as step:
        writes = load.stop()
        with psycopg.connect(demo.source_dsn) as conn:
            position = str(conn.execute("select pg_current_wal_lsn()").fetchone()[0])  # type: ignore[index]
        wait_committed(client, position)
        step.done(f"{writes} write transactions captured; committed up to {position}")

    with demo.progress.step(f"Spark apply job (spark-submit, {MASTER}) into database shop_replica") as step:
        result = run_apply(config, TABLES, demo.target_url("shop_replica"), demo.work, say)
        step.done(
            f"{result.get('records')} change events in {result.get('batches')} batch(es): "
            f"{result.get('upserted', 0)} rows upserted, {result.get('deleted', 0)} deleted"
        )
    demo.check("shop_replica")
    with demo.progress.step("stopping engine instance 'demo'") as step:
        _stop_instance(config)
        step.done("stopped; replication slot dropped")


def _through_airflow(demo: Demo) -> None:
    say, dag_id = demo.progress.say, airflow_run.DAG_ID
    home = demo.work / "airflow"
    state = demo.work / "engine-airflow"
    token = secrets.token_urlsafe(24)
    # The instance's file holds no database setting: the DAG's start_engine takes them from pg_shop.
    config = instance_config("demo-airflow", "shop", state, demo.sink(state), **{"api.token": token})
    connections = _connections(demo, write_config(config, demo.work / "shop.yaml"), token)
    demo.replica("shop_airflow")
    with airflow_run.environment(airflow_run.airflow_environment(home, connections)):
        with demo.progress.step("Airflow: throwaway AIRFLOW_HOME, airflow db migrate") as step:
            airflow_run.migrate()
            step.done(f"metadata database in {home}")
        demo.cleanup.callback(airflow_run.stop_children_since, airflow_run.children())
        demo.cleanup.callback(_stop_instance, config)
        load = demo.write_load()
        say(f"write load: {demo.options.writes:g} transactions/s until the DAG's {airflow_run.CAUGHT_UP} starts")
        step_name = f"dag.test() of {dag_id} (connections cdc_shop, pg_shop, pg_shop_replica, spark_cdc)"
        with demo.progress.step(step_name) as step:
            run = airflow_run.run_dag(say, load)
            writes = load.stop()
            states = airflow_run.task_states(run)
            failed = [f"{task_id} {task_state}" for task_id, task_state in states if task_state != "success"]
            if failed or not states:
                raise DemoFailed(f"{dag_id} did not succeed: {', '.join(failed) or 'no task ran'} (see above)")
            snapshot = (airflow_run.xcom(run, "snapshot_done") or {}).get("rows") or {}
            applied = airflow_run.xcom(run, "apply_changes") or {}
            step.done(
                f"{dag_id} succeeded: snapshot of {', '.join(f'{t} {n} rows' for t, n in sorted(snapshot.items()))}; "
                f"{writes} write transactions meanwhile; {applied.get('records')} change events applied"
            )
        demo.check("shop_airflow", _late_writes(demo, load, airflow_run.xcom(run, "caught_up")))
        with demo.progress.step("stopping engine instance 'demo-airflow'") as step:
            _stop_instance(config)
            step.done("stopped; replication slot dropped")


def _connections(demo: Demo, config_path: Path, token: str) -> dict[str, dict[str, Any]]:
    """The connections ``example_cdc_pipeline`` names, as ``AIRFLOW_CONN_*`` JSON."""
    server = demo.server
    postgres = {"conn_type": "postgres", "host": server.host, "port": server.port, "login": server.user}
    return {
        "cdc_shop": {
            "conn_type": "cdc_engine",
            "login": "demo-airflow",
            "password": token,
            "extra": {"config_path": str(config_path)},
        },
        "pg_shop": {**postgres, "schema": SOURCE_DB},
        "pg_shop_replica": {**postgres, "schema": "shop_airflow"},
        "spark_cdc": {"conn_type": "spark", "host": "local[2]"},
    }


def _late_writes(demo: Demo, load: WriteLoad, caught_up: Mapping[str, Any] | None) -> str:
    """For a failed check: whether writes came after the position the DAG's caught_up sensor
    waited for (those are the next run's to apply, so the check cannot pass)."""
    targets = [p.get("target") for p in (caught_up or {}).get("positions", []) if p.get("target")]
    if not load.last_lsn or not targets:
        return ""
    with psycopg.connect(demo.source_dsn) as conn:
        late = conn.execute("select %s::pg_lsn > %s::pg_lsn", (load.last_lsn, targets[0])).fetchone()
    if late and late[0]:
        return f" (the last write, at {load.last_lsn}, came after the caught_up sensor's target {targets[0]})"
    return ""


def _stop_instance(config: Mapping[str, Any]) -> None:
    """Graceful stop (drain, commit, drop the slot: ``slot.drop.on.stop``); a no-op when stopped."""
    control.stop(config, timeout=60)
