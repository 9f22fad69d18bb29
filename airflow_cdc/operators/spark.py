"""Run the Spark apply job from a DAG: captured changes → target table, exactly once.

Thin: the job is ``airflow_cdc.spark.apply`` and the launching is ``airflow_cdc.spark.submit``;
this operator turns Airflow connections and templated arguments into their inputs, streams the
driver's log into the task log, and returns what the job did as XCom. It does not use the Spark
provider package (that one installs its own pyspark over ours).

On a cluster (``master="spark://…"``, ``"yarn"``, ``"k8s://…"``) the driver runs in the task
(client deploy mode), so its log streams and killing the task ends the job; the Kafka source's
jars and a zip of ``airflow_cdc`` are shipped to the executors (ADR 0015).

Before Spark starts (it takes half a minute) the target is checked (``spark.preflight``) and the
checkpoint taken (``spark.checkpoint_lock``), so that a wrong password or a second run on the same
checkpoint fails in a second with its cause as the first line, not after start-up in JVM traces.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_cdc.spark.checkpoint_lock import CheckpointBusy, CheckpointLock, Holder, lock_file
from airflow_cdc.spark.preflight import TargetRefused, TargetUnreachable, check_before_start
from airflow_cdc.spark.targets import LAKE_SCHEMES, SQL_SCHEMES, scheme_of

if TYPE_CHECKING:
    from airflow_cdc.spark.submit import Follower

_URL_SCHEMES = {"postgres": "postgresql", "postgresql": "postgresql", "mysql": "mysql"}


def connection_url(conn_id: str) -> str:
    """A ``postgres`` or ``mysql`` Airflow connection as the job's target URL."""
    conn = BaseHook.get_connection(conn_id)
    scheme = _URL_SCHEMES.get(conn.conn_type or "")
    if scheme is None:
        raise AirflowException(
            f"connection {conn_id!r} is of type {conn.conn_type!r}: the apply job writes to a postgres or mysql "
            "connection (or give target_url='delta:PATH' / 'parquet:PATH')"
        )
    return conn.get_uri().replace(f"{conn.conn_type}://", f"{scheme}://", 1).split("?")[0]


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

    :param cdc_conn_id: the capturing engine instance (``cdc_engine``): what it writes to
        (changelog directory or Kafka brokers), its topics and value settings are read from its
        running configuration, so the DAG names only the tables; explicit arguments win.
    :param tables: the captured tables to apply (``schema.table``), with ``cdc_conn_id``; their
        target tables are checked before Spark starts (with or without ``cdc_conn_id``).
    :param source: ``kafka`` (Spark's Kafka source, jars from ``scripts/setup``; the default),
        ``kafka-python`` (no jar needed) or ``changelog`` (the engine's changelog directory).
    :param topics: the CDC topics (Kafka), or the topic directories of the changelog.
    :param topic_pattern: a regex of topics instead of ``topics`` (Kafka only).
    :param bootstrap_servers: the Kafka brokers.
    :param changelog_dir: the engine's ``sink.changelog.dir``.
    :param kafka_conn_id: an Airflow ``kafka`` connection whose extra holds Kafka client settings
        (``sasl.password``, ...) over the instance's sink settings, which its API gives without
        passwords; the job gets them in its environment, never on its command line.
    :param target_conn_id: a ``postgres`` or ``mysql`` connection to write to.
    :param target_url: instead of a connection: ``delta:PATH`` or ``parquet:PATH``.
    :param table_map: source table → target table (default: the same ``schema.table``).
    :param lane_groups: lists of related tables applied in one lane, in source order.
    :param lanes: how many tables (or groups) apply in parallel.
    :param settings: the capturing connector's value modes (``decimal.handling.mode``, ...).
    :param checkpoint: Spark's checkpoint directory (default: under ``$AIRFLOW_HOME/cdc``), one per
        task: the job holds it exclusively while it runs.
    :param checkpoint_lock_timeout: seconds to wait for another run that holds the checkpoint to
        end. The default 0 fails at once, naming that run: the failure is retriable, so the task's
        ``retries`` / ``retry_delay`` do the waiting without keeping a worker slot busy.
    :param check_target: check the target from the worker before Spark starts (default). Turn it
        off only when the target is reachable from the executors but not from the Airflow worker.
    :param max_active_tis_per_dag: Airflow's limit on concurrent instances of this task across DAG
        runs; 1 by default here, so two runs never apply at once (None lifts it).
    :param trigger: ``available-now`` or ``continuous``.
    :param max_duration: seconds a continuous run lasts.
    :param max_records_per_batch: admission control per micro-batch.
    :param master: Spark master (``local[*]``, ``spark://host:port``, ``yarn``, ``k8s://…``). On
        a cluster, ``checkpoint`` must be storage every Airflow worker that may run this task
        shares (only the driver, i.e. the task, writes it), and Delta/Parquet targets storage
        the executors share; the executors must reach the driver (``spark.driver.host``).
        Only standalone masters are tested; ``yarn`` and ``k8s://`` get the same spark-submit
        options (their cluster comes from ``HADOOP_CONF_DIR`` / the URL).
    :param spark_conn_id: instead of ``master``: an Airflow connection of type ``spark`` (the
        Spark provider's: ``host`` ``local[2]``, ``yarn``, ``k8s://…`` or ``spark://host`` with
        the ``port``), so that a DAG moves to a cluster by changing the connection only.
    :param deploy_mode: ``client`` (the default and the only one): the driver runs in this task.
    :param conf: extra ``--conf`` settings.
    :param jars: extra jars; the connector jars ``scripts/setup`` resolved are added for the
        ``kafka`` source and Delta targets (``--jars`` ships them to the executors).
    :param packages: Maven coordinates for ``--packages``.
    :param py_files: extra ``--py-files``.
    :param python: the interpreter the driver runs in (default: the worker's), and the
        executors' unless ``executor_python`` is given.
    :param executor_python: the executors' interpreter on a cluster (``spark.pyspark.python``);
        it needs the target's driver (psycopg, pymysql), not ``airflow_cdc``.
    :param ship_package: ship ``airflow_cdc`` to the executors as a ``--py-files`` zip
        (default: on a cluster master, not on ``local``).
    """

    template_fields: Sequence[str] = (
        "tables",
        "topics",
        "topic_pattern",
        "bootstrap_servers",
        "changelog_dir",
        "target_url",
        "table_map",
        "settings",
        "checkpoint",
        "conf",
        "master",
    )
    template_fields_renderers = {"table_map": "json", "settings": "json", "conf": "json"}
    ui_color = "#fdf2e9"

    def __init__(
        self,
        *,
        cdc_conn_id: str | None = None,
        tables: Sequence[str] = (),
        source: str | None = None,
        topics: Sequence[str] | str = (),
        topic_pattern: str | None = None,
        bootstrap_servers: str | None = None,
        changelog_dir: str | None = None,
        kafka_conn_id: str | None = None,
        target_conn_id: str | None = None,
        target_url: str | None = None,
        table_map: Mapping[str, str] | None = None,
        lane_groups: Sequence[Sequence[str]] = (),
        lanes: int = 2,
        settings: Mapping[str, str] | None = None,
        checkpoint: str | None = None,
        trigger: str = "available-now",
        max_duration: float | None = None,
        max_records_per_batch: int | None = None,
        master: str = "local[*]",
        spark_conn_id: str | None = None,
        deploy_mode: str | None = None,
        conf: Mapping[str, str] | None = None,
        jars: Sequence[str] = (),
        packages: Sequence[str] = (),
        py_files: Sequence[str] = (),
        python: str | None = None,
        executor_python: str | None = None,
        ship_package: bool | None = None,
        checkpoint_lock_timeout: float = 0.0,
        check_target: bool = True,
        max_active_tis_per_dag: int | None = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_active_tis_per_dag=max_active_tis_per_dag, **kwargs)
        if bool(target_conn_id) == bool(target_url):
            raise ValueError("give exactly one of target_conn_id (postgres/mysql) or target_url (delta:/parquet:)")
        from airflow_cdc.spark.cluster import SparkMasterError, check_master

        try:  # a templated master is checked in execute()
            check_master("local" if "{{" in master else master, deploy_mode)
        except SparkMasterError as exc:
            raise ValueError(str(exc)) from exc
        self.spark_conn_id = spark_conn_id
        self.cdc_conn_id = cdc_conn_id
        self.tables = list(tables)
        self.source = source
        self.topics = topics
        self.topic_pattern = topic_pattern
        self.bootstrap_servers = bootstrap_servers
        self.changelog_dir = changelog_dir
        self.kafka_conn_id = kafka_conn_id
        #: Kafka client settings of the instance's sink (no secret: its API leaves them out).
        self.kafka_options: dict[str, str] = {}
        self.target_conn_id = target_conn_id
        self.target_url = target_url
        self.table_map = dict(table_map or {})
        self.lane_groups = [list(g) for g in lane_groups]
        self.lanes = lanes
        self.settings = dict(settings or {})
        self.checkpoint = checkpoint
        self.trigger = trigger
        self.max_duration = max_duration
        self.max_records_per_batch = max_records_per_batch
        self.master = master
        self.deploy_mode = deploy_mode
        self.conf = dict(conf or {})
        self.jars = list(jars)
        self.packages = list(packages)
        self.py_files = list(py_files)
        self.python = python
        self.executor_python = executor_python
        self.ship_package = ship_package
        self.checkpoint_lock_timeout = checkpoint_lock_timeout
        self.check_target = check_target
        self._follower: Follower | None = None

    def use_instance(self) -> None:
        """Fill what the DAG left out from the capturing instance's running configuration."""
        from airflow_cdc.hooks.engine import CdcEngineHook
        from airflow_cdc.spark.apply import inputs_from_engine_config

        hook = CdcEngineHook(str(self.cdc_conn_id))
        config = hook.running_config()
        if hook.settings.kafka_connect:
            # A Debezium connector writes to the Connect cluster's Kafka, which the connection names.
            config = {
                **config,
                "sink.type": "kafka",
                "sink.kafka.producer.bootstrap.servers": hook.settings.bootstrap_servers,
            }
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

    def job_args(self, checkpoint: str) -> list[str]:
        topics = self.topics.split(",") if isinstance(self.topics, str) else list(self.topics)
        args = ["--source", self.source or "kafka", "--checkpoint", checkpoint, "--lanes", str(self.lanes)]
        args += ["--trigger", self.trigger, "--app-name", f"cdc-apply-{self.dag_id}-{self.task_id}"]
        optional = {
            "--topics": ",".join(t.strip() for t in topics if t.strip()),
            "--topic-pattern": self.topic_pattern,
            "--bootstrap-servers": self.bootstrap_servers,
            "--changelog-dir": self.changelog_dir,
            "--max-duration": self.max_duration,
            "--max-records-per-batch": self.max_records_per_batch,
        }
        args += [part for flag, value in optional.items() if value for part in (flag, str(value))]
        args += [part for s, t in self.table_map.items() for part in ("--table-map", f"{s}={t}")]
        args += [part for g in self.lane_groups for part in ("--lane-group", ",".join(g))]
        args += [part for k, v in self.settings.items() for part in ("--setting", f"{k}={v}")]
        args += [part for k, v in self.kafka_options.items() for part in ("--kafka-option", f"{k}={v}")]
        return args

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
            check_master(master, self.deploy_mode)
        except SparkMasterError as exc:
            raise AirflowFailException(f"connection {self.spark_conn_id!r}: {exc}") from exc
        return master

    def default_checkpoint(self) -> str:
        home = os.environ.get("AIRFLOW_HOME", str(Path.home() / "airflow"))
        return str(Path(home) / "cdc" / "checkpoints" / f"{self.dag_id}.{self.task_id}")

    def connector_jars(self, target: str) -> list[str]:
        from airflow_cdc.spark.apply import connector_jars

        needs = (self.source or "kafka") == "kafka" or scheme_of(target) == "delta"
        return [*(connector_jars() if needs else []), *self.jars]

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_cdc.spark.apply import KAFKA_OPTIONS_ENV
        from airflow_cdc.spark.cluster import SparkMasterError, SparkMasterUnreachable, storage_warnings
        from airflow_cdc.spark.submit import Follower, SparkJobError, SparkSubmit

        if self.cdc_conn_id:
            self.use_instance()
        if self.spark_conn_id:
            self.master = self.connection_master()
        target = connection_url(self.target_conn_id) if self.target_conn_id else str(self.target_url)
        if scheme_of(target) not in (*SQL_SCHEMES, *LAKE_SCHEMES):
            raise AirflowException(f"target_url {self.target_url!r}: use delta:PATH or parquet:PATH")
        if self.check_target:
            self.preflight(target)
        checkpoint = self.checkpoint or self.default_checkpoint()
        submit = SparkSubmit(
            job_args=self.job_args(checkpoint),
            master=self.master,
            deploy_mode=self.deploy_mode,
            conf=self.conf,
            jars=self.connector_jars(target),
            packages=self.packages,
            py_files=self.py_files,
            executor_python=self.executor_python,
            ship_package=self.ship_package,
            target_url=target,
            python=self.python or sys.executable,
            env={KAFKA_OPTIONS_ENV: json.dumps(secrets)} if (secrets := self.kafka_secrets()) else {},
        )
        self.log.info("spark-submit: master %s, checkpoint %s", self.master, checkpoint)
        for warning in storage_warnings(self.master, checkpoint, target):
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

        label = f"target connection {self.target_conn_id!r}" if self.target_conn_id else f"target {self.target_url!r}"
        named = [*self.tables, *self.table_map, *(table for group in self.lane_groups for table in group)]
        try:
            check_before_start(
                target, label, list(dict.fromkeys(named)), self.table_map, writes_here=is_local(self.master)
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
