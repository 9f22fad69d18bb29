"""Clients of a Debezium connector on a Kafka Connect cluster with the operations and answers
of the embedded instance's (``EngineClient`` / ``AsyncEngineClient``); ``airflow_cdc.backends``
drives a ``kafka_connect`` connection through them (ADR 0017, ADR 0022).

Every operation is described once, as a *plan* (``plans.py``): a generator that yields what it
needs to ask and returns the answer built by the pure functions of ``instance_view``. The sync client runs a
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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import httpx

from airflow_cdc.kafka_connect.client import AsyncConnectClient, ConnectClient, ConnectRestError
from airflow_cdc.kafka_connect.errors import translated
from airflow_cdc.kafka_connect.notification_topic import read_page
from airflow_cdc.kafka_connect.plans import NOTIFICATION_PAGE, SOURCE_POSITION, Ask, Plan, _Plans

__all__ = ["NOTIFICATION_PAGE", "SOURCE_POSITION", "Ask", "AsyncConnectorEngineClient", "ConnectorEngineClient", "Plan"]

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


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
