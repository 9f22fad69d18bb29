"""The Connect backend's operations as *plans* (ADR 0017): each a generator that yields what it
needs to ask (an :class:`Ask`: an operation of the Kafka Connect client, a page of the
notification topic, the source's position) and returns the answer built by the pure functions
of ``instance_view``. The clients in ``backend.py`` run them, sync or async: one code path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.notifications import NotificationPage
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, StateChange
from airflow_cdc.kafka_connect.client import STOPPED, UNASSIGNED, ConnectorStatus, ConnectRestError
from airflow_cdc.kafka_connect.client import validation_errors as _validation_errors
from airflow_cdc.kafka_connect.connector_config import connector_config
from airflow_cdc.kafka_connect.errors import (
    ConnectorRefusedError,
    ConnectorUnavailableError,
    SignalChannelError,
    is_not_found,
)
from airflow_cdc.kafka_connect.instance_view import (
    NO_CURRENT,
    instance_position,
    instance_status,
    masked,
    offset_entries,
)

log = logging.getLogger("airflow_cdc.kafka_connect.backend")

T = TypeVar("T")

#: An :class:`Ask` for a page of the notification topic rather than a Connect call.
NOTIFICATION_PAGE = "notification_page"
#: An :class:`Ask` for the source database's current position (``source_position``).
SOURCE_POSITION = "source_position"


@dataclass(frozen=True)
class Ask:
    """What a plan needs: ``method`` of the Connect client (or :data:`NOTIFICATION_PAGE`) and
    its arguments; the plan is sent the answer, or thrown Connect's error."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


Plan = Generator[Ask, Any, T]


