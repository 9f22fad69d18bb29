"""The apply job: read captured changes, keep the last per key, apply them to a target.

Run it with spark-submit (what ``CdcSparkApplyOperator`` does) or as ``python -m
airflow_cdc.spark.apply``; both parse the arguments, build the session, and run::

    source (raw frame) → flatten → latest change per key → lanes → target, per micro-batch

Exactly once: Spark's checkpoint commits a batch's offsets only after ``foreachBatch`` returned,
that is after every lane finished; a batch replayed after a crash finds the target rows already
at its positions, and the target's position guard turns it into a no-op (``frames.py``).

The arguments are either one JSON document, ``--config-json '{"topics": [...], ...}'``
(``job_config.ApplyConfig``'s fields, checked here: what the operator passes), or the flags of
``parser()`` for a run by hand; both become the same ``ApplyConfig``.

The last line on stdout is ``CDC_APPLY_RESULT {json}``: batches, records read, rows upserted and
deleted, and the end offsets; the operator turns it into XCom.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.engine.connector import source_kind
from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.kafka_settings import security_settings
from airflow_cdc.spark.job_config import ApplyConfig, JobConfigError
from airflow_cdc.spark.reading import SOURCES, SourceOptions

RESULT_MARKER = "CDC_APPLY_RESULT "
#: The target's address comes from here when not on the command line, so a password never
#: shows in ``ps`` (the operator sets it from an Airflow connection).
TARGET_URL_ENV = "CDC_APPLY_TARGET_URL"
#: Kafka client settings (a JSON object, Java/librdkafka names: ``sasl.password``, ...) that the
#: ``--kafka-option`` flags would show in ``ps``; the flags win.
KAFKA_OPTIONS_ENV = "CDC_APPLY_KAFKA_OPTIONS"


@dataclass
class ApplyJob:
    """Everything one run needs; ``parse_args`` builds it from the command line (``job_from_config``)."""

    source: SourceOptions
    target_url: str
    checkpoint: str
    table_map: dict[str, str] = field(default_factory=dict)
    lane_groups: dict[str, str] = field(default_factory=dict)
    lanes: int = 2
    #: Debezium's value settings of the capturing connector (decimal.handling.mode, ...).
    settings: dict[str, str] = field(default_factory=dict)
    trigger: str = "available-now"
    max_duration: float | None = None
    processing_time: str = "1 second"
    app_name: str = "airflow-cdc-apply"
    #: ``key`` (each key's latest change) or ``transaction`` (whole source transactions, ADR 0023).
    consistency: str = "key"
    #: Debezium's ``<topic.prefix>.transaction`` topic, read in ``transaction`` mode.
    transaction_topic: str | None = None
    #: ``transaction`` mode: batches a transaction may wait with later ones overtaking it before
    #: the job stops as stalled (``transaction_order.py``).
    transaction_stall_batches: int = 10
    #: What a source's schema change does to the target (``schema_policy.py``).
    schema_change_policy: str = "lenient"

    @property
    def target_settings(self) -> dict[str, str]:
        """The settings a target gets: the connector's value modes and the schema change policy."""
        from airflow_cdc.spark.schema_policy import SETTING

        return {**self.settings, SETTING: self.schema_change_policy}


def _pairs(values: Iterable[str], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"{what} takes NAME=VALUE, got {value!r}")
        out[name.strip()] = rest.strip()
    return out


