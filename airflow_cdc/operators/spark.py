"""Run the Spark apply job from a DAG: captured changes → target table, exactly once.

Thin: the job is ``airflow_cdc.spark.apply`` and the launching is ``airflow_cdc.spark.submit``,
their settings the config groups ``ApplyConfig`` and ``SubmitConfig`` (``spark.job_config``);
this operator renders their templates, fills them from Airflow connections, hands the job its
settings as one JSON document, streams the driver's log into the task log, and returns what the
job did as XCom. It does not use the Spark provider package (that one installs its own pyspark
over ours).

On a cluster (``SubmitConfig(master="spark://…")``, ``"yarn"``, ``"k8s://…"``) the driver runs
in the task (client deploy mode), so its log streams and killing the task ends the job; the Kafka
source's jars and a zip of ``airflow_cdc`` are shipped to the executors (ADR 0015).

Before Spark starts (it takes half a minute) the target is checked (``spark.preflight``) and the
checkpoint taken (``spark.checkpoint_lock``), so that a wrong password or a second run on the same
checkpoint fails in a second with its cause as the first line, not after start-up in JVM traces.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_cdc.spark.checkpoint_lock import CheckpointBusy, CheckpointLock, Holder, lock_file
from airflow_cdc.spark.deprecated_arguments import regroup
from airflow_cdc.spark.job_config import ApplyConfig, SubmitConfig
from airflow_cdc.spark.preflight import TargetRefused, TargetUnreachable, check_before_start
from airflow_cdc.spark.targets import LAKE_SCHEMES, SQL_SCHEMES, scheme_of

try:
    from airflow.exceptions import AirflowProviderDeprecationWarning as _DEPRECATED
except ImportError:  # an Airflow without the provider's warning class
    _DEPRECATED = DeprecationWarning  # type: ignore[misc, assignment]

if TYPE_CHECKING:
    import jinja2

    from airflow_cdc.spark.submit import Follower

__all__ = ["ApplyConfig", "CdcSparkApplyOperator", "SubmitConfig", "connection_url"]

_URL_SCHEMES = {"postgres": "postgresql", "postgresql": "postgresql", "mysql": "mysql"}
#: Linux's limit on one command-line argument (MAX_ARG_STRLEN), which holds the job's document.
_MAX_ARGUMENT = 128 * 1024


def connection_url(conn_id: str) -> str:
    """A ``postgres`` or ``mysql`` Airflow connection as the job's target URL."""
    conn = BaseHook.get_connection(conn_id)
    scheme = _URL_SCHEMES.get(conn.conn_type or "")
    if scheme is None:
        raise AirflowException(
            f"connection {conn_id!r} is of type {conn.conn_type!r}: the apply job writes to a postgres or mysql "
            "connection (or give job=ApplyConfig(target_url='delta:PATH' / 'parquet:PATH' / 'iceberg:PATH'))"
        )
    return conn.get_uri().replace(f"{conn.conn_type}://", f"{scheme}://", 1).split("?")[0]


def _job_field(name: str) -> property:
    """An operator attribute that is ``job``'s field ``name``; setting it replaces ``job``."""

    def get(self: CdcSparkApplyOperator) -> Any:
        return getattr(self.job, name)

    def put(self: CdcSparkApplyOperator, value: Any) -> None:
        self.job = dataclasses.replace(self.job, **{name: value})

    return property(get, put, doc=f"``job.{name}``")


