"""``dags/example_cdc_declared.py`` (the pipeline of ``dags/pipelines/shop.yaml``) run with
``dag.test()`` against a real PostgreSQL, a real engine instance and a real local Spark: each
table's group snapshots it, waits, and applies it, and the replica ends equal to the source row
by row. A second run, after changes, skips the snapshots (policy ``initial``: done once, as the
tables' asset events record) and applies only the changes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.system.support import Instance, Source, asset_events, load_dag, task_states, xcom
from tests.system.test_example_dags import assert_no_secret, without_position

pytestmark = pytest.mark.integration

TABLES = {"public_orders": "orders", "public_customers": "customers"}


def states_by_step(run: Any) -> dict[str, set[str]]:
    """Each step's states over the tables' groups (``snapshot`` → {"success"})."""
    steps: dict[str, set[str]] = {}
    for task_id, state in task_states(run).items():
        steps.setdefault(task_id.rsplit(".", 1)[-1], set()).add(state)
    return steps


@pytest.mark.timeout(1200)
def test_the_declared_pipeline_snapshots_once_and_applies_each_table(
    shop: Instance, source: Source, replica: Source, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = load_dag("example_cdc_declared")
    assert sorted(k for k in dag.task_group.children if k != "start_engine") == sorted(TABLES)

    first = dag.test()
    states = task_states(first)
    assert set(states.values()) == {"success"}, states
    assert len(states) == 1 + 4 * len(TABLES)
    for group, table in TABLES.items():
        signal_id = xcom(first, f"{group}.snapshot")
        done = xcom(first, f"{group}.snapshot_done")
        # Its own snapshot, or the running one the instance added the table to (then named by the task).
        assert done["signal_id"] == signal_id and done["rows"][f"public.{table}"] == len(source.rows(table))
        applied = xcom(first, f"{group}.apply")
        assert applied["records"] >= len(source.rows(table))
        assert without_position(replica.rows(table)) == source.rows(table)
    events = {(uri, task_id): extra for uri, extra, task_id in asset_events(first)}
    assert set(events) == {
        ("cdc://shop/public.orders", "public_orders.snapshot_done"),
        ("cdc://shop/public.customers", "public_customers.snapshot_done"),
    }
    assert events[("cdc://shop/public.customers", "public_customers.snapshot_done")]["rows"] == 50

    source.execute(
        "update orders set status = 'changed' where id % 100 = 0",
        "delete from orders where id between 1001 and 1005",
        "insert into orders select g, 'new', now() from generate_series(3001, 3010) g",
        "update customers set name = 'renamed' where id = 7",
    )
    second = dag.test()
    steps = states_by_step(second)
    # Snapshotted once: the second run skips the snapshot and its wait, and applies the changes.
    assert steps == {
        "start_engine": {"success"},
        "snapshot": {"skipped"},
        "snapshot_done": {"skipped"},
        "caught_up": {"success"},
        "apply": {"success"},
    }, task_states(second)
    assert asset_events(second) == []
    applied = xcom(second, "public_orders.apply")
    assert 0 < applied["records"] < 100  # the changes, not the table again
    for table in TABLES.values():
        assert without_position(replica.rows(table)) == source.rows(table)
    assert_no_secret(list(events.values()), applied, capfd.readouterr(), shop.log())
