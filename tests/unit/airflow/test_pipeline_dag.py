"""A declared pipeline rendered into Airflow (airflow_cdc.pipeline.render), read by Airflow's own
DagBag as the DAG processor reads a DAG folder: one task group per table, the provider's operators
wired snapshot → wait → apply, the tables' assets, and a file with a mistake as an import error
that names its line and key."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from airflow.dag_processing.dagbag import DagBag
from airflow.sdk import DAG

from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.spark import CdcSparkApplyOperator
from airflow_cdc.pipeline import CdcPipeline, parse_pipeline
from airflow_cdc.pipeline.tasks import CdcPipelineSnapshotOperator
from airflow_cdc.sensors.offset import CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor

DAGS = Path(__file__).resolve().parents[3] / "dags"
STEPS = ["snapshot", "snapshot_done", "caught_up", "apply"]


def bag(folder: Path) -> DagBag:
    return DagBag(dag_folder=str(folder), safe_mode=False)


def copy_example(tmp_path: Path) -> Path:
    (tmp_path / "pipelines").mkdir()
    shutil.copy(DAGS / "example_cdc_declared.py", tmp_path)
    shutil.copy(DAGS / "pipelines" / "shop.yaml", tmp_path / "pipelines")
    return tmp_path / "pipelines" / "shop.yaml"


def test_the_example_parses_in_a_dagbag_with_one_group_per_table(tmp_path: Path) -> None:
    copy_example(tmp_path)
    dagbag = bag(tmp_path)
    assert dagbag.import_errors == {}
    dag = dagbag.dags["example_cdc_declared"]

    groups = {key: group for key, group in dag.task_group.children.items() if key != "start_engine"}
    assert sorted(groups) == ["public_customers", "public_orders"]
    for name, table in (("public_orders", "public.orders"), ("public_customers", "public.customers")):
        ids = [f"{name}.{step}" for step in STEPS]
        assert sorted(groups[name].children) == sorted(ids)
        snapshot, done, caught_up, apply = (dag.get_task(task_id) for task_id in ids)
        assert isinstance(snapshot, CdcPipelineSnapshotOperator) and snapshot.tables == [table]
        assert snapshot.once and snapshot.done_task_id == f"{name}.snapshot_done"
        assert isinstance(done, CdcSnapshotSensor) and isinstance(caught_up, CdcOffsetSensor)
        assert isinstance(apply, CdcSparkApplyOperator) and apply.tables == [table]
        assert apply.job.schema_change_policy == "evolve" and apply.target_conn_id == "pg_shop_replica"
        # The chain, each step after the one before; a snapshot skipped (done once) does not stop the rest.
        assert snapshot.upstream_task_ids == {"start_engine"}
        assert done.upstream_task_ids == {snapshot.task_id}
        assert caught_up.upstream_task_ids == {done.task_id} and apply.upstream_task_ids == {caught_up.task_id}
        assert (caught_up.trigger_rule, apply.trigger_rule) == ("none_failed", "none_failed")
        # The table's asset: where the snapshot's completion is recorded, and read back by the policy.
        assert [a.uri for a in done.outlets] == [f"cdc://shop/{table}"] == [a.uri for a in snapshot.inlets]
    assert isinstance(dag.get_task("start_engine"), CdcStartEngineOperator)
    assert dag.start_date == datetime(2026, 1, 1, tzinfo=UTC) and dag.schedule is None


def test_a_mistake_in_the_file_is_an_import_error_naming_line_and_key(tmp_path: Path) -> None:
    path = copy_example(tmp_path)
    path.write_text(path.read_text().replace("  policy: initial", "  policy: once"))
    dagbag = bag(tmp_path)
    assert dagbag.dags == {}
    [error] = dagbag.import_errors.values()
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "policy: once" in text)
    assert f"shop.yaml:{line}: snapshot.policy: Input should be 'initial', 'backfill' or 'none'" in error


PLAIN = """\
dag_id: plain
source: {conn_id: pg}
backend: {conn_id: cdc, topic_prefix: app, start: false}
tables:
  - app.users
  - {name: app.events, additional_conditions: "kind = 'click'", target: lake.events}
snapshot:
  policy: backfill
  additional_conditions: "updated_at >= '{{ data_interval_start }}'"
apply: {target_url: "delta:/tmp/lake", lanes: 3}
"""


def test_backfill_filters_each_table_and_a_table_can_be_mapped_to_its_target() -> None:
    dag = CdcPipeline(parse_pipeline(PLAIN)).dag()
    assert "start_engine" not in dag.task_dict  # backend.start: false
    users, events = dag.get_task("app_users.snapshot"), dag.get_task("app_events.snapshot")
    assert users.additional_conditions == "updated_at >= '{{ data_interval_start }}'"
    assert events.additional_conditions == "kind = 'click'"  # the table's own filter wins
    assert not users.once and users.inlets == []
    assert dag.get_task("app_events.apply").job.table_map == {"app.events": "lake.events"}
    assert dag.get_task("app_events.apply").job.target_url == "delta:/tmp/lake"
    assert dag.get_task("app_users.apply").job.lanes == 3


def test_policy_none_waits_and_applies_only() -> None:
    text = PLAIN.replace("policy: backfill", "policy: none")
    text = text.replace("  additional_conditions: \"updated_at >= '{{ data_interval_start }}'\"\n", "")
    text = text.replace(", additional_conditions: \"kind = 'click'\"", "")
    dag = CdcPipeline(parse_pipeline(text)).dag()
    assert sorted(dag.task_dict) == [
        "app_events.apply",
        "app_events.caught_up",
        "app_users.apply",
        "app_users.caught_up",
    ]
    assert dag.get_task("app_users.caught_up").upstream_task_ids == set()


def test_the_task_group_factory_puts_the_pipeline_in_a_dag_of_ones_own(tmp_path: Path) -> None:
    pipeline = CdcPipeline.from_yaml(copy_example(tmp_path))
    with DAG("mine", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        first = CdcOffsetSensor(task_id="prepare", cdc_conn_id="cdc_shop")
        group = pipeline.task_group("shop")
        first >> group
    assert group.group_id == "shop"
    assert sorted(group.children) == ["shop.public_customers", "shop.public_orders", "shop.start_engine"]
    snapshot = dag.get_task("shop.public_orders.snapshot")
    assert snapshot.done_task_id == "shop.public_orders.snapshot_done"
    assert dag.get_task("shop.start_engine").upstream_task_ids == {"prepare"}


def test_the_tables_a_snapshots_notifications_name() -> None:
    """What the snapshot task reads to learn that the instance added its table to a running
    snapshot: the IN_PROGRESS list and a table scan's collection (the engine's own log lines)."""
    from airflow_cdc.engine.notifications import INCREMENTAL, Notification
    from airflow_cdc.triggers.progress import tables_named

    progress = Notification(
        INCREMENTAL, "IN_PROGRESS", {"data_collections": "public.orders, public.customers", "maximum_key": "2000"}
    )
    scanned = Notification(
        INCREMENTAL,
        "TABLE_SCAN_COMPLETED",
        {"data_collection": "public.customers", "scanned_collection": "public.customers", "status": "SUCCEEDED"},
    )
    assert tables_named(progress) == {"public.orders", "public.customers"}
    assert tables_named(scanned) == {"public.customers"}
    assert tables_named(Notification(INCREMENTAL, "COMPLETED", {"connector_name": "shop"})) == set()