def _groups(values: Iterable[str]) -> dict[str, str]:
    """``--lane-group a.orders,a.order_lines`` → both tables in the lane named after the first."""
    out = {}
    for value in values:
        tables = [t.strip() for t in value.split(",") if t.strip()]
        out.update({table: tables[0] for table in tables})
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="airflow_cdc.spark.apply", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--config-json",
        metavar="JSON",
        help="the whole job as one JSON object of ApplyConfig's fields (what the operator passes), instead of "
        "the flags below",
    )
    p.add_argument("--source", choices=SOURCES, default="kafka")
    p.add_argument("--bootstrap-servers")
    p.add_argument("--topics", default="", help="comma-separated topics (Kafka) or topic directories (changelog)")
    p.add_argument("--topic-pattern")
    p.add_argument("--changelog-dir")
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--max-records-per-batch", type=int)
    p.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--target-url",
        help="postgresql://, mysql://, delta:PATH, parquet:PATH, iceberg:PATH or iceberg:catalog=NAME "
        f"(else ${TARGET_URL_ENV})",
    )
    # Required unless --config-json gives it (parse_args says so as argparse would).
    p.add_argument("--checkpoint", help="Spark's checkpoint directory for this job (required)")
    p.add_argument("--table-map", action="append", default=[], metavar="SOURCE_TABLE=TARGET_TABLE")
    p.add_argument("--lane-group", action="append", default=[], metavar="T1,T2,...")
    p.add_argument("--lanes", type=int, default=2, help="write tasks in parallel (a table's keys spread over them)")
    p.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE", help="the connector's value modes")
    p.add_argument("--trigger", choices=("available-now", "continuous"), default="available-now")
    p.add_argument("--max-duration", type=float, help="seconds a continuous run lasts")
    p.add_argument("--processing-time", default="1 second")
    p.add_argument("--app-name", default="airflow-cdc-apply")
    p.add_argument(
        "--consistency",
        choices=("key", "transaction"),
        default="key",
        help="transaction: a reader of a SQL target never sees half a source transaction (ADR 0023)",
    )
    p.add_argument("--transaction-topic", help="default: <topic.prefix>.transaction")
    p.add_argument("--transaction-stall-batches", type=int, default=10, help="stop when a transaction waits this long")
    p.add_argument(
        "--schema-change-policy",
        choices=("evolve", "lenient", "ignore", "exception"),
        default="lenient",
        help="what a source's schema change does to the target (README: Schema changes)",
    )
    return p


def parse_args(argv: Sequence[str]) -> ApplyJob:
    p = parser()
    args = p.parse_args(argv)
    if args.config_json is not None:
        flags = [a.split("=", 1)[0] for a in argv if a.startswith("--") and not a.startswith("--config-json")]
        if flags:
            p.error(f"--config-json holds the whole job: leave out {', '.join(flags)}")
        return job_from_config(config_from_json(args.config_json))
    if not args.checkpoint:
        p.error("the following arguments are required: --checkpoint")
    try:
        config = ApplyConfig(
            source=args.source,
            bootstrap_servers=args.bootstrap_servers,
            topics=args.topics,
            topic_pattern=args.topic_pattern,
            changelog_dir=args.changelog_dir,
            starting_offsets=args.starting_offsets,
            max_records_per_batch=args.max_records_per_batch or None,  # 0 has always meant no limit
            kafka_options=_pairs(args.kafka_option, "--kafka-option"),
            target_url=args.target_url,
            checkpoint=args.checkpoint,
            table_map=_pairs(args.table_map, "--table-map"),
            lane_groups=args.lane_group,
            lanes=max(1, args.lanes),
            settings=_pairs(args.setting, "--setting"),
            trigger=args.trigger,
            max_duration=args.max_duration,
            processing_time=args.processing_time,
            app_name=args.app_name,
            consistency=args.consistency,
            transaction_topic=args.transaction_topic,
            transaction_stall_batches=args.transaction_stall_batches,
            schema_change_policy=args.schema_change_policy,
        )
    except JobConfigError as exc:
        raise SystemExit(str(_by_flag(exc))) from None
    return job_from_config(config)


#: ``ApplyConfig`` fields whose flag is not ``--`` and the field's name with dashes.
_FLAGS = {"lane_groups": "--lane-group", "settings": "--setting", "kafka_options": "--kafka-option"}


def _by_flag(exc: JobConfigError) -> ConfigError:
    """The problems of a run by hand, named by the flags it was given."""
    problems = []
    for problem in exc.problems:
        name = problem.key.partition(".")[2]
        problems.append(ConfigProblem(_FLAGS.get(name, "--" + name.replace("_", "-")), problem.message, problem.fix))
    return ConfigError(problems)


def config_from_json(text: str) -> ApplyConfig:
    """The ``--config-json`` document, checked field by field (a wrong one fails here, named,
    before the session starts)."""
    try:
        return ApplyConfig.from_document(json.loads(text))
    except ValueError as exc:  # not JSON, or a JobConfigError naming the fields
        raise SystemExit(f"--config-json: {exc}") from None


