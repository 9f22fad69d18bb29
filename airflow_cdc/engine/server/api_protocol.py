"""The control API's HTTP/1.1 connections: uvicorn's h11 protocol with the limits a
network-facing service needs and uvicorn lacks (ADR 0019, issue 26).

* **A read deadline.** A request - its request line, headers and body - must arrive within
  ``api.read.timeout.ms`` of the connection opening, or of the first byte of a further request on
  a kept-alive connection; otherwise it is answered 408 and the connection closed. uvicorn's
  ``timeout_keep_alive`` only covers the idle time between requests and is reset by every byte
  received, so without this a client that connects and says nothing, or sends its headers a byte
  at a time, holds a connection (one of ``limit_concurrency``) for ever. The deadline is an
  absolute one, not an idle one, so trickling bytes does not extend it; it is disarmed once the
  request is complete, so a slow route (``POST /offsets/flush``) is not cut.
* **Bounded draining.** When the API answers before the body has arrived (413, 401, a route that
  ignores its body), h11 discards what still comes - for ever, on a chunked body. At most
  ``drain_limit`` more bytes are discarded (Go's net/http reads a bounded amount the same way,
  to keep a connection that sent a little too much), then the connection is closed.
* **h11, always, never httptools.** uvicorn picks httptools when it is installed; httptools
  bounds no header size (tens of megabytes of headers were buffered) and ignores
  ``h11_max_incomplete_event_size``. h11 refuses headers over that size (431), and
  a request h11 refuses is answered in the API's error shape with h11's reason ("bad
  Content-Length"), not uvicorn's bare "Invalid HTTP request received.".
"""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus
from typing import Any

import h11
import orjson
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

log = logging.getLogger(__name__)

#: The peer states in which a request is still arriving.
_RECEIVING = (h11.IDLE, h11.SEND_BODY)


def error_answer(status: int, message: str) -> bytes:
    """A whole response in Kafka Connect's error shape, written by the protocol itself (no
    route runs) and closing the connection."""
    body = orjson.dumps({"error_code": status, "message": message})
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Parser(h11.Connection):
    """h11's connection, remembering why it refused a request (uvicorn drops the reason)."""

    refusal: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = exc
            raise


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline per request, bounded headers and bounded
    draining; build one with :func:`bounded_protocol`."""

    read_timeout_ms = 10_000
    header_limit = 64 * 1024
    drain_limit = 64 * 1024

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.parser = _Parser(h11.SERVER, max_incomplete_event_size=self.header_limit)
        self.conn = self.parser
        self.deadline: asyncio.TimerHandle | None = None
        self.drained = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a client that connects and sends nothing never completes a request

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        was = self.conn.their_state
        if self.conn.our_state is h11.DONE and was is h11.SEND_BODY:
            # Answered already; h11 drops the rest of the body, but must not do so for ever.
            self.drained += len(data)
            if self.drained > self.drain_limit:
                log.info("control API: %s sent over %d bytes past its answer; closing", self._peer(), self.drain_limit)
                self._disarm()
                self.transport.close()
                return
        super().data_received(data)
        now = self.conn.their_state
        if self.transport.is_closing() or now not in _RECEIVING:
            self._disarm()  # the request is complete: the route's own time is not limited here
            return
        if was is h11.SEND_BODY and now is h11.IDLE:
            self._disarm()  # a body drained past an early answer ended: the next request's time starts
        self._arm()  # the first bytes of a request; a no-op while one is already timed

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.drained = 0
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0] and not self.transport.is_closing():
            self._arm()  # a pipelined request arrived in part while this one was answered

    def send_400_response(self, msg: str) -> None:
        """Answer a request h11 refused with h11's reason, in the API's error shape."""
        self._disarm()
        refusal = self.parser.refusal
        status = refusal.error_status_hint if refusal is not None else HTTPStatus.BAD_REQUEST
        if status == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE:
            reason = f"the request line and headers are over {self.header_limit} bytes"
        else:
            reason = f"not a valid HTTP/1.1 request: {refusal if refusal is not None else msg}"
        self.transport.write(error_answer(status, reason))
        self.transport.close()

    def _arm(self) -> None:
        if self.deadline is None:
            self.deadline = self.loop.call_later(self.read_timeout_ms / 1000, self._expire)

    def _disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _expire(self) -> None:
        self.deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if self.conn.their_state is h11.SEND_BODY:
            unanswered = cycle is not None and not cycle.response_started
        else:  # IDLE: a part of a request line or headers came, or nothing at all (closed quietly)
            unanswered = bool(self.conn.trailing_data[0])
        if cycle is not None and not cycle.response_complete:
            # The route waiting for the body gets http.disconnect, and its answer goes nowhere.
            cycle.disconnected = True
            cycle.message_event.set()
        log.info("control API: %s sent no complete request within %d ms; closing", self._peer(), self.read_timeout_ms)
        if unanswered:
            message = f"the request did not arrive within {self.read_timeout_ms} ms (api.read.timeout.ms)"
            self.transport.write(error_answer(HTTPStatus.REQUEST_TIMEOUT, message))
        self.transport.close()

    def _peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "a client"


def bounded_protocol(read_timeout_ms: int, header_limit: int, drain_limit: int) -> type[BoundedH11Protocol]:
    """The protocol class uvicorn builds each connection with (``uvicorn.Config(http=...)``),
    with these limits."""
    limits = {"read_timeout_ms": read_timeout_ms, "header_limit": header_limit, "drain_limit": drain_limit}
    return type("BoundedH11Protocol", (BoundedH11Protocol,), limits)
