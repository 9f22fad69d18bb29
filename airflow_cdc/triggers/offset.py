"""Triggers of the offset sensors: an instance's committed offsets reaching a position
(:class:`CdcOffsetTrigger`), and a Kafka consumer group's lag on its topics
(:class:`CdcConsumerLagTrigger`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseHook

from airflow_cdc.backends import AsyncEngineBackend, InstancePosition
from airflow_cdc.triggers.base import CdcEngineTrigger, NoAnswer, Payload, failed
from airflow_cdc.triggers.kafka_lag import ConsumerLag, client_settings
from airflow_cdc.triggers.progress import CURRENT, OffsetGoal, positions_summary

KAFKA_FIX = "check the brokers and the client settings (kafka_conn_id, or the instance's sink.kafka.producer.*)"
#: Where an instance's Kafka sink keeps its client settings.
SINK_PREFIX = "sink.kafka.producer."


class CdcOffsetTrigger(CdcEngineTrigger):
    """Waits until an instance's committed offsets reach ``target``; yields one event,
    ``success`` with each task's ``positions``, or ``failed`` / ``error``.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param target: None (caught up with the source at a check), ``"current"`` (the position
        the source stood at when the trigger first saw one for every task; fixed again if the
        triggerer restarts the trigger), or a position as the source writes it (an LSN
        ``0/16B3748``, a GTID set ``0-1-42`` / ``uuid:1-5``, a binlog ``file:pos``), which the
        engine parses.
    """

    def __init__(
        self,
        cdc_conn_id: str,
        target: str | None = None,
        poll_interval: float = 5.0,
        unavailable_timeout: float = 60.0,
    ) -> None:
        super().__init__(cdc_conn_id, poll_interval, unavailable_timeout)
        self.target = target
        self.goal = OffsetGoal(target)

    def kwargs(self) -> dict[str, Any]:
        return {**super().kwargs(), "target": self.target}

    async def check(self, client: AsyncEngineBackend) -> Payload | None:
        if not self.goal.fixed:
            now = await client.position()
            if not self.goal.fix_current(now):
                self.log.info("waiting for every task to know its source's position: %s", now.phase)
                return None
            self.log.info("target: %s", self.goal.describe())
        answers: list[InstancePosition] = [await client.position(target) for target in self.goal.targets()]
        verdict = self.goal.judge(answers)
        if verdict is None and await self._flushed(client):
            # What is delivered may just not be committed yet (offset.flush.interval.ms is a
            # minute by default): asked to commit now, the instance answers at once.
            answers = [await client.position(target) for target in self.goal.targets()]
            verdict = self.goal.judge(answers)
        if verdict is None:
            self.log.info("%s", self.goal.waiting_line(answers))
            await self.retry_note(client)  # logs a fault the instance retries meanwhile
            return None
        if not verdict.succeeded:
            return failed(await self.with_retry_note(client, verdict.message))
        return {
            "status": "success",
            "message": verdict.message,
            "target": self.target,
            "positions": positions_summary(self.goal, answers),
        }

    async def _flushed(self, client: AsyncEngineBackend) -> bool:
        """Whether the instance committed what it delivered on request (POST /offsets/flush);
        False where there is no such request (a connector on Kafka Connect commits on its
        worker's interval, an older instance has no such route)."""
        return await client.flush_offsets()


class CdcConsumerLagTrigger(CdcEngineTrigger):
    """Waits until a Kafka consumer group's lag on an instance's topics is at most ``max_lag``
    records; yields one event, ``success`` with the ``lag``, or ``error``.

    kafka-python is blocking: each measurement runs in a thread, the event loop never waits.

    :param cdc_conn_id: the instance's connection: its ``topic.prefix`` names the topics, its
        Kafka sink's settings reach the brokers (unless ``kafka_conn_id`` is given).
    :param group_id: the consumer group.
    :param max_lag: records the group may still have to read.
    :param topics: the topics (default: every topic of the instance, ``<topic.prefix>.*``).
    :param kafka_conn_id: an Airflow connection of type ``kafka`` (its extra holds the client
        settings: ``bootstrap.servers``, ``security.protocol``, ``sasl.*``, over the sink's; at
        least ``sasl.password``, which the instance's API does not hand out); resolved in ``run()``.
    """

    def __init__(
        self,
        cdc_conn_id: str,
        group_id: str,
        max_lag: int = 0,
        topics: Sequence[str] | None = None,
        kafka_conn_id: str | None = None,
        poll_interval: float = 5.0,
        unavailable_timeout: float = 60.0,
    ) -> None:
        super().__init__(cdc_conn_id, poll_interval, unavailable_timeout)
        self.group_id = group_id
        self.max_lag = max_lag
        self.topics = list(topics or [])
        self.kafka_conn_id = kafka_conn_id
        self._lag: ConsumerLag | None = None

    def kwargs(self) -> dict[str, Any]:
        return {
            **super().kwargs(),
            "group_id": self.group_id,
            "max_lag": self.max_lag,
            "topics": list(self.topics),
            "kafka_conn_id": self.kafka_conn_id,
        }

    async def check(self, client: AsyncEngineBackend) -> Payload | None:
        from kafka.errors import KafkaError  # kafka-python loads only where a lag is measured

        if self._lag is None:
            self._lag = await self._consumer_lag(client)
        try:
            lag = await asyncio.to_thread(self._lag.measure)
        except KafkaError as exc:  # brokers away, a group coordinator moving: bounded by unavailable_timeout
            raise NoAnswer(exc, KAFKA_FIX) from exc
        if lag is None:
            self.log.warning("no topic of %s exists yet", self.topics or f"{self._lag.topic_prefix}.*")
            return None
        if lag.total > self.max_lag:
            self.log.info("group %s: lag %d > %d on %s", self.group_id, lag.total, self.max_lag, lag.topics)
            return None
        return {
            "status": "success",
            "message": f"group {self.group_id}: lag {lag.total} <= {self.max_lag} "
            f"on {len(lag.partitions)} partition(s)",
            "lag": lag.to_json(),
        }

    async def _consumer_lag(self, client: AsyncEngineBackend) -> ConsumerLag:
        config = await client.running_config()
        settings = await kafka_client_settings(client, config, self.kafka_conn_id)
        notifications = str(config.get("notification.sink.topic.name") or "")
        return ConsumerLag(
            settings,
            self.group_id,
            topics=self.topics,
            topic_prefix=str(config.get("topic.prefix") or ""),
            exclude=[notifications] if notifications else [],
        )

    async def close(self) -> None:
        await super().close()
        if self._lag is not None:
            lag, self._lag = self._lag, None
            await asyncio.to_thread(lag.close)


async def kafka_client_settings(
    client: AsyncEngineBackend, config: dict[str, Any], kafka_conn_id: str | None
) -> dict[str, Any]:
    """kafka-python settings of the cluster an instance's events go to: the one a connector's
    connection names (Kafka Connect), else its Kafka sink's, with ``kafka_conn_id``'s extra."""
    cluster = client.kafka_cluster()
    if cluster is not None:  # a connector on Kafka Connect: the cluster its connection names
        return cluster
    if kafka_conn_id:
        # A connection naming brokers stands alone (another cluster); one without them adds
        # to the sink's settings what the instance's API leaves out (sasl.password).
        extra = (await BaseHook.aget_connection(kafka_conn_id)).extra_dejson
        sink = {} if extra.get("bootstrap.servers") else config
        return client_settings(sink, SINK_PREFIX, overrides=extra)
    return client_settings(config, SINK_PREFIX)


__all__ = ["CURRENT", "CdcConsumerLagTrigger", "CdcOffsetTrigger"]