def job_from_config(config: ApplyConfig) -> ApplyJob:
    """The run ``config`` describes; the target from ``$CDC_APPLY_TARGET_URL`` unless it names one,
    the Kafka client settings of ``$CDC_APPLY_KAFKA_OPTIONS`` under its own."""
    target = config.target_url or os.environ.get(TARGET_URL_ENV)
    if not target:
        raise SystemExit(f"no target: give --target-url or set {TARGET_URL_ENV}")
    if not config.checkpoint:
        raise SystemExit("no checkpoint: give --checkpoint (or checkpoint in --config-json)")
    source = SourceOptions(
        kind=config.source or "kafka",
        bootstrap_servers=config.bootstrap_servers,
        topics=tuple(config.topics),
        topic_pattern=config.topic_pattern,
        changelog_dir=config.changelog_dir,
        starting_offsets=config.starting_offsets,
        max_records_per_batch=config.max_records_per_batch,
        kafka={**_env_kafka_options(), **config.kafka_options},
    )
    return ApplyJob(
        source=source,
        target_url=target,
        checkpoint=config.checkpoint,
        table_map=dict(config.table_map),
        lane_groups=_groups(",".join(group) for group in config.lane_groups),
        lanes=config.lanes,
        settings=dict(config.settings),
        trigger=config.trigger,
        max_duration=config.max_duration,
        processing_time=config.processing_time,
        app_name=config.app_name or "airflow-cdc-apply",
        consistency=config.consistency,
        transaction_topic=config.transaction_topic,
        transaction_stall_batches=config.transaction_stall_batches,
        schema_change_policy=config.schema_change_policy,
    )


def _env_kafka_options() -> dict[str, str]:
    text = os.environ.get(KAFKA_OPTIONS_ENV)
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError as exc:
        raise SystemExit(f"{KAFKA_OPTIONS_ENV} is not JSON: {exc}") from None
    if not isinstance(options, dict):
        raise SystemExit(f"{KAFKA_OPTIONS_ENV} must be a JSON object of Kafka client settings")
    return {str(k): str(v) for k, v in options.items()}


def run(spark: Any, job: ApplyJob) -> dict[str, Any]:
    """Run the job to its end (caught up, or ``max_duration``) and say what it did."""
    from airflow_cdc.spark.batches import Totals, batch_writer
    from airflow_cdc.spark.reading import available_now_end, drain, read_stream

    totals = Totals()
    write = batch_writer(job, totals)  # first: a wrong target fails before anything is read
    source = job.source
    if job.consistency == "transaction":  # the transaction topic's BEGIN/END records too
        from airflow_cdc.spark.transactions import with_transaction_topic

        source = with_transaction_topic(job)
    end = available_now_end(source) if job.trigger == "available-now" else None
    writer = read_stream(spark, source, end).writeStream.foreachBatch(write)
    writer = writer.option("checkpointLocation", job.checkpoint).queryName(job.app_name)
    if end is not None:  # the Python Kafka source: availableNow in batches of max_records_per_batch
        query = writer.trigger(processingTime="0 seconds").start()
        drain(query, end)
    elif job.trigger == "available-now":
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:
        query = writer.trigger(processingTime=job.processing_time).start()
        query.awaitTermination(job.max_duration)  # type: ignore[arg-type] # seconds; pyspark takes a float
        stop_between_batches(query)
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    progress: dict[str, Any] = query.lastProgress or {}
    end_offsets = [offset_data(s.get("endOffset")) for s in progress.get("sources", [])]
    return {
        "batches": totals.batches,
        "records": totals.records,
        **totals.counts,
        "phases_s": {name: round(seconds, 3) for name, seconds in totals.phases.items()},
        "end_offsets": end_offsets[0] if len(end_offsets) == 1 else end_offsets,
    }