class CdcSparkApplyOperator(BaseOperator):
    """Apply captured changes to a target with the Spark job, then exit.

    With ``trigger="available-now"`` (the default) the job catches up with everything captured
    so far and exits: one run per DAG run. ``"continuous"`` runs for ``max_duration`` seconds.
    Rerunning is safe: Spark's checkpoint and the target's position guard make a replayed batch a
    no-op, so a killed run, retried, neither loses nor applies twice.

    Overlapping runs (a DAG run starting while the previous one still applies, or two tasks given
    the same ``checkpoint``) must not share Spark's checkpoint. Airflow starts one instance of this
    task at a time (``max_active_tis_per_dag=1`` by default here): a later DAG run's apply waits,
    queued, until the earlier one ended. Whatever else reaches the checkpoint while a job holds it
    (another DAG's task on the same path, an ``airflow tasks test``, a run when the default was
    overridden) fails at once with the holder named (``checkpoint_lock_timeout``); retried, it runs
    once the holder ended. The hold is ``flock`` on ``<checkpoint>.lock`` beside a checkpoint on a file
    system (a shared mount included): the kernel drops it when the task's process ends, however it
    ends, so no run leaves it held. A checkpoint on ``hdfs://``, ``s3a://`` and the like has no such
    lock: there only ``max_active_tis_per_dag`` keeps runs apart (the task log says so), so keep it
    and give tasks distinct checkpoints.

    Before Spark starts the target is checked with the job's own rule, so a wrong password, a
    missing database or table fails in a second (not retried: ``AirflowFailException``) and a target
    that does not answer fails retriably, the cause first: a ``postgres``/``mysql`` connection is
    opened with its credentials and the target tables of ``tables``, ``table_map``'s keys and
    ``lane_groups`` must exist (the job adds ``_cdc_position`` where it is missing, as its first batch
    would); on a local master, a Delta/Parquet root on a local path must be writable.

    The job's settings come as two groups (``airflow_cdc.spark.job_config``, where each field is
    described), the rest are Airflow's::

        CdcSparkApplyOperator(
            task_id="apply_changes",
            cdc_conn_id="cdc_shop",
            tables=["public.orders"],
            target_conn_id="pg_shop_replica",
            job=ApplyConfig(lanes=4, table_map={"public.orders": "sales.orders"}),
            submit=SubmitConfig(master="spark://spark-master:7077", conf={"spark.driver.host": "10.0.0.5"}),
        )

    The separate keyword arguments of earlier releases (``lanes=4``, ``master=...``, ...) still
    work, with a deprecation warning that names the group form to write instead.

    :param job: what the job does (``ApplyConfig``: source, topics, ``target_url``, lanes, trigger,
        value settings, ``checkpoint``, ...). Its ``template_fields`` are rendered.
    :param submit: how spark-submit launches it (``SubmitConfig``: master, conf, jars, packages,
        interpreters, ``ship_package``). ``master`` and ``conf`` are rendered.
    :param cdc_conn_id: the capturing engine instance (``cdc_engine``): what it writes to
        (changelog directory or Kafka brokers), its topics and value settings are read from its
        running configuration, so the DAG names only the tables; fields given in ``job`` win.
    :param tables: the captured tables to apply (``schema.table``), with ``cdc_conn_id``; their
        target tables are checked before Spark starts (with or without ``cdc_conn_id``).
    :param kafka_conn_id: an Airflow ``kafka`` connection whose extra holds Kafka client settings
        (``sasl.password``, ...) over the instance's sink settings, which its API gives without
        passwords; the job gets them in its environment, never on its command line.
    :param target_conn_id: a ``postgres`` or ``mysql`` connection to write to (or ``job.target_url``).
    :param spark_conn_id: instead of ``submit.master``: an Airflow connection of type ``spark`` (the
        Spark provider's: ``host`` ``local[2]``, ``yarn``, ``k8s://…`` or ``spark://host`` with
        the ``port``), so that a DAG moves to a cluster by changing the connection only. On a
        cluster, ``checkpoint`` must be storage every Airflow worker that may run this task shares
        (only the driver, i.e. the task, writes it), and Delta/Parquet targets storage the
        executors share. Only standalone masters are tested; ``yarn`` and ``k8s://`` get the same
        spark-submit options (their cluster comes from ``HADOOP_CONF_DIR`` / the URL).
    :param checkpoint_lock_timeout: seconds to wait for another run that holds the checkpoint to
        end. The default 0 fails at once, naming that run: the failure is retriable, so the task's
        ``retries`` / ``retry_delay`` do the waiting without keeping a worker slot busy.
    :param check_target: check the target from the worker before Spark starts (default). Turn it
        off only when the target is reachable from the executors but not from the Airflow worker.
    :param max_active_tis_per_dag: Airflow's limit on concurrent instances of this task across DAG
        runs; 1 by default here, so two runs never apply at once (None lifts it).
    """

    template_fields: Sequence[str] = ("tables", "job", "submit")
    template_fields_renderers = {"job": "json", "submit": "json"}
    ui_color = "#fdf2e9"

    def __init__(
        self,
        *,
        job: ApplyConfig | None = None,
        submit: SubmitConfig | None = None,
        cdc_conn_id: str | None = None,
        tables: Sequence[str] = (),
        kafka_conn_id: str | None = None,
        target_conn_id: str | None = None,
        spark_conn_id: str | None = None,
        checkpoint_lock_timeout: float = 0.0,
        check_target: bool = True,
        max_active_tis_per_dag: int | None = 1,
        **kwargs: Any,
    ) -> None:
        groups = regroup(kwargs, job, submit)  # the old keyword arguments, out of BaseOperator's
        super().__init__(max_active_tis_per_dag=max_active_tis_per_dag, **kwargs)
        if groups.advice:
            # stacklevel 2, the DAG file's line: Airflow adds the frames of its wrapper around
            # __init__ itself (it swaps this module's ``warnings`` for one that does).
            warnings.warn(f"{type(self).__name__} {self.task_id!r}: {groups.advice}", _DEPRECATED, stacklevel=2)
        self.job = groups.job
        self.submit = groups.submit
        if bool(target_conn_id) == bool(self.job.target_url):
            raise ValueError(
                "give exactly one of target_conn_id (postgres/mysql) or job=ApplyConfig(target_url=...) "
                "(delta:/parquet:/iceberg:)"
            )
        self.spark_conn_id = spark_conn_id
        self.cdc_conn_id = cdc_conn_id
        self.tables = list(tables)
        self.kafka_conn_id = kafka_conn_id
        #: Kafka client settings of the instance's sink (no secret: its API leaves them out).
        self.kafka_options: dict[str, str] = {}
        self.target_conn_id = target_conn_id
        self.checkpoint_lock_timeout = checkpoint_lock_timeout
        self.check_target = check_target
        self._follower: Follower | None = None
        #: Known from the instance's config (``cdc_conn_id``); None: not known.
        self.changes_have_schemas: bool | None = None

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Airflow renders a nested object's ``template_fields`` by setting them on it; the config
        groups are frozen, so they are rendered into a copy (checked again as it is made)."""
        if isinstance(content, ApplyConfig | SubmitConfig):
            env = jinja_env or self.get_template_env()
            oids = set() if seen_oids is None else seen_oids
            rendered = {
                name: self.render_template(value, context, env, oids)
                for name in content.template_fields
                if (value := getattr(content, name))
            }
            return dataclasses.replace(content, **rendered)
        return super().render_template(content, context, jinja_env, seen_oids)

    # use_instance() fills what the DAG left out under these names: each reads and replaces a
    # field of ``job``.
    source = _job_field("source")
    topics = _job_field("topics")
    bootstrap_servers = _job_field("bootstrap_servers")
    changelog_dir = _job_field("changelog_dir")
    settings = _job_field("settings")

    def use_instance(self) -> None:
        """Fill what the DAG left out from the capturing instance's running configuration."""
        from airflow_cdc.hooks.engine import CdcEngineHook
        from airflow_cdc.spark.apply import inputs_from_engine_config

        # Its running configuration with where its events go (a connector on Connect: the
        # cluster's Kafka, which its connection names).
        with CdcEngineHook(str(self.cdc_conn_id)).get_backend() as backend:
            config = backend.delivery_config()
        try:
            derived = inputs_from_engine_config(config, self.tables)
        except ValueError as exc:
            raise AirflowException(f"{exc} (instance of connection {self.cdc_conn_id!r})") from exc
        self.source = self.source or derived["source"]
        self.topics = self.topics or derived["topics"]
        self.bootstrap_servers = self.bootstrap_servers or derived.get("bootstrap_servers")
        self.changelog_dir = self.changelog_dir or derived.get("changelog_dir")
        self.kafka_options = {str(k): str(v) for k, v in (derived.get("kafka_options") or {}).items()}
        self.settings = {**derived["settings"], **self.settings}
        # Whether the instance's changes carry their schemas, from which the job creates tables.
        self.changes_have_schemas = str(config.get("value.converter.schemas.enable", "false")).lower() == "true"

    def job_args(self, checkpoint: str) -> list[str]:
        """The job's command line: ``--config-json`` and the job as one JSON document.

        One argument rather than a file: an application argument reaches the driver wherever
        spark-submit starts it - in this task (client mode, ADR 0015), or on a cluster node in
        a cluster deploy mode - with nothing to ship (``--files``), no path to resolve in the
        driver's working directory and nothing to clean up. ``ps`` shows it, so it holds no secret:
        the target URL and Kafka passwords travel in the job's environment. Linux takes up to
        128 KiB in one argument: thousands of tables."""
        job = dataclasses.replace(
            self.job,
            source=self.job.source or "kafka",
            checkpoint=checkpoint,
            target_url=None,  # in the environment (TARGET_URL_ENV), with a SQL URL's password
            kafka_options={**self.kafka_options, **self.job.kafka_options},
            app_name=self.job.app_name or f"cdc-apply-{self.dag_id}-{self.task_id}",
        )
        document = json.dumps(job.to_document(), separators=(",", ":"))
        if len(document.encode()) >= _MAX_ARGUMENT:  # its limit counts the closing NUL
            raise AirflowFailException(
                f"the job's document is {len(document.encode())} bytes, over the {_MAX_ARGUMENT} one command-line "
                "argument may hold: split its tables over several apply tasks"
            )
        return ["--config-json", document]

    def kafka_secrets(self) -> dict[str, str]:
        """The ``kafka_conn_id`` connection's client settings, for the job's environment."""
        if not self.kafka_conn_id:
            return {}
        extra = BaseHook.get_connection(self.kafka_conn_id).extra_dejson
        return {str(k): str(v) for k, v in extra.items()}

    def connection_master(self) -> str:
        """The master of the ``spark`` connection (``host``, with ``port`` for ``spark://``),
        checked as a literal master is."""
        from airflow.sdk import BaseHook

        from airflow_cdc.spark.cluster import SparkMasterError, check_master

        conn = BaseHook.get_connection(str(self.spark_conn_id))
        master = str(conn.host or "").strip()
        if conn.port and master.startswith("spark://") and master.count(":") == 1:
            master = f"{master}:{conn.port}"
        try:
            check_master(master, self.submit.deploy_mode)
        except SparkMasterError as exc:
            raise AirflowFailException(f"connection {self.spark_conn_id!r}: {exc}") from exc
        return master

    def default_checkpoint(self) -> str:
        home = os.environ.get("AIRFLOW_HOME", str(Path.home() / "airflow"))
        return str(Path(home) / "cdc" / "checkpoints" / f"{self.dag_id}.{self.task_id}")

    def connector_jars(self, target: str) -> list[str]:
        """The jars ``scripts/setup`` resolved, when the Kafka source or a Delta or Iceberg target needs them."""
        from airflow_cdc.spark.apply import connector_jars

        needs = (self.job.source or "kafka") == "kafka" or scheme_of(target) in ("delta", "iceberg")
        if not needs:
            return []
        # Iceberg's runtime is 48 MB that every executor would fetch: shipped for an Iceberg target only.
        iceberg = scheme_of(target) == "iceberg"
        return [jar for jar in connector_jars() if iceberg or "iceberg-spark-runtime" not in Path(jar).name]

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_cdc.spark.apply import KAFKA_OPTIONS_ENV
        from airflow_cdc.spark.cluster import SparkMasterError, SparkMasterUnreachable, storage_warnings
        from airflow_cdc.spark.submit import Follower, SparkJobError, SparkSubmit

        if self.cdc_conn_id:
            self.use_instance()
        if self.spark_conn_id:
            self.submit = dataclasses.replace(self.submit, master=self.connection_master())
        target = connection_url(self.target_conn_id) if self.target_conn_id else str(self.job.target_url)
        if scheme_of(target) not in (*SQL_SCHEMES, *LAKE_SCHEMES):
            raise AirflowException(f"target_url {self.job.target_url!r}: use delta:PATH, parquet:PATH or iceberg:PATH")
        if self.check_target:
            self.preflight(target)
        checkpoint = self.job.checkpoint or self.default_checkpoint()
        master = self.submit.master
        submit = SparkSubmit.from_config(
            self.submit,
            self.job_args(checkpoint),
            connector_jars=self.connector_jars(target),
            target_url=target,
            env={KAFKA_OPTIONS_ENV: json.dumps(secrets)} if (secrets := self.kafka_secrets()) else {},
        )
        self.log.info("spark-submit: master %s, checkpoint %s", master, checkpoint)
        for warning in storage_warnings(master, checkpoint, target):
            self.log.warning("%s", warning)
        try:
            with self.hold(checkpoint, context):
                self._follower = Follower(submit, lambda line: self.log.info("%s", line))
                result = self._follower.run()
        except SparkMasterError as exc:  # a wrong URL stays wrong: no retry
            raise AirflowFailException(str(exc)) from exc
        except (SparkJobError, SparkMasterUnreachable) as exc:  # a failed job, a master down: retried
            raise AirflowException(str(exc)) from exc
        self.log.info(
            "applied %s records in %s batches: %s upserted, %s deleted",
            result.get("records"),
            result.get("batches"),
            result.get("upserted", 0),
            result.get("deleted", 0),
        )
        return result

    def preflight(self, target: str) -> None:
        """The target's refusal fails the task for good; its silence, retriably."""
        from airflow_cdc.spark.cluster import is_local

        job = self.job
        label = f"target connection {self.target_conn_id!r}" if self.target_conn_id else f"target {job.target_url!r}"
        named = [*self.tables, *job.table_map, *(table for group in job.lane_groups for table in group)]
        try:
            check_before_start(
                target,
                label,
                list(dict.fromkeys(named)),
                dict(job.table_map),
                writes_here=is_local(self.submit.master),
                # A missing table is the job's to create, unless the policy creates none or the
                # instance's changes (when known) carry no schema to create it from.
                creates=job.schema_change_policy != "exception" and self.changes_have_schemas is not False,
            )
        except TargetRefused as exc:
            raise AirflowFailException(str(exc)) from exc
        except TargetUnreachable as exc:
            raise AirflowException(str(exc)) from exc

    def hold(self, checkpoint: str, context: Context) -> AbstractContextManager[Any]:
        """The checkpoint's lock for the job's duration (nothing to hold off a file system)."""
        path = lock_file(checkpoint)
        if path is None:
            self.log.info(
                "checkpoint %s is not on a file system, so no lock guards it: max_active_tis_per_dag=%s alone "
                "keeps runs of this task apart, and no other task may use this checkpoint",
                checkpoint,
                self.max_active_tis_per_dag,
            )
            return nullcontext()
        ti = context.get("ti")
        run_id = str(context.get("run_id") or getattr(ti, "run_id", None) or "(none)")
        holder = Holder.this_process(self.dag_id, run_id, self.task_id, getattr(ti, "try_number", None))
        try:
            lock = CheckpointLock(path, holder).acquire(self.checkpoint_lock_timeout)
        except CheckpointBusy as exc:  # the holder ends: a retry may run
            raise AirflowException(str(exc)) from exc
        if lock.previous is not None:
            self.log.warning("the checkpoint's last holder ended without releasing it: %s", lock.previous.describe())
        self.log.info("holding checkpoint %s (lock %s)", checkpoint, path)
        return lock

    def on_kill(self) -> None:
        if self._follower is not None:
            self._follower.kill()
