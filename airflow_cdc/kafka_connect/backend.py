"""The engine backend for a Debezium connector on a Kafka Connect cluster: clients with the
operations and answers of the embedded instance's (``EngineClient`` / ``AsyncEngineClient``), so
the hook can hand one out for a ``kafka_connect`` connection and every operator, sensor and
trigger works unchanged (ADR 0011; issue 17).

Every operation is described once, as a *plan*: a generator that yields what it needs to ask
(an :class:`Ask`: an operation of the Kafka Connect client, or a page of the notification topic)
and returns the answer built by the pure functions of ``instance_view``. The sync client runs a
plan with :class:`~airflow_cdc.kafka_connect.client.ConnectClient`, the async one with
``AsyncConnectClient`` (and reads Kafka in a thread): one HTTP code path, and the two forms
cannot drift apart. Connect's errors leave as the engine's (``kafka_connect.errors``).

Where Debezium on Connect has less than the embedded instance, the answers degrade and say so:
no source head position (``current``, ``lag``, ``caught_up`` are None), no HTTP signal channel
(``signal`` refuses, naming the signal table and the Kafka channel), no counters per task.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import httpx

from airflow_cdc.engine.errors import ConfigError, ConfigProblem
from airflow_cdc.engine.notifications import NotificationPage
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, StateChange
from airflow_cdc.kafka_connect.client import (
    STOPPED,
    UNASSIGNED,
    AsyncConnectClient,
    ConnectClient,
    ConnectorStatus,
    ConnectRestError,
)
from airflow_cdc.kafka_connect.client import validation_errors as _validation_errors
from airflow_cdc.kafka_connect.connector_config import connector_config
from airflow_cdc.kafka_connect.errors import (
    ConnectorRefusedError,
    ConnectorUnavailableError,
    SignalChannelError,
    is_not_found,
    translated,
)
from airflow_cdc.kafka_connect.instance_view import (
    NO_CURRENT,
    instance_position,
    instance_status,
    masked,
    offset_entries,
)
from airflow_cdc.kafka_connect.notification_topic import read_page

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

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


class _Operation(Generic[P, T]):
    """A plan, read on a client: a method returning ``T`` (sync) or an awaitable of it (async)."""

    def __init__(self, plan: Callable[Concatenate[Any, P], Plan[T]]) -> None:
        self.plan = plan

    @overload
    def __get__(self, client: None, owner: type) -> _Operation[P, T]: ...

    @overload
    def __get__(self, client: ConnectorEngineClient, owner: type) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncConnectorEngineClient, owner: type) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: Any, owner: type) -> Any:
        if client is None:
            return self
        plan, run = self.plan, client._run

        @functools.wraps(plan)
        def operation(*args: P.args, **kwargs: P.kwargs) -> Any:
            return run(plan(client, *args, **kwargs))

        return operation


class _Operations(_Plans):
    health = _Operation(_Plans._health)
    status = _Operation(_Plans._status)
    position = _Operation(_Plans._position)
    offsets = _Operation(_Plans._offsets)
    notifications = _Operation(_Plans._notifications)
    signal = _Operation(_Plans._signal)
    connector = _Operation(_Plans._connector)
    pause = _Operation(_Plans._pause)
    resume = _Operation(_Plans._resume)
    stop = _Operation(_Plans._stop)
    validate = _Operation(_Plans._validate)
    create = _Operation(_Plans._create)
    update = _Operation(_Plans._update)
    restart = _Operation(_Plans._restart)
    delete = _Operation(_Plans._delete)
    alter_offsets = _Operation(_Plans._alter_offsets)
    reset_offsets = _Operation(_Plans._reset_offsets)

    def _setup(
        self,
        url: str,
        name: str,
        notification_topic: str | None,
        bootstrap_servers: str | None,
        kafka: Any,
        source_position: Callable[[], str] | None,
    ) -> None:
        self.url, self.name, self.notification_topic = url.rstrip("/"), name, notification_topic
        self.source_position = source_position
        self.kafka_options = dict(kafka or {})
        if bootstrap_servers:
            self.kafka_options["bootstrap_servers"] = bootstrap_servers
        self._warned = set()


class _PlanRun:
    """One plan being run: the step both clients take (send the answer, or throw Connect's
    error, into the plan), so the sync and the async loop differ only in how they ask."""

    def __init__(self, plan: Plan[Any], name: str) -> None:
        self.plan, self.name = plan, name
        self.value: Any = None

    def advance(self, answer: Any = None, error: ConnectRestError | None = None) -> Ask | None:
        """The plan's next ask, or None once it returned (its answer in ``value``); an error
        the plan does not handle leaves as the engine's (``translated``)."""
        try:
            return self.plan.send(answer) if error is None else self.plan.throw(error)
        except StopIteration as done:
            self.value = done.value
            return None
        except ConnectRestError as exc:
            raise translated(exc, self.name) from exc