def offset_data(text: Any) -> Any:
    """A source's offset from the query's progress as data (the XCom's ``end_offsets``).
    pyspark 4.1 rebuilds progress from JSON with ``str()`` of the parsed offset, so the Kafka
    source's ``{"topic": {"0": 42}}`` arrives as Python's repr of that dict, not as JSON."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text


def stop_between_batches(query: Any, patience: float = 600.0) -> None:
    """Stop a continuous query once its running batch finished: ``stop()`` interrupts a batch
    half applied (safe - it is replayed - but wasted work, and a run that never finishes one
    under a short ``max_duration``)."""
    deadline = time.monotonic() + patience
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        query.awaitTermination(0.2)
    query.stop()


def session(job: ApplyJob) -> Any:
    """The job's SparkSession. Under spark-submit the master and jars come from it; run as a
    plain module, it is local and loads the connector jars ``scripts/setup`` resolved."""
    from pyspark.sql import SparkSession

    # Python workers must run an interpreter that has airflow_cdc and the target's driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(job.app_name)
    # spark-submit starts Python with a gateway to its JVM; then master and jars are its own.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(os.environ.get("CDC_SPARK_MASTER", "local[*]"))
        jars = connector_jars()
        if jars:
            builder = builder.config("spark.jars", ",".join(jars))
    builder = builder.config("spark.sql.shuffle.partitions", str(max(2, job.lanes)))
    if job.target_url.startswith("delta:"):
        builder = builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension").config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    if job.target_url.startswith("iceberg:"):
        from airflow_cdc.spark.targets.lake_iceberg import catalog_conf

        # iceberg:PATH: a Hadoop catalog in PATH (iceberg:catalog=NAME: the user's own conf defines it).
        for key, value in catalog_conf(job.target_url)[1].items():
            builder = builder.config(key, value)
    return builder.getOrCreate()


def connector_jars() -> list[str]:
    """The Kafka source's and Delta's jars from ``scripts/setup`` (``.jars/spark``), if there."""
    from airflow_cdc.local.jvm import jars_dir

    directory = jars_dir() / "spark"
    return sorted(str(p) for p in directory.glob("*.jar")) if directory.is_dir() else []


def main(argv: Sequence[str] | None = None) -> int:
    job = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    spark = session(job)
    session_seconds = time.monotonic() - started
    try:
        result = run(spark, job)
    finally:
        spark.stop()
    result["session_seconds"] = round(session_seconds, 2)
    result["seconds"] = round(time.monotonic() - started, 2)
    print(RESULT_MARKER + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())


#: The connector settings that decide how values are encoded; the job decodes with the same.
VALUE_SETTINGS = (
    "decimal.handling.mode",
    "binary.handling.mode",
    "time.precision.mode",
    "interval.handling.mode",
    "hstore.handling.mode",
    "unavailable.value.placeholder",
)


def _is_mysql(config: dict[str, Any]) -> bool:
    kind = source_kind(config.get("connector.class"))
    return kind is not None and kind.name in ("mysql", "mariadb")


def inputs_from_engine_config(config: dict[str, Any], tables: Sequence[str] = ()) -> dict[str, Any]:
    """What the job reads, from the configuration of the engine instance that captures it: the
    sink's place (changelog directory or Kafka brokers), the tables' topics, the value settings.

    ``tables`` defaults to ``table.include.list`` when that is a plain list (no regex).
    """
    prefix = str(config.get("topic.prefix") or "")
    if not tables:
        listed = [t.strip() for t in str(config.get("table.include.list") or "").split(",") if t.strip()]
        signal = str(config.get("signal.data.collection") or "")
        tables = [t for t in listed if t != signal.split(".", 1)[-1] and t != signal]
        if not tables or any(c in t for t in tables for c in "*+?[]()|\\^$"):
            raise ValueError(
                "name the tables to apply (tables=[...]): the instance's table.include.list is empty or a pattern"
            )
    settings = {key: str(config[key]) for key in VALUE_SETTINGS if config.get(key) not in (None, "")}
    if "time.precision.mode" not in settings and _is_mysql(config):
        # Debezium's MySQL and MariaDB connectors default to microsecond TIMEs; PostgreSQL's to adaptive.
        settings["time.precision.mode"] = "adaptive_time_microseconds"
    out: dict[str, Any] = {"topics": [f"{prefix}.{table}" for table in tables], "settings": settings}
    if str(config.get("sink.type") or "changelog") == "kafka":
        out["source"] = "kafka"
        out["bootstrap_servers"] = config.get("sink.kafka.producer.bootstrap.servers")
        # The sink's security settings; its API leaves the passwords out, which the job then
        # takes from KAFKA_OPTIONS_ENV (or --kafka-option).
        out["kafka_options"] = security_settings(config, "sink.kafka.producer.")
    else:
        out["source"] = "changelog"
        out["changelog_dir"] = config.get("sink.changelog.dir")
    return out
