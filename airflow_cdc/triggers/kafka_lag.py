"""A Kafka consumer group's lag on an instance's topics, with kafka-python's admin client.

Blocking: the consumer-lag trigger runs every call here in a thread (``asyncio.to_thread``), so
the triggerer's event loop never waits on a broker. Nothing here imports Airflow.

The lag of a partition is its end offset minus the group's committed offset; a partition the
group never committed to counts from its beginning (everything in it is unread).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.kafka_settings import kafka_python_config, open_client

#: Settings that only make sense for a producer or a consumer of data, not for an admin client.
_IGNORED = frozenset({"group.id", "acks", "linger.ms", "compression.type", "enable.auto.commit", "auto.offset.reset"})


def client_settings(
    settings: Mapping[str, Any], prefix: str = "", *, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """kafka-python admin-client keyword arguments from Java/librdkafka-style settings (those
    under ``prefix`` when one is given: ``sink.kafka.producer.`` of an instance's config), with
    ``overrides`` (unprefixed: a ``kafka`` connection's extra) over them. The instance's API
    leaves its passwords out, so a SASL password comes from such a connection. One translation
    for every client of the package: ``airflow_cdc.engine.kafka_settings``."""
    from kafka import KafkaAdminClient

    named = {k[len(prefix) :]: v for k, v in settings.items() if k.startswith(prefix)}
    named.update(overrides or {})
    wanted = {k: v for k, v in named.items() if k not in _IGNORED}
    out = kafka_python_config(wanted, KafkaAdminClient.DEFAULT_CONFIG, strict=False)
    if not out.get("bootstrap_servers"):
        raise ConfigError(
            [
                ConfigProblem(
                    f"{prefix}bootstrap.servers",
                    "is not set",
                    "give the brokers (kafka_conn_id's extra bootstrap.servers, or the instance's "
                    "sink.kafka.producer.bootstrap.servers)",
                )
            ]
        )
    return out


@dataclass(frozen=True)
class GroupLag:
    """A group's lag: in total and per ``topic:partition``."""

    group_id: str
    total: int
    partitions: Mapping[str, int]

    @property
    def topics(self) -> list[str]:
        return sorted({key.rpartition(":")[0] for key in self.partitions})

    def to_json(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "total": self.total, "partitions": dict(self.partitions)}


class _AdminClient:
    """One Kafka admin client, opened at the first use with ``settings``; :meth:`close` it."""

    client_id = "airflow-cdc"
    settings: dict[str, Any]
    _admin: Any = None

    def _client(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            kwargs = {"client_id": self.client_id, **self.settings}
            self._admin = open_client(KafkaAdminClient, kwargs, setting_prefix="kafka_conn_id's extra ")
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()


class ConsumerLag(_AdminClient):
    """Measures one group's lag on ``topics``, or on every topic whose name starts with
    ``topic_prefix.`` (the instance's topics) but those in ``exclude`` (its notification topic:
    no consumer of the changes reads it). One admin client, opened at the first
    :meth:`measure`; :meth:`close` it."""

    client_id = "airflow-cdc-lag"

    def __init__(
        self,
        settings: Mapping[str, Any],
        group_id: str,
        *,
        topics: Sequence[str] = (),
        topic_prefix: str = "",
        exclude: Sequence[str] = (),
    ) -> None:
        if not topics and not topic_prefix:
            raise ValueError("give the topics, or the topic prefix of the instance's topics")
        self.settings = dict(settings)
        self.group_id = group_id
        self.topics = tuple(topics)
        self.topic_prefix = topic_prefix
        self.exclude = frozenset(exclude)
        self._admin: Any = None

    def measure(self) -> GroupLag | None:
        """The group's lag now; None while none of the topics exists yet."""
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec

        admin = self._client()
        topics = self._topics(admin)
        if not topics:  # describe_topics([]) would describe every topic
            return None
        partitions = [
            TopicPartition(topic["name"], partition["partition_index"])
            for topic in admin.describe_topics(topics)
            if not topic.get("error_code")
            for partition in topic["partitions"]
        ]
        if not partitions:
            return None
        ends = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        starts = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.EARLIEST))
        committed = admin.list_group_offsets({self.group_id: partitions}).get(self.group_id, {})
        lags: dict[str, int] = {}
        for tp in partitions:
            done = committed.get(tp)
            read_up_to = done.offset if done is not None and done.offset >= 0 else starts[tp].offset
            lags[f"{tp.topic}:{tp.partition}"] = max(0, ends[tp].offset - read_up_to)
        return GroupLag(self.group_id, sum(lags.values()), dict(sorted(lags.items())))

    def _topics(self, admin: Any) -> list[str]:
        existing = set(admin.list_topics())
        if self.topics:
            return sorted(existing & set(self.topics))
        head = f"{self.topic_prefix}."
        return sorted(t for t in existing if t.startswith(head) and t not in self.exclude)


class TopicEnds(_AdminClient):
    """The end offset of a topic, summed over its partitions: how many records it ever held (a
    number that only grows while the topic lives). One admin client, opened at the first
    :meth:`total`; :meth:`close` it. Blocking, as :class:`ConsumerLag`."""

    client_id = "airflow-cdc-changes"

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self._admin: Any = None

    def total(self, topic: str) -> int | None:
        """The topic's records so far; None while it does not exist."""
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec

        admin = self._client()
        if topic not in set(admin.list_topics()):  # describe_topics would not say it is missing
            return None
        partitions = [
            TopicPartition(described["name"], partition["partition_index"])
            for described in admin.describe_topics([topic])
            if not described.get("error_code")
            for partition in described["partitions"]
        ]
        if not partitions:
            return None
        ends = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        return sum(int(ends[tp].offset) for tp in partitions)
