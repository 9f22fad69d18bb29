"""A declared pipeline rendered into Airflow: a DAG, or a task group in a DAG of the user's
(ADR 0029).

Plan first, then render: :class:`CdcPipeline` holds the validated spec and the resolved tables
(plain data); :meth:`CdcPipeline.dag` and :meth:`CdcPipeline.task_group` turn them into the
provider's operators and sensors - the same ones a hand-written DAG uses
(``dags/example_cdc_pipeline.py``), nothing new but the snapshot that runs once.

Each table is a task group of its own, named after it (``public.orders`` → ``public_orders``)::

    start_engine >> [public_orders: snapshot >> snapshot_done >> caught_up >> apply, ...]

so the grid shows which table failed, and clearing one group reruns that table alone: its
snapshot, its wait, its Spark job on its own checkpoint (``<dag_id>.<group>.apply``).
"""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, TaskGroup

from airflow_cdc.assets import table_asset
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.operators.spark import CdcSparkApplyOperator
from airflow_cdc.pipeline.catalog import TableLister, airflow_catalog, resolve_tables
from airflow_cdc.pipeline.spec import PipelineSpec, TableSpec, group_id, load_pipeline_file
from airflow_cdc.pipeline.tasks import CdcPipelineSnapshotOperator
from airflow_cdc.sensors.offset import CdcOffsetSensor
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor
from airflow_cdc.spark.job_config import ApplyConfig

__all__ = ["CdcPipeline", "pipeline_dag"]

#: A table's group goes on past a snapshot skipped by policy ``initial``, not past a failure.
AFTER_SNAPSHOT = "none_failed"
#: Seconds between a deferred sensor's looks at the instance.
POLL_SECONDS = 2.0


