"""The engine's own configuration fields, with Debezium's names and defaults (the offset store's
fields, ``offset.storage*``, are declared in ``airflow_cdc.engine.storage.config``), and the
keys of Kafka Connect's framework that are accepted and ignored."""

from __future__ import annotations

from airflow_cdc.engine.commit_policy import COMMIT_POLICY_ALIASES
from airflow_cdc.engine.config import ConfigDef, Field, available_cores
from airflow_cdc.engine.storage import OFFSET_STORAGE_CONFIG

ENGINE_CONFIG = ConfigDef(
    [
        Field(
            "name",
            doc="Unique name of this engine instance; offsets are stored under it.",
            fix="set name to a unique engine name, e.g. name=inventory-cdc",
        ),
        Field(
            "connector.class",
            doc="The source connector: a short name, Debezium's class name, or module:Class.",
            fix="set connector.class, e.g. connector.class=synthetic",
        ),
        Field("tasks.max", type="int", default=1, minimum=1, doc="Upper bound on the number of tasks."),
        Field(
            "offset.flush.interval.ms",
            type="int",
            default=60_000,
            minimum=0,
            doc="Interval at which to commit offsets (periodic policy).",
        ),
        Field(
            "offset.commit.policy",
            default="periodic",
            choices=("periodic", "always"),
            aliases=COMMIT_POLICY_ALIASES,
            doc="When offsets are committed.",
        ),
        Field(
            "record.processing.threads",
            type="int",
            default=available_cores(),
            minimum=1,
            doc="Threads that transform, serialize and (UNORDERED) consume records.",
        ),
        Field(
            "record.processing.order",
            default="ORDERED",
            choices=("ORDERED", "UNORDERED"),
            doc="ORDERED hands records to the consumer in source order; UNORDERED as they finish.",
        ),
        Field(
            "record.processing.shutdown.timeout.ms",
            type="int",
            default=1_000,
            minimum=0,
            doc="How long shutdown waits for records already being processed.",
        ),
        Field(
            "task.management.timeout.ms",
            type="int",
            default=120_000,
            minimum=1,
            doc="How long starting or stopping a task may take.",
        ),
        Field(
            "errors.max.retries",
            type="int",
            default=-1,
            minimum=-1,
            doc="Retries of retriable errors before failing (-1 = no limit, 0 = disabled).",
        ),
        Field(
            "errors.retry.delay.initial.ms",
            type="int",
            default=300,
            minimum=1,
            doc="First retry delay; doubled on every retry.",
        ),
        Field("errors.retry.delay.max.ms", type="int", default=10_000, minimum=1, doc="Longest retry delay."),
        Field("max.batch.size", type="int", default=2048, minimum=1, doc="Most records a task returns per poll."),
        Field(
            "max.queue.size",
            type="int",
            default=8192,
            minimum=1,
            doc="Most records in flight (polled, not yet delivered) per task: the back-pressure bound.",
        ),
        Field(
            "poll.interval.ms",
            type="int",
            default=500,
            minimum=0,
            doc="How long a task waits for new changes when there are none.",
        ),
        Field(
            "notification.enabled.channels",
            type="list",
            default=["log", "api"],
            doc="Where notifications go: log, api (GET /notifications), sink (notification.sink.topic.name).",
        ),
        Field("notification.sink.topic.name", default="", doc="The topic of the sink notification channel."),
        Field(
            "config.strict",
            type="bool",
            default=False,
            doc="Refuse a key that no component reads (a misspelling, say) instead of warning about it.",
        ),
        Field(
            "gc.generation0.threshold",
            type="int",
            default=10_000,
            minimum=0,
            doc="While the engine runs, CPython's young-generation collection threshold is at least this "
            "(the default 700 cost a fifth of the snapshot's time; see airflow_cdc/engine/collector.py); "
            "0 leaves the process's setting alone.",
        ),
    ]
).merged(OFFSET_STORAGE_CONFIG)

#: Kafka Connect's framework keys, which a Debezium configuration carries and which mean nothing
#: here: events are always Debezium's JSON (no converters) and errors are always logged. Accepted
#: without a word so such a configuration moves here unchanged. Keys that would change what is
#: captured or emitted (``schema.include.list``, ``converters``, ``errors.tolerance``, ...) are
#: not among them: they are flagged like any unknown key.
CONNECT_FRAMEWORK_KEYS = ConfigDef(
    prefixes=("key.converter.", "value.converter.", "header.converter."),
    ignored=(
        "key.converter",
        "value.converter",
        "header.converter",
        "connector.plugin.version",
        "tasks.max.enforce",
        "config.action.reload",
        "errors.log.enable",
        "errors.log.include.messages",
    ),
)
