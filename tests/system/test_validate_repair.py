"""Drift found and repaired end to end: the example pipeline fills the replica, the test corrupts
the replica behind the pipeline's back (updates, deletes, inserts), ``CdcValidateOperator``
names exactly those keys, and with ``repair=True`` (``dags/example_cdc_validate.py``) the
incremental snapshot of those keys and the apply job (running meanwhile, as a scheduled or
continuous apply would) leave the replica equal to the source row by row."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.operators.validate import CdcValidateOperator
from tests.integration.airflow.apply_support import task_context
from tests.system.conftest import MariaSource
from tests.system.support import (
    CHANGED,
    DELETED,
    INSERTED,
    Instance,
    Source,
    load_dag,
    tamper,
    task_states,
    writing,
    xcom,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def succeeded(run: Any, log: str = "") -> None:
    states = task_states(run)
    assert set(states.values()) == {"success"}, (states, log[-3000:])


@contextmanager
def applying(dag_id: str) -> Iterator[list[dict[str, Any]]]:
    """The DAG's ``apply_changes`` runs again and again meanwhile (what a scheduled apply does),
    each run on the same checkpoint: what the instance captured reaches the replica."""
    task = load_dag(dag_id).get_task("apply_changes")
    stop, results, errors = threading.Event(), [], []

    def loop() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                results.append(task.execute(task_context(f"apply-{n}")))
            except Exception as exc:  # reported by the test
                errors.append(exc)
                return

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield results
    finally:
        stop.set()
        thread.join(300)
    assert not errors, errors


def without_position(rows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {key: {k: v for k, v in row.items() if k != "_cdc_position"} for key, row in rows.items()}


def test_postgres_drift_is_named_exactly_and_repaired_by_a_snapshot_of_those_keys(
    shop: Instance, source: Source, replica: Source
) -> None:
    succeeded(load_dag("example_cdc_pipeline").test(), shop.log())
    assert without_position(replica.rows("orders")) == source.rows("orders")
    tamper(replica)

    found = CdcValidateOperator(
        task_id="validate",
        cdc_conn_id="cdc_shop",
        table="public.orders",
        source_conn_id="pg_shop",
        target_conn_id="pg_shop_replica",
        settle_timeout=3,
    ).execute({})
    assert (found["missing"], found["extra"], found["different"]) == (DELETED, INSERTED, CHANGED)
    assert (found["source_rows"], found["target_rows"]) == (2000, 2000)

    # The repair runs while the application writes (each key of 100..399 changed once, captured
    # and applied meanwhile): those changes on their way are no drift.
    with applying("example_cdc_pipeline"), writing(source, range(100, 400)):
        run = load_dag("example_cdc_validate").test()
    succeeded(run, shop.log())
    repaired = xcom(run, "validate_orders")
    before, after = repaired["before"], repaired["after"]
    assert (before["missing"], before["extra"], before["different"]) == (DELETED, INSERTED, CHANGED)
    assert repaired["deleted"] == INSERTED and repaired["signal_id"]
    assert (after["missing"], after["extra"], after["different"], after["truncated"]) == ([], [], [], [])
    with applying("example_cdc_pipeline"):  # the writer's last changes
        wait_until(lambda: without_position(replica.rows("orders")) == source.rows("orders"), 300, "caught up", 1.0)
    assert sum(row["status"] == "written" for row in source.rows("orders").values()) == 300
    assert xcom(run, "validate_customers")["different"] == []

    # The snapshot read only the differing keys: 2 missing + 2 different rows, not 2000.
    reads = [r for r in shop.snapshot_reads("shop.public.orders") if r["source"]["snapshot"] == "incremental"]
    assert sorted(r["after"]["id"] for r in reads[-4:]) == sorted(DELETED + CHANGED)

    # Tampered again, and the check may name two keys only (3 and 7, the first it meets): the rest
    # are ranges, the ghost rows among them, which a snapshot re-reads but cannot delete. The
    # second round names the ghosts and deletes them.
    tamper(replica)
    capped = CdcValidateOperator(
        task_id="validate_capped",
        cdc_conn_id="cdc_shop",
        table="public.orders",
        source_conn_id="pg_shop",
        target_conn_id="pg_shop_replica",
        max_keys=2,
        settle_timeout=3,
        repair=True,
        repair_timeout=600,
    )
    with applying("example_cdc_pipeline"):
        twice = capped.execute({})
    assert len(twice["before"]["truncated"]) > 0 and twice["rounds"] == 2, twice
    assert twice["deleted"] == INSERTED and len(twice["signal_ids"]) == 1, twice
    assert without_position(replica.rows("orders")) == source.rows("orders")


def test_mariadb_drift_is_named_exactly_and_repaired_by_a_snapshot_of_those_keys(
    maria_shop: Instance, maria_source: MariaSource, maria_replica: MariaSource
) -> None:
    succeeded(load_dag("example_mariadb_capture").test(), maria_shop.log())
    assert without_position(maria_replica.rows("orders")) == maria_source.rows("orders")
    maria_replica.execute(
        f"update orders set amount = amount + 1 where id in ({CHANGED[0]}, {CHANGED[1]})",
        f"delete from orders where id in ({DELETED[0]}, {DELETED[1]})",
        f"insert into orders values ({INSERTED[0]}, 'ghost', 1, now(), null), ({INSERTED[1]}, 'ghost', 1, now(), null)",
    )
    database = maria_source.database
    validate = CdcValidateOperator(
        task_id="validate",
        cdc_conn_id="cdc_mariadb",
        table=f"{database}.orders",
        source_conn_id="mariadb_shop",
        target_conn_id="mariadb_shop_replica",
        channel="source",  # the example instance listens on its signal table
        settle_timeout=3,
        repair=True,
        repair_timeout=600,
    )
    with applying("example_mariadb_capture"):
        repaired = validate.execute({})
    before, after = repaired["before"], repaired["after"]
    assert (before["missing"], before["extra"], before["different"]) == (DELETED, INSERTED, CHANGED)
    assert (after["missing"], after["extra"], after["different"], after["truncated"]) == ([], [], [], [])
    assert without_position(maria_replica.rows("orders")) == maria_source.rows("orders")
