"""Debezium's notifications on Kafka Connect, read from the topic of its ``sink`` channel
(``notification.sink.topic.name``) as pages of the engine's ``NotificationPage``.

The cursor names the topic and, per partition, the offset to read next:
``<topic>:<partition>=<offset>[,...]`` (topic names hold no ``:``). It stays valid as long as the
topic keeps those records; one the topic no longer knows (another topic, offsets deleted by
retention or a topic created again) gets everything the topic keeps, flagged ``reset``, as the
embedded instance answers a cursor its journal forgot. The page's ``run_id`` is the topic's name.

A record's value is Debezium's notification as the worker's converter wrote it: JSON, bare or
with a schema (``{"schema", "payload"}``); ``timestamp`` is the notification's own (Debezium
2.5+) or else the record's. A record that is not a notification is skipped with a warning: one
bad record must not stop a sensor. Across partitions, pages are in record-timestamp order.

Blocking (kafka-python): the async backend calls :func:`read_page` in a thread.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.errors import MissingDependencyError, RetriableError
from airflow_cdc.engine.kafka_settings import open_client
from airflow_cdc.engine.notifications import Notification, NotificationPage

log = logging.getLogger(__name__)


class NotificationTopicUnavailableError(RetriableError):
    """The Kafka cluster holding the notification topic does not answer now."""


@dataclass(frozen=True)
class Cursor:
    topic: str
    #: Per partition, the offset of the next record to read.
    offsets: Mapping[int, int]

    def __str__(self) -> str:
        return f"{self.topic}:" + ",".join(f"{p}={o}" for p, o in sorted(self.offsets.items()))

    @classmethod
    def parse(cls, text: str) -> Cursor | None:
        """None when ``text`` is not a cursor of this form."""
        topic, sep, places = text.partition(":")
        if not sep or not topic:
            return None
        offsets: dict[int, int] = {}
        for place in filter(None, places.split(",")):
            partition, eq, offset = place.partition("=")
            if not eq or not partition.isdigit() or not offset.isdigit():
                return None
            offsets[int(partition)] = int(offset)
        return cls(topic, offsets)


def notification_of(value: bytes | None, record_timestamp: int) -> Notification | None:
    """A record's value as a notification; None when it is not one."""
    try:
        data = json.loads(value) if value else None
    except ValueError:
        return None
    if isinstance(data, dict) and "payload" in data and "schema" in data:
        data = data["payload"]
    if not isinstance(data, dict) or not all(data.get(k) for k in ("id", "aggregate_type", "type")):
        return None
    timestamp = data.get("timestamp")
    return Notification.from_dict({**data, "timestamp": timestamp if timestamp is not None else record_timestamp})


def read_page(
    topic: str,
    cursor: str | None = None,
    limit: int = 1000,
    *,
    kafka_options: Mapping[str, Any],
    timeout: float = 10.0,
) -> NotificationPage:
    """The notifications on ``topic`` after ``cursor`` (None: every one kept), at most ``limit``.
    ``kafka_options``: kafka-python consumer arguments (``bootstrap_servers``, security), e.g.
    ``airflow_cdc.engine.kafka_settings.kafka_python_config`` of Java/librdkafka settings."""
    try:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError
    except ImportError:  # pragma: no cover - kafka-python is a core dependency
        raise MissingDependencyError("kafka-python", "kafka") from None
    kwargs = {"request_timeout_ms": int(timeout * 1000) + 1, **kafka_options}
    try:
        # A refused login is a ConfigError naming the setting, not an unavailable cluster.
        consumer = open_client(
            KafkaConsumer,
            {**kwargs, "group_id": None, "enable_auto_commit": False, "allow_auto_create_topics": False},
            setting_prefix="",
        )
    except KafkaError as exc:
        raise NotificationTopicUnavailableError(
            f"the Kafka cluster at {kafka_options.get('bootstrap_servers')} does not answer ({exc}): check it is up "
            "and that the notification Kafka settings name it"
        ) from exc
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:  # no notification yet: Connect creates the topic with the first one
            return NotificationPage(topic, cursor or f"{topic}:", (), False)
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        first, end = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        start, reset = _start(
            topic, cursor, {tp.partition: first[tp] for tp in tps}, {tp.partition: end[tp] for tp in tps}
        )
        wanted = [tp for tp in tps if start[tp.partition] < end[tp]]
        records = _read(consumer, wanted, start, {tp.partition: end[tp] for tp in tps}, timeout)
    except KafkaError as exc:
        raise NotificationTopicUnavailableError(f"reading notification topic {topic!r} failed: {exc}") from exc
    finally:
        consumer.close()
    # Merged by timestamp, each partition in its own order: a page cut at ``limit`` leaves no
    # record of a partition behind its cursor.
    by_partition = [[r for r in records if r[1] == p] for p in sorted({r[1] for r in records})]
    taken = list(itertools.islice(heapq.merge(*by_partition, key=lambda r: r[0]), limit))
    after = dict(start)
    notifications = []
    for _, partition, offset, notification in taken:
        after[partition] = offset + 1
        if notification is not None:
            notifications.append(notification)
    return NotificationPage(topic, str(Cursor(topic, after)), tuple(notifications), reset)


def _start(
    topic: str, cursor: str | None, first: Mapping[int, int], end: Mapping[int, int]
) -> tuple[dict[int, int], bool]:
    """Where to read each partition from, and whether the cursor was unknown."""
    if not cursor:
        return dict(first), False
    parsed = Cursor.parse(cursor)
    if parsed is None or parsed.topic != topic:
        log.warning("notification cursor %r is not one of topic %s: reading every notification it keeps", cursor, topic)
        return dict(first), True
    start = {p: parsed.offsets.get(p, first[p]) for p in first}
    if any(not first[p] <= start[p] <= end[p] for p in first):
        log.warning("notification cursor %r is outside what topic %s keeps: reading every notification", cursor, topic)
        return dict(first), True
    return start, False


Record = tuple[int, int, int, "Notification | None"]


def _read(
    consumer: Any, tps: list[Any], start: Mapping[int, int], end: Mapping[int, int], timeout: float
) -> list[Record]:
    """Every record of ``tps`` from ``start`` up to ``end``: (timestamp, partition, offset,
    notification or None)."""
    records: list[Record] = []
    if not tps:
        return records
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, start[tp.partition])
    deadline = time.monotonic() + timeout
    remaining = {tp.partition for tp in tps}
    while remaining:
        if time.monotonic() > deadline:
            raise NotificationTopicUnavailableError(
                f"reading notification topic {tps[0].topic!r}: the records up to {dict(end)} did not arrive within "
                f"{timeout:.0f}s"
            )
        for tp, batch in consumer.poll(timeout_ms=200).items():
            for message in batch:
                if message.offset >= end[tp.partition]:
                    continue
                notification = notification_of(message.value, message.timestamp)
                if notification is None:
                    log.warning(
                        "notification topic %s: record %s/%s is not a notification: skipped",
                        tp.topic,
                        tp.partition,
                        message.offset,
                    )
                records.append((message.timestamp, tp.partition, message.offset, notification))
        remaining = {p for p in remaining if consumer.position(_tp(tps, p)) < end[p]}
    return records


def _tp(tps: list[Any], partition: int) -> Any:
    return next(tp for tp in tps if tp.partition == partition)
