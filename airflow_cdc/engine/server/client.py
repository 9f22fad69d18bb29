"""A typed client of an engine instance's control API, sync (:class:`EngineClient`) and async
(:class:`AsyncEngineClient`, for triggers) on httpx.

Every operation is described once, as a function that builds a :class:`~airflow_cdc.engine.rest.Call`
(what to send, and how to read the answer into the models the server answers from,
``models.py``); the clients inherit the operations and send them through the project's shared
senders (``airflow_cdc.engine.rest``, as the Kafka Connect client does), so the two forms cannot
drift apart. Typed: an operation returns ``InstanceStatus`` on the sync client and an awaitable
of it on the async one.

Errors are :class:`~airflow_cdc.engine.errors.ApiError` with the API's own message; 409 is also
a ``RefusedError``; an instance that cannot answer now (unreachable, a timeout, 502/503/504) is
``ApiUnavailableError``, a ``RetriableError``.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, overload
from urllib.parse import quote

import httpx

from airflow_cdc.engine.errors import ApiError, ApiRefusedError, ApiUnavailableError
from airflow_cdc.engine.rest import AsyncSender, Call, SyncSender, error_message
from airflow_cdc.engine.server.models import (
    InstancePosition,
    InstanceStatus,
    NotificationPage,
    OffsetEntry,
    StateChange,
)

T = TypeVar("T")
P = ParamSpec("P")

#: Statuses that mean "not now" rather than "no": a proxy, or an instance restarting behind one.
UNAVAILABLE = frozenset({502, 503, 504})


class _Operation(Generic[P, T]):
    """An operation of the API: read on a client, it is a method that sends the call
    ``describe`` builds - returning ``T`` on :class:`EngineClient`, an awaitable of ``T`` on
    :class:`AsyncEngineClient`."""

    def __init__(self, describe: Callable[P, Call[T]]) -> None:
        self.describe = describe

    @overload
    def __get__(self, client: None, owner: type) -> _Operation[P, T]: ...

    @overload
    def __get__(self, client: EngineClient, owner: type) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncEngineClient, owner: type) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: Any, owner: type) -> Any:
        if client is None:
            return self
        describe, send = self.describe, client._send

        @functools.wraps(describe)
        def operation(*args: P.args, **kwargs: P.kwargs) -> Any:
            return send(describe(*args, **kwargs))

        return operation


def _json(model: Callable[[Any], T]) -> Callable[[httpx.Response], T]:
    return lambda response: model(response.json())


# -- the operations, each described once --------------------------------------------------------
def _health() -> Call[str]:
    """``"UP"`` while the instance's API answers (no token needed)."""
    return Call("GET", "/health", _json(lambda body: str(body["status"])))


def _status() -> Call[InstanceStatus]:
    """State, phase, run id, tasks' counters, positions, the sink's figures and any error."""
    return Call("GET", "/status", _json(InstanceStatus.from_json))


def _position(target: str | None = None) -> Call[InstancePosition]:
    """Phase, committed and current positions and lag per task; with ``target`` (a position
    as users write it, e.g. an LSN ``0/16B3748``) also whether every task has reached it."""
    params = {} if target is None else {"target": target}
    return Call("GET", "/position", _json(InstancePosition.from_json), params)


def _offsets() -> Call[list[OffsetEntry]]:
    """The committed offsets, every partition."""
    return Call("GET", "/offsets", _json(lambda body: [OffsetEntry.from_json(e) for e in body["offsets"]]))


def _notifications(cursor: str | None = None, limit: int = 1000) -> Call[NotificationPage]:
    """The notifications after ``cursor`` (the ``cursor`` of the previous page; None: every one
    kept), at most ``limit``. A cursor from an earlier run of the instance gets the rest of
    that run and everything since; one the instance no longer knows gets everything kept, with
    ``reset`` set."""
    params: dict[str, str | int] = {"limit": limit}
    if cursor is not None:
        params["cursor"] = cursor
    return Call("GET", "/notifications", _json(NotificationPage.from_json), params)


def _signal(kind: str, data: Mapping[str, Any] | str | None = None, *, signal_id: str | None = None) -> Call[str]:
    """Send a Debezium signal (``execute-snapshot``, ``stop-snapshot``, ``pause-snapshot``,
    ``resume-snapshot``, ``log``); its id, which its notifications carry."""
    body: dict[str, Any] = {"type": kind, "data": data}
    if signal_id is not None:
        body["id"] = signal_id
    return Call("POST", "/signals", _json(lambda answer: str(answer["id"])), body=body)