class ConnectorEngineClient(_Operations):
    """``ConnectorEngineClient("http://connect:8083", "shop", bootstrap_servers="kafka:9092")``:
    the engine client's operations for connector ``connector`` (plus Connect's own: ``create``,
    ``update``, ``validate``, ``restart``, ``delete``, ``alter_offsets``, ``reset_offsets``);
    a context manager.

    :param url: Kafka Connect's REST URL.
    :param connector: the connector's name.
    :param auth: Connect's basic-auth ``(user, password)``.
    :param timeout: seconds per HTTP request (and per read of the notification topic).
    :param notification_topic: the topic of Debezium's sink notification channel; None: the
        connector's ``notification.sink.topic.name``.
    :param bootstrap_servers: the Kafka cluster of the notification topic.
    :param kafka_options: further kafka-python consumer arguments (security settings).
    :param source_position: reads the source database's current position, as the connector's
        positions are written (an LSN, a GTID set): Debezium reports none, so ``current``,
        ``lag`` and ``caught_up`` come from it (None without it).
    :param transport: replaces the network (tests replay recorded answers).
    """

    def __init__(
        self,
        url: str,
        connector: str,
        *,
        auth: tuple[str, str] | None = None,
        timeout: float = 30.0,
        notification_topic: str | None = None,
        bootstrap_servers: str | None = None,
        kafka_options: Mapping[str, Any] | None = None,
        source_position: Callable[[], str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._setup(url, connector, notification_topic, bootstrap_servers, kafka_options, source_position)
        self.timeout = timeout
        self._connect = ConnectClient(url, timeout=timeout, auth=auth, transport=transport)

    def _run(self, plan: Plan[T]) -> T:
        run = _PlanRun(plan, self.name)
        ask = run.advance()
        while ask is not None:
            try:
                ask = run.advance(self._ask(ask))
            except ConnectRestError as exc:
                ask = run.advance(error=exc)
        return run.value  # type: ignore[no-any-return]

    def _ask(self, ask: Ask) -> Any:
        if ask.method == NOTIFICATION_PAGE:
            return read_page(*ask.args, kafka_options=self.kafka_options, timeout=self.timeout)
        if ask.method == SOURCE_POSITION:
            assert self.source_position is not None
            return self.source_position()
        return getattr(self._connect, ask.method)(*ask.args, **ask.kwargs)

    def close(self) -> None:
        self._connect.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConnectorEngineClient(_Operations):
    """The same operations as coroutines (for triggers): ``await client.status()``; the
    notification topic is read in a thread."""

    def __init__(
        self,
        url: str,
        connector: str,
        *,
        auth: tuple[str, str] | None = None,
        timeout: float = 30.0,
        notification_topic: str | None = None,
        bootstrap_servers: str | None = None,
        kafka_options: Mapping[str, Any] | None = None,
        source_position: Callable[[], str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._setup(url, connector, notification_topic, bootstrap_servers, kafka_options, source_position)
        self.timeout = timeout
        self._connect = AsyncConnectClient(url, timeout=timeout, auth=auth, transport=transport)

    async def _run(self, plan: Plan[T]) -> T:
        run = _PlanRun(plan, self.name)
        ask = run.advance()
        while ask is not None:
            try:
                ask = run.advance(await self._ask(ask))
            except ConnectRestError as exc:
                ask = run.advance(error=exc)
        return run.value  # type: ignore[no-any-return]

    async def _ask(self, ask: Ask) -> Any:
        if ask.method == NOTIFICATION_PAGE:
            page = functools.partial(read_page, *ask.args, kafka_options=self.kafka_options, timeout=self.timeout)
            return await asyncio.to_thread(page)
        if ask.method == SOURCE_POSITION:
            assert self.source_position is not None
            return await asyncio.to_thread(self.source_position)
        return await getattr(self._connect, ask.method)(*ask.args, **ask.kwargs)

    async def aclose(self) -> None:
        await self._connect.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
