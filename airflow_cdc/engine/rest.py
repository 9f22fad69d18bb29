"""What the project's REST clients share (the engine's control API, Kafka Connect's): a request
described as data (:class:`Call`), and a sync and an async sender on httpx.

An API's client describes each operation once, as a ``Call``, and says how an answer is read
(``answer``: the call's result, or the API's error) and what a request that got no answer raises
(``no_answer``: a retriable error). Only sending differs between :class:`SyncSender` and
:class:`AsyncSender`, so the two forms of a client cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, Self, TypeVar

import httpx

T = TypeVar("T")


def json_body(response: httpx.Response) -> Any:
    """The answer's JSON, None when it has no body."""
    return response.json() if response.content else None


def error_message(response: httpx.Response) -> str | None:
    """The message of an error answered as ``{"error_code", "message"}`` (Kafka Connect's shape,
    which the control API uses too); None when the body is not that (a proxy's page, HTML)."""
    try:
        body = response.json()
    except ValueError:
        return None
    return str(body["message"]) if isinstance(body, dict) and body.get("message") else None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T] = json_body
    params: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None


class Answer(Protocol):
    """Reads a response into the call's result, or raises the API's error."""

    def __call__(self, call: Call[T], response: httpx.Response) -> T: ...


class NoAnswer(Protocol):
    """The error for a call that got no response (refused, timed out) from ``base_url``."""

    def __call__(self, call: Call[Any], base_url: str, exc: httpx.TransportError) -> Exception: ...


class SyncSender:
    """Sends calls with ``httpx.Client``; a context manager. ``options`` go to httpx (headers,
    auth, transport: tests replay recorded answers with ``httpx.MockTransport``)."""

    def __init__(self, url: str, answer: Answer, no_answer: NoAnswer, *, timeout: float, **options: Any) -> None:
        self.url = url.rstrip("/")
        self._answer, self._no_answer = answer, no_answer
        self._http = httpx.Client(base_url=self.url, timeout=timeout, **options)

    def _send(self, call: Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.path, params=dict(call.params), json=call.body)
        except httpx.TransportError as exc:
            raise self._no_answer(call, self.url, exc) from exc
        return self._answer(call, response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSender:
    """Sends calls with ``httpx.AsyncClient`` (for triggers); an async context manager."""

    def __init__(self, url: str, answer: Answer, no_answer: NoAnswer, *, timeout: float, **options: Any) -> None:
        self.url = url.rstrip("/")
        self._answer, self._no_answer = answer, no_answer
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, **options)

    async def _send(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.path, params=dict(call.params), json=call.body)
        except httpx.TransportError as exc:
            raise self._no_answer(call, self.url, exc) from exc
        return self._answer(call, response)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
