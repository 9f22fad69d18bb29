"""The source's options (``spark.readStream.format("cdc_kafka").option(...)``) parsed into
:class:`SourceSettings`, every problem reported at once as one ConfigError at ``load()``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.kafka_settings import kafka_python_config
from airflow_cdc.spark.sources.kafka_python.offsets import Offsets, offsets_from_json

#: Consumer settings this source owns: a ``kafka.*`` option must not change them.
_OWNED = {
    "bootstrap_servers": "kafka.bootstrap.servers is read as such",
    "group_id": "kafka.group.id is only used to commit offsets",
    "enable_auto_commit": "offsets are committed only for completed batches (kafka.group.id)",
    "auto_offset_reset": "use the startingOffsets option",
    "key_deserializer": "keys are always decoded as UTF-8 text",
    "value_deserializer": "values are always decoded as UTF-8 text",
    "allow_auto_create_topics": "the source never creates topics",
    "consumer_timeout_ms": "use kafkaConsumer.pollTimeoutMs",
}


@dataclass(frozen=True)
class SourceSettings:
    """The parsed options; picklable, since every Spark task gets a copy."""

    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    starting: str | Offsets = "latest"
    max_offsets_per_trigger: int | None = None
    #: ``endingOffsets``: the stream goes no further (what an availableNow run drains).
    ending: Offsets | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    group_id: str | None = None
    #: kafka-python ``KafkaConsumer`` keyword arguments from ``kafka.*`` options.
    client: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is subscribed: named in ``subscribe`` or wholly matching the pattern."""
        if topic in self.topics:
            return True
        return self.pattern is not None and re.fullmatch(self.pattern, topic) is not None


def parse_options(options: Mapping[str, str]) -> SourceSettings:
    """The settings of ``options``, or a ConfigError listing every problem with them at once."""
    opts = {key.lower(): str(value) for key, value in options.items()}
    problems: list[ConfigProblem] = []
    settings = SourceSettings(
        bootstrap_servers=_required(opts, "kafka.bootstrap.servers", problems),
        topics=tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()),
        pattern=_pattern(opts.get("subscribepattern"), problems),
        starting=_starting(opts.get("startingoffsets", "latest"), problems),
        max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", problems),
        ending=_ending(opts.get("endingoffsets"), problems),
        min_partitions=_positive(opts, "minpartitions", "minPartitions", problems),
        fail_on_data_loss=_boolean(opts.get("failondataloss", "true"), "failOnDataLoss", problems),
        poll_timeout_ms=_positive(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs", problems)
        or 120_000,
        group_id=opts.get("kafka.group.id") or None,
        client=_client_settings(opts, problems),
    )
    if not settings.topics and settings.pattern is None:
        problems.append(ConfigProblem("subscribe", "no topics to read", "give subscribe or subscribePattern"))
    if problems:
        raise ConfigError(problems)
    return settings


def _required(opts: Mapping[str, str], key: str, problems: list[ConfigProblem]) -> str:
    value = opts.get(key, "").strip()
    if not value:
        problems.append(ConfigProblem(key, "missing", "the Kafka brokers, host:port[,host:port...]"))
    return value


def _pattern(value: str | None, problems: list[ConfigProblem]) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        problems.append(ConfigProblem("subscribePattern", f"not a regular expression: {exc}", "a valid pattern"))
    return value


def _starting(value: str, problems: list[ConfigProblem]) -> str | Offsets:
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        return offsets_from_json(json.loads(text))
    except (ValueError, TypeError, AttributeError):
        problems.append(
            ConfigProblem("startingOffsets", f"{value!r} is not understood", 'earliest, latest or {"topic": {"0": 12}}')
        )
        return "latest"


def _ending(value: str | None, problems: list[ConfigProblem]) -> Offsets | None:
    if value is None:
        return None
    try:
        return offsets_from_json(json.loads(value))
    except (ValueError, TypeError, AttributeError):
        problems.append(ConfigProblem("endingOffsets", f"{value!r} is not understood", 'JSON: {"topic": {"0": 12}}'))
        return None


def _positive(opts: Mapping[str, str], key: str, name: str, problems: list[ConfigProblem]) -> int | None:
    if key not in opts:
        return None
    try:
        number = int(opts[key])
    except ValueError:
        number = 0
    if number <= 0:
        problems.append(ConfigProblem(name, f"{opts[key]!r} is not a positive whole number", "e.g. 100000"))
        return None
    return number


def _boolean(value: str, name: str, problems: list[ConfigProblem]) -> bool:
    if value.strip().lower() not in ("true", "false"):
        problems.append(ConfigProblem(name, f"{value!r} is not a boolean", "true or false"))
    return value.strip().lower() != "false"


def _client_settings(opts: Mapping[str, str], problems: list[ConfigProblem]) -> dict[str, Any]:
    """kafka-python keyword arguments for the ``kafka.*`` options, through the package's one
    translation of Kafka client settings (``airflow_cdc.engine.kafka_settings``)."""
    client_opts = {k: v for k, v in opts.items() if k not in ("kafka.bootstrap.servers", "kafka.group.id")}
    try:
        return kafka_python_config(client_opts, KafkaConsumer.DEFAULT_CONFIG, prefix="kafka.", owned=_OWNED)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return {}
