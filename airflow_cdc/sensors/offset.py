"""Wait for offset progress: an instance's committed offsets reaching a position, or a Kafka
consumer group catching up with the instance's topics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from airflow_cdc.sensors.base import CdcBaseSensor
from airflow_cdc.triggers.base import Payload
from airflow_cdc.triggers.offset import CdcConsumerLagTrigger, CdcOffsetTrigger
from airflow_cdc.triggers.progress import CURRENT


class CdcOffsetSensor(CdcBaseSensor):
    """Wait until an engine instance has committed everything up to a position: what was
    captured up to there is in the sink (the Kafka topics, the changelog).

    ``target`` is one of:

    * ``"current"`` - the position each source stood at when the sensor started: "caught up
      with what had happened by then" (the usual wait after a write or a snapshot);
    * a position as the source writes positions (a PostgreSQL LSN such as ``0/16B3748``; a
      MariaDB GTID position ``0-1-42``, a MySQL GTID set ``uuid:1-5`` or a binlog
      ``mysql-bin.000003:154``), which the engine parses;
    * ``None`` - caught up with the source at the moment of a check (on a busy source that may
      take long: each check compares with the newest position).

    The source's current position is the newest it has *seen* (ADR 0010): on an idle database
    it can be a few seconds old. A DAG that waits for its own write should give the position it
    read after writing.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param target: None (the default), ``"current"``, or a position (templated).
    :param deferrable: wait in the triggerer (default True); False pokes.
    :return: (XCom) ``{"target", "positions"}``: each task's partition and committed, current
        and target positions when the wait ended.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "target")

    def __init__(self, *, target: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if target == CURRENT and self.mode == "reschedule" and not self.deferrable:
            raise ValueError(
                "target='current' is the position when the sensor started, which mode='reschedule' forgets between "
                "pokes: use deferrable=True or mode='poke'"
            )
        self.target = target

    def trigger(self) -> CdcOffsetTrigger:
        target = None if self.target is None else str(self.target).strip() or None
        return CdcOffsetTrigger(
            cdc_conn_id=self.cdc_conn_id,
            target=target,
            poll_interval=self.poke_interval,
            unavailable_timeout=self.unavailable_timeout,
        )

    def succeeded(self, context: Context, event: Payload) -> dict[str, Any]:
        return {"target": event.get("target"), "positions": event.get("positions") or []}


class CdcConsumerLagSensor(CdcBaseSensor):
    """Wait until a Kafka consumer group has read the instance's topics up to at most
    ``max_lag`` records behind their ends - e.g. a Spark job or a downstream service has
    consumed what was captured.

    The topics are the instance's (every topic named ``<topic.prefix>.*``) unless ``topics``
    names them; the brokers and their security settings are the instance's Kafka sink's. The
    instance's API does not hand out passwords: a ``kafka_conn_id`` connection of type ``kafka``
    adds them (its extra, e.g. ``{"sasl.password": ...}``, over the sink's settings), or replaces
    the sink's settings altogether when it names ``bootstrap.servers``. The group's lag is
    measured with kafka-python, in a thread: the triggerer's event loop never blocks.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param group_id: the consumer group (templated).
    :param max_lag: records the group may still have to read, over all partitions.
    :param topics: the topics to measure (templated; default: the instance's).
    :param kafka_conn_id: a ``kafka`` connection: the password the sink's settings lack, or other brokers.
    :param deferrable: wait in the triggerer (default True); False pokes.
    :return: (XCom) ``{"group_id", "total", "partitions"}``: the lag per ``topic:partition``.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "group_id", "topics", "kafka_conn_id")

    def __init__(
        self,
        *,
        group_id: str,
        max_lag: int = 0,
        topics: Sequence[str] | None = None,
        kafka_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if max_lag < 0:
            raise ValueError(f"max_lag must be records >= 0, not {max_lag!r}")
        if not group_id:
            raise ValueError("group_id: name the consumer group")
        self.group_id = group_id
        self.max_lag = max_lag
        self.topics = topics
        self.kafka_conn_id = kafka_conn_id

    def trigger(self) -> CdcConsumerLagTrigger:
        topics = [self.topics] if isinstance(self.topics, str) else list(self.topics or [])
        return CdcConsumerLagTrigger(
            cdc_conn_id=self.cdc_conn_id,
            group_id=str(self.group_id),
            max_lag=self.max_lag,
            topics=[str(t) for t in topics],
            kafka_conn_id=self.kafka_conn_id or None,
            poll_interval=self.poke_interval,
            unavailable_timeout=self.unavailable_timeout,
        )

    def succeeded(self, context: Context, event: Payload) -> dict[str, Any]:
        return dict(event.get("lag") or {})