class CdcPipeline:
    """A pipeline declared once (a YAML file, or a :class:`PipelineSpec`), rendered as tasks.

    ::

        pipeline = CdcPipeline.from_yaml("dags/pipelines/shop.yaml")
        dag = pipeline.dag()                     # a DAG of its own, or, in a DAG of yours:
        with DAG("mine", schedule=None) as dag:
            prepare >> pipeline.task_group()     # one group holding the pipeline

    :param spec: the validated pipeline.
    :param cache_dir: where a ``table_pattern``'s resolved tables are kept (default
        ``$AIRFLOW_HOME/cdc/pipelines``).
    :param lister: how the source's tables are listed (default: its Airflow connection's SQL hook).
    """

    def __init__(
        self, spec: PipelineSpec, *, cache_dir: Path | None = None, lister: TableLister = airflow_catalog
    ) -> None:
        self.spec = spec
        self.cache_dir = cache_dir
        self.lister = lister

    @classmethod
    def from_yaml(cls, path: str | Path, **kwargs: Any) -> CdcPipeline:
        """The pipeline of a YAML file (``PipelineSpecError`` names each problem's line and key)."""
        return cls(load_pipeline_file(path), **kwargs)

    def tables(self) -> list[TableSpec]:
        """The tables: as listed, or those the pattern finds (cached, see ``catalog``)."""
        if self.spec.tables is not None:
            return list(self.spec.tables)
        assert self.spec.table_pattern is not None  # the spec has one or the other
        names = resolve_tables(
            self.spec.dag_id,
            self.spec.source.conn_id,
            self.spec.table_pattern,
            cache_dir=self.cache_dir,
            lister=self.lister,
        )
        return [TableSpec(name=name) for name in names]

    def dag(self, **overrides: Any) -> DAG:
        """The pipeline's own DAG; ``overrides`` go to ``DAG(...)`` over the file's settings."""
        spec = self.spec
        settings: dict[str, Any] = {
            "dag_id": spec.dag_id,
            "description": spec.description or f"CDC pipeline {spec.dag_id}, declared in YAML",
            "schedule": spec.schedule,
            "start_date": _as_datetime(spec.start_date),
            "catchup": spec.catchup,
            "tags": spec.tags,
            **overrides,
        }
        with DAG(**settings) as dag:
            self._render()
        return dag

    def task_group(self, group_id: str | None = None, **kwargs: Any) -> TaskGroup:
        """The pipeline as one task group, in the DAG (or group) being defined."""
        with TaskGroup(group_id or self.spec.dag_id, **kwargs) as group:
            self._render()
        return group

    def _render(self) -> None:
        start = None
        if self.spec.backend.start:
            start = CdcStartEngineOperator(
                task_id="start_engine",
                cdc_conn_id=self.spec.backend.conn_id,
                source_conn_id=self.spec.source.conn_id,
            )
        for table in self.tables():
            first = self._table_group(table)
            if start is not None:
                start >> first

    def _table_group(self, table: TableSpec) -> TaskGroup:
        spec = self.spec
        conn = spec.backend.conn_id
        asset = table_asset(spec.backend.topic_prefix, table.name)
        with TaskGroup(group_id(table.name), tooltip=f"{table.name}: snapshot, wait, apply") as group:
            chain: list[Any] = []
            if spec.snapshot.policy != "none":
                chain += self._snapshot_tasks(table, asset, f"{group.group_id}.snapshot_done")
            chain.append(
                CdcOffsetSensor(
                    task_id="caught_up",
                    cdc_conn_id=conn,
                    target="current",
                    deferrable=True,
                    poke_interval=POLL_SECONDS,
                    timeout=3600,
                    trigger_rule=AFTER_SNAPSHOT,
                )
            )
            chain.append(self._apply(table))
            for upstream, downstream in itertools.pairwise(chain):
                upstream >> downstream
        return group

    def _snapshot_tasks(self, table: TableSpec, asset: Any, done_task_id: str) -> list[Any]:
        snapshot = self.spec.snapshot
        once = snapshot.policy == "initial"
        send = CdcPipelineSnapshotOperator(
            task_id="snapshot",
            cdc_conn_id=self.spec.backend.conn_id,
            tables=[table.name],
            snapshot_type=snapshot.type,
            additional_conditions=self._conditions(table),
            once=once,
            done_task_id=done_task_id,
            inlets=[asset] if once else [],
        )
        done = CdcSnapshotSensor(
            task_id="snapshot_done",
            cdc_conn_id=self.spec.backend.conn_id,
            signal_id=send.output,  # type: ignore[arg-type]  # an XComArg, rendered to the id
            stall_timeout=snapshot.stall_timeout,
            deferrable=True,
            poke_interval=POLL_SECONDS,
            outlets=[asset],
        )
        return [send, done]

    def _conditions(self, table: TableSpec) -> str | None:
        """The table's own filter, else the snapshot's (one for all, or this table's entry)."""
        if table.additional_conditions:
            return table.additional_conditions
        given = self.spec.snapshot.additional_conditions
        if isinstance(given, dict):
            return given.get(table.name)
        return given

    def _apply(self, table: TableSpec) -> CdcSparkApplyOperator:
        apply = self.spec.apply
        job = ApplyConfig(
            target_url=apply.target_url,
            lanes=apply.lanes,
            schema_change_policy=apply.schema_change_policy,
            table_map={table.name: table.target} if table.target else {},
        )
        return CdcSparkApplyOperator(
            task_id="apply",
            cdc_conn_id=self.spec.backend.conn_id,
            tables=[table.name],
            target_conn_id=apply.target_conn_id,
            spark_conn_id=apply.spark_conn_id,
            job=job,
            trigger_rule=AFTER_SNAPSHOT,
        )


def _as_datetime(value: date | datetime) -> datetime:
    """YAML reads ``2026-01-01`` as a date; Airflow wants a datetime (UTC when no zone is given)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def pipeline_dag(path: str | Path, **kwargs: Any) -> DAG:
    """The DAG of a pipeline file: ``dag = pipeline_dag(Path(__file__).parent / "pipelines/shop.yaml")``."""
    return CdcPipeline.from_yaml(path, **kwargs).dag()