def _connector(name: str) -> Call[dict[str, Any]]:
    """Kafka Connect's ``GET /connectors/<name>``: ``name``, ``type``, ``tasks`` and ``config``,
    the configuration the instance runs with (passwords left out)."""
    return Call("GET", f"/connectors/{quote(name, safe='')}", _json(dict))


def _pause() -> Call[StateChange]:
    """Stop polling the source; what is in flight is still delivered and committed."""
    return Call("POST", "/pause", _json(StateChange.from_json))


def _resume() -> Call[StateChange]:
    return Call("POST", "/resume", _json(StateChange.from_json))


def _stop() -> Call[StateChange]:
    """Ask the instance to stop gracefully (drain, commit, release its slots); it exits soon after."""
    return Call("POST", "/stop", _json(StateChange.from_json))


def _start(config: Mapping[str, Any] | None = None) -> Call[StateChange]:
    """A serving instance (``airflow-cdc engine serve``): start its engine with ``config`` laid
    over its file's (None: as it was last started); RefusedError when it runs with another."""
    return Call("POST", "/start", _json(StateChange.from_json), body={} if config is None else {"config": dict(config)})


def _alter_offsets(offsets: Sequence[OffsetEntry | Mapping[str, Any]]) -> Call[str]:
    """Kafka Connect's KIP-875 on a stopped serving instance: write these offsets (an entry whose
    ``offset`` is None forgets its partition); RefusedError while the engine runs. The same
    call as the Kafka Connect backend's."""
    entries = [e.to_json() if isinstance(e, OffsetEntry) else dict(e) for e in offsets]
    return Call("PATCH", "/offsets", _json(lambda a: str(a["message"])), body={"offsets": entries})


def _reset_offsets() -> Call[str]:
    """KIP-875: forget every offset of a stopped serving instance (the next start is a first start)."""
    return Call("DELETE", "/offsets", _json(lambda a: str(a["message"])))


def _flush() -> Call[dict[str, Any]]:
    """Commit what is delivered now rather than at the next ``offset.flush.interval.ms``:
    ``{"committed": bool, "offsets": [...]}`` (committed False: a task did not answer in time)."""
    return Call("POST", "/offsets/flush", _json(dict))


def _metrics() -> Call[str]:
    """Prometheus metrics, text exposition format."""
    return Call("GET", "/metrics", lambda response: response.text)


class _Operations:
    health = _Operation(_health)
    status = _Operation(_status)
    position = _Operation(_position)
    offsets = _Operation(_offsets)
    notifications = _Operation(_notifications)
    signal = _Operation(_signal)
    connector = _Operation(_connector)
    pause = _Operation(_pause)
    resume = _Operation(_resume)
    stop = _Operation(_stop)
    start = _Operation(_start)
    alter_offsets = _Operation(_alter_offsets)
    reset_offsets = _Operation(_reset_offsets)
    flush = _Operation(_flush)
    metrics = _Operation(_metrics)


# -- answers ------------------------------------------------------------------------------------
def _answer(call: Call[T], response: httpx.Response) -> T:
    if response.is_success:
        return call.read(response)
    message = error_message(response)
    if message is None:  # not the API's JSON: a proxy, or something else listening at this address
        message = f"{response.reason_phrase or 'HTTP error'}: {response.text[:200]!r}"
    status = response.status_code
    error = ApiUnavailableError if status in UNAVAILABLE else ApiRefusedError if status == 409 else ApiError
    raise error(call.method, str(response.url), status, message)


def _no_answer(call: Call[Any], base_url: str, exc: httpx.TransportError) -> ApiUnavailableError:
    return ApiUnavailableError(call.method, f"{base_url}{call.path}", 0, f"{type(exc).__name__}: {exc}")


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def tls_context(cafile: str | None = None, certfile: str | None = None, keyfile: str | None = None) -> ssl.SSLContext:
    """What an https API is trusted with: the CA that signed its certificate (the system's by
    default), and this client's certificate when the API asks for one."""
    context = ssl.create_default_context(cafile=cafile or None)
    if certfile:
        context.load_cert_chain(certfile, keyfile or None)
    return context


class EngineClient(_Operations, SyncSender):
    """``EngineClient("http://127.0.0.1:8765", token)``; a context manager. ``tls``: the context
    an https API is checked with (:func:`tls_context`). ``transport`` replaces the network
    (tests: ``httpx.MockTransport``)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        tls: ssl.SSLContext | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            url, _answer, _no_answer, timeout=timeout, headers=_headers(token), transport=transport, verify=tls or True
        )


class AsyncEngineClient(_Operations, AsyncSender):
    """The same operations as coroutines: ``await client.status()``."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        tls: ssl.SSLContext | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            url, _answer, _no_answer, timeout=timeout, headers=_headers(token), transport=transport, verify=tls or True
        )