class _Plans:
    """The operations as plans; ``self`` holds the connector's name and the Kafka settings."""

    url: str
    name: str
    notification_topic: str | None
    kafka_options: dict[str, Any]
    source_position: Callable[[], str] | None
    _warned: set[str]

    # -- the embedded instance's operations ------------------------------------------------------
    def _health(self) -> Plan[str]:
        """``"UP"`` while the connector exists and is not STOPPED; a STOPPED connector is
        ``ConnectorUnavailableError`` (as an embedded instance that stopped no longer answers)."""
        status = yield from self._connector_status()
        if status.state == STOPPED:
            raise ConnectorUnavailableError(
                "GET", f"{self.url}/connectors/{self.name}/status", 200, f"connector {self.name!r} is STOPPED"
            )
        return "UP"

    def _status(self) -> Plan[InstanceStatus]:
        """Connect's status, config and committed offsets as the instance's status."""
        status = yield from self._connector_status()
        config: dict[str, Any] = yield Ask("config", (self.name,))
        offsets = yield from self._committed(degrade=True)
        current = yield from self._current()
        return instance_status(status, config, offsets, self.url, current)

    def _position(self, target: str | None = None) -> Plan[InstancePosition]:
        """Committed positions per partition; with ``target`` whether each reached it."""
        status = yield from self._connector_status()
        config: dict[str, Any] = yield Ask("config", (self.name,))
        offsets = yield from self._committed(degrade=False)
        current = yield from self._current()
        return instance_position(status, config, offsets, target, current)

    def _offsets(self) -> Plan[list[OffsetEntry]]:
        """The committed offsets, every partition (``GET /connectors/{name}/offsets``)."""
        return (yield from self._committed(degrade=False))

    def _notifications(self, cursor: str | None = None, limit: int = 1000) -> Plan[NotificationPage]:
        """Debezium's notifications on the sink channel's topic after ``cursor``."""
        topic = self.notification_topic
        if not topic:
            config: dict[str, Any] = yield Ask("config", (self.name,))
            topic = str(config.get("notification.sink.topic.name") or "")
            channels = str(config.get("notification.enabled.channels") or "")
            if not topic or "sink" not in channels:
                raise ConfigError(
                    [
                        ConfigProblem(
                            "notification.enabled.channels",
                            f"connector {self.name!r} does not publish notifications to a topic ({channels or 'none'})",
                            "add sink to its notification.enabled.channels and set notification.sink.topic.name",
                        )
                    ]
                )
        if not self.kafka_options.get("bootstrap_servers"):
            raise ConfigError(
                [
                    ConfigProblem(
                        "bootstrap_servers",
                        "is not set: notifications are read from Kafka",
                        "give the client the Kafka cluster's bootstrap servers",
                    )
                ]
            )
        page: NotificationPage = yield Ask(NOTIFICATION_PAGE, (topic, cursor, limit))
        return page

    def _signal(
        self, kind: str, data: Mapping[str, Any] | str | None = None, *, signal_id: str | None = None
    ) -> Plan[str]:
        """Refused: Debezium has no HTTP signal channel."""
        yield from ()  # a plan that asks nothing
        raise SignalChannelError(
            f"connector {self.name!r} runs on Kafka Connect, where Debezium has no API signal channel: send "
            f"{kind!r} through the signal table (CdcSignalHook channel='source', signal.data.collection) or the Kafka "
            "signal channel (channel='kafka', signal.kafka.topic)"
        )

    def _connector(self, name: str) -> Plan[dict[str, Any]]:
        """Connect's ``GET /connectors/{name}`` (``name``, ``type``, ``tasks``, ``config``),
        passwords masked."""
        info: dict[str, Any] = yield Ask("info", (name,))
        return {**info, "config": masked(info.get("config") or {})}

    def _pause(self) -> Plan[StateChange]:
        yield Ask("pause", (self.name,))
        return StateChange(self.name, "PAUSED")

    def _resume(self) -> Plan[StateChange]:
        yield Ask("resume", (self.name,))
        return StateChange(self.name, "RUNNING")

    def _stop(self) -> Plan[StateChange]:
        """Stop the connector and its tasks; its config and offsets stay (``resume()`` starts it)."""
        yield Ask("stop", (self.name,))
        return StateChange(self.name, "STOPPED")

    # -- Connect's own ---------------------------------------------------------------------------
    def _validate(self, config: Mapping[str, Any]) -> Plan[dict[str, Any]]:
        """The Connect configuration of an engine ``config``, validated by the connector's
        plugin; ConfigError with Connect's messages if it rejects it."""
        engine_name = config.get("name")
        if engine_name and engine_name != self.name:
            raise ConfigError(
                [ConfigProblem("name", f"is {engine_name!r}, the connector is {self.name!r}", "make them the same")]
            )
        translated_config = connector_config(config, notification_topic=self.notification_topic or "")
        connector_class = str(translated_config["connector.class"])
        try:
            answer: dict[str, Any] = yield Ask("validate", (connector_class, {**translated_config, "name": self.name}))
        except ConnectRestError as exc:
            if "Failed to find any class" not in exc.message:
                raise
            raise ConfigError(
                [
                    ConfigProblem(
                        "connector.class", exc.message, "install the connector's plugin on every Connect worker"
                    )
                ]
            ) from None
        problems = [
            ConfigProblem(key.strip(), message.strip(), "mend it in the configuration")
            for key, _, message in (line.partition(":") for line in _validation_errors(answer))
        ]
        if problems:
            raise ConfigError(problems)
        return translated_config

    def _create(self, config: Mapping[str, Any]) -> Plan[dict[str, Any]]:
        """Create the connector from an engine configuration (validated first); Connect's
        answer. ``ConnectorRefusedError`` if one has this name."""
        connect_config = yield from self._validate(config)
        created: dict[str, Any] = yield Ask("create", (self.name, connect_config))
        return {**created, "config": masked(created.get("config") or {})}

    def _update(self, config: Mapping[str, Any]) -> Plan[dict[str, Any]]:
        """Replace the connector's configuration (or create it), validated first."""
        connect_config = yield from self._validate(config)
        updated: dict[str, Any] = yield Ask("put_config", (self.name, connect_config))
        return {**updated, "config": masked(updated.get("config") or {})}

    def _restart(self, include_tasks: bool = False, only_failed: bool = False) -> Plan[StateChange]:
        """Restart the connector (and its tasks, or only the failed ones)."""
        yield Ask("restart", (self.name,), {"include_tasks": include_tasks, "only_failed": only_failed})
        return StateChange(self.name, "RESTARTING")

    def _delete(self) -> Plan[None]:
        """Delete the connector (its offsets stay in the worker's offset topic)."""
        yield Ask("delete", (self.name,))

    def _alter_offsets(self, offsets: Sequence[OffsetEntry | Mapping[str, Any]]) -> Plan[str]:
        """Set committed offsets (``offset`` None removes a partition's); the connector must be
        STOPPED (``ConnectorRefusedError`` otherwise). Connect's message."""
        yield from self._check_stopped("alter its offsets")
        entries = [e.to_json() if isinstance(e, OffsetEntry) else dict(e) for e in offsets]
        answer: dict[str, Any] = yield Ask("alter_offsets", (self.name, entries))
        return str((answer or {}).get("message") or "")

    def _reset_offsets(self) -> Plan[str]:
        """Remove every committed offset; the connector must be STOPPED. Connect's message."""
        yield from self._check_stopped("reset its offsets")
        answer: dict[str, Any] = yield Ask("reset_offsets", (self.name,))
        return str((answer or {}).get("message") or "")

    # -- parts -----------------------------------------------------------------------------------
    def _committed(self, *, degrade: bool) -> Plan[list[OffsetEntry]]:
        try:
            offsets = yield Ask("offsets", (self.name,))
        except ConnectRestError as exc:
            if exc.status not in (404, 405) or is_not_found(exc):
                raise
            if not degrade:
                raise ConnectorRefusedError(
                    exc.method, exc.url, exc.status, f"{exc.message}: reading offsets needs Kafka Connect 3.6 or later"
                ) from exc
            self._warn_once("offsets", f"Kafka Connect at {self.url} has no offsets API (3.6+): positions unknown")
            return []
        return offset_entries(offsets)

    def _current(self) -> Plan[str | None]:
        """The source's current position, read from the source database when the client was
        given how (Debezium reports none); None, said once, otherwise."""
        if self.source_position is None:
            self._warn_once("current", NO_CURRENT)
            return None
        current: str | None = yield Ask(SOURCE_POSITION)
        return current

    def _connector_status(self) -> Plan[ConnectorStatus]:
        """Connect's status; UNASSIGNED for a connector created a moment ago, which Connect
        answers "No status found" until a worker took it."""
        try:
            status: ConnectorStatus = yield Ask("status", (self.name,))
        except ConnectRestError as exc:
            if exc.status != 404 or not exc.message.startswith("No status found"):
                raise
            yield Ask("config", (self.name,))  # "Connector ... not found" when there is none
            return ConnectorStatus(self.name, UNASSIGNED, "", "source")
        return status

    def _check_stopped(self, action: str) -> Plan[None]:
        status = yield from self._connector_status()
        if status.state != STOPPED:
            raise ConnectorRefusedError(
                "GET",
                f"{self.url}/connectors/{self.name}/status",
                200,
                f"connector {self.name!r} is {status.state}: stop it first (stop()) to {action}, then resume() it",
            )

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("connector %r: %s", self.name, message)
