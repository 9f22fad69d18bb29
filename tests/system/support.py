"""Helpers of the system tests: the source database, an instance's changelog read back as table
state, and what a ``dag.test()`` run left in Airflow's metadata database (task states, XComs,
asset events)."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.local.postgres import PostgresServer

DAGS = Path(__file__).resolve().parents[2] / "dags"


@dataclass
class Source:
    server: PostgresServer
    database: str
    user: str
    password: str

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.server.dsn(self.database), autocommit=True)

    def execute(self, *statements: str) -> None:
        with self.connect() as conn:
            for statement in statements:
                conn.execute(statement)

    def rows(self, table: str, where: str = "true") -> dict[int, dict[str, Any]]:
        """The table's rows by id."""
        with self.connect() as conn, conn.cursor() as cursor:
            cursor.execute(f"select * from {table} where {where}")
            names = [column.name for column in cursor.description or ()]
            return {row[0]: dict(zip(names, row, strict=True)) for row in cursor}

    def slots(self) -> list[str]:
        with self.connect() as conn:
            return [
                r[0]
                for r in conn.execute("select slot_name from pg_replication_slots where database = current_database()")
            ]


def as_source(row: dict[str, Any]) -> dict[str, Any]:
    """A change event's ``after`` with Debezium's ZonedTimestamp text read back as datetimes."""
    out = dict(row)
    for key, value in row.items():
        if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
            out[key] = datetime.fromisoformat(value)
    return out


@dataclass
class Instance:
    name: str
    config_path: Path
    state_dir: Path

    @property
    def props(self) -> dict[str, Any]:
        return {"name": self.name, "state.dir": str(self.state_dir)}

    def log(self) -> str:
        return control.log_tail(self.state_dir, 200)

    def client(self) -> EngineClient:
        """The running instance's API client."""
        return control.client_for(load_config_file(self.config_path))

    def changelog(self, topic: str) -> list[dict[str, Any]]:
        """Every record the changelog sink wrote to ``topic``, in order."""
        directory = self.state_dir / "changelog" / topic
        records = [
            json.loads(line)
            for segment in sorted(directory.glob("*.jsonl"), key=lambda p: int(p.stem))
            for line in segment.read_text().splitlines()
            if line.strip()
        ]
        for record in records:  # with the converters' schemas: the payloads
            for part in ("key", "value"):
                if isinstance(record.get(part), dict) and set(record[part]) == {"schema", "payload"}:
                    record[part] = record[part]["payload"]
        return sorted(records, key=lambda r: r["seq"])

    def table_state(self, topic: str) -> dict[int, dict[str, Any]]:
        """The table as the changelog's changes leave it: the last change per key wins."""
        state: dict[int, dict[str, Any]] = {}
        for record in self.changelog(topic):
            key = record["key"]["id"]
            value = record["value"]
            if value is None or value["op"] == "d":
                state.pop(key, None)
            else:
                state[key] = as_source(value["after"])
        return state

    def snapshot_reads(self, topic: str) -> list[dict[str, Any]]:
        return [r["value"] for r in self.changelog(topic) if r["value"] and r["value"]["op"] == "r"]


# -- the DAGs and what their runs left ---------------------------------------------------------
def load_dag(dag_id: str) -> Any:
    """The example DAG ``dag_id``, imported afresh from ``dags/<dag_id>.py``."""
    path = DAGS / f"{dag_id}.py"
    spec = importlib.util.spec_from_file_location(f"airflow_cdc_example_{dag_id}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def task_states(run: Any) -> dict[str, str]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}


def task_instance(run: Any, task_id: str) -> Any:
    from airflow.utils.session import create_session

    with create_session() as session:
        return run.get_task_instance(task_id, session=session)


def xcom(run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
        found = session.scalars(query).first()
        return None if found is None else XComModel.deserialize_value(found)


def asset_events(run: Any) -> list[tuple[str, dict[str, Any], str]]:
    """``(uri, extra, task id)`` of every asset event the run emitted."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.scalars(
            select(AssetEvent).where(AssetEvent.source_dag_id == run.dag_id, AssetEvent.source_run_id == run.run_id)
        ).all()
        return sorted((event.uri, dict(event.extra), str(event.source_task_id)) for event in events)


def task_logs(home: str, run: Any) -> str:
    """Every log file of the run's tasks under ``$AIRFLOW_HOME/logs``."""
    root = Path(home) / "logs" / f"dag_id={run.dag_id}" / f"run_id={run.run_id}"
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.rglob("*.log")))


def grouped(rows: Iterable[dict[str, Any]], key: str) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for row in rows:
        counts[row[key]] = counts.get(row[key], 0) + 1
    return counts


def drop_topics(broker: Any, prefix: str) -> None:
    """Deletes the broker's topics named ``<prefix>.*`` and waits until they are gone. The
    session's broker is shared: the example DAGs all name topic prefix ``shop``, so a test whose
    connector writes there must not leave its records to the next one's apply job."""
    from airflow_cdc.engine.testing import wait_until

    admin = broker.admin()
    try:

        def ours() -> list[str]:
            return [t for t in admin.list_topics() if t.startswith(f"{prefix}.")]

        if found := ours():
            admin.delete_topics(found)
            wait_until(lambda: not ours(), 60, f"topics {prefix}.* deleted")
    finally:
        admin.close()


#: The replica's keys a drift test tampers with behind the pipeline's back: rows changed,
#: deleted and inserted there (the example tables hold keys 1..2000).
CHANGED, DELETED, INSERTED = [7, 1500], [3, 1999], [5000, 5001]


def tamper(replica: Source) -> None:
    """Changes, deletes and inserts rows of the replica's ``orders`` behind the pipeline's back."""
    replica.execute(
        f"update orders set status = 'tampered' where id in ({CHANGED[0]}, {CHANGED[1]})",
        f"delete from orders where id in ({DELETED[0]}, {DELETED[1]})",
        f"insert into orders (id, status, updated_at) values ({INSERTED[0]}, 'ghost', now()), "
        f"({INSERTED[1]}, 'ghost', now())",
    )


@contextmanager
def writing(source: Source, keys: Iterable[int]) -> Iterator[None]:
    """The application updates ``keys``, one at a time, while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        with source.connect() as conn:
            for key in keys:
                if stop.wait(0.05):
                    return
                conn.execute("update orders set status = 'written' where id = %s", (key,))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join(120)  # every key written, whether or not the block took that long
        stop.set()
