"""The control API's server: uvicorn on its own thread, on a socket bound before it starts (a
port of 0 is known at once), with a network-facing service's limits (ADR 0019, issue 26): a
request - line, headers, body - must arrive within ``api.read.timeout.ms`` (408 and closed
otherwise; ``api_protocol.py``), headers of at most 64 KiB (431), bodies of at most 64 KiB by
their Content-Length or, chunked, as they stream in (413; a ``Content-Length`` that is not a
length is 400), at most 64 connections at once, idle keep-alive connections closed after 5 s,
and TLS - client certificates too - when the instance configures it (``api.ssl.*``)."""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import uvicorn

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.server.api import MAX_BODY, Refusal, create_app, error_response
from airflow_cdc.engine.server.api_protocol import bounded_protocol

if TYPE_CHECKING:
    from airflow_cdc.engine.server.instance import EngineInstance
    from airflow_cdc.engine.server.instance_files import Tls

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
KEEP_ALIVE_S = 5
#: The request line and headers; h11 answers 431 past it.
MAX_HEADERS = 64 * 1024
#: What is read (and dropped) of a body after the answer went out before it ended, so that a
#: client that sent a little too much keeps its connection; past it the connection is closed.
MAX_DRAIN = 4 * MAX_BODY

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _BodyLimit:
    """Refuses a body over MAX_BODY (413) before the route reads it, by its Content-Length or,
    without one, as it streams in; a Content-Length that is not a non-negative number is 400."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            if not length.isdigit():
                await error_response(HTTPStatus.BAD_REQUEST, f"Content-Length {length!r} is not a length")(
                    scope, receive, send
                )
                return
            if int(length) > MAX_BODY:
                await _too_large(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > MAX_BODY:
                raise Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {MAX_BODY} bytes")
            return message

        await self.app(scope, limited, send)


async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
    await error_response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {MAX_BODY} bytes")(
        scope, receive, send
    )


class ControlApi:
    """The API served by uvicorn on its own thread, on a socket bound before it starts (so a
    port of 0 is known at once)."""

    def __init__(self, instance: EngineInstance, host: str, port: int, token: str, tls: Tls | None = None) -> None:
        self.instance, self.token, self.tls = instance, token, tls
        self._socket = _bind(host, port)
        self.app = _BodyLimit(create_app(instance, token, lambda: self.url))
        read_timeout_ms = int(instance.instance_settings["api.read.timeout.ms"])
        config = uvicorn.Config(
            self.app,
            # h11 whether or not httptools is installed: the limits live in its protocol
            http=bounded_protocol(read_timeout_ms, header_limit=MAX_HEADERS, drain_limit=MAX_DRAIN),
            ws="none",  # no route takes a WebSocket; an Upgrade is answered as plain HTTP
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_keep_alive=KEEP_ALIVE_S,
            limit_concurrency=MAX_CONNECTIONS,
            ssl_certfile=tls.certfile if tls else None,
            ssl_keyfile=tls.keyfile if tls else None,
            ssl_ca_certs=tls.cafile if tls and tls.cafile else None,
            ssl_cert_reqs=ssl.CERT_REQUIRED if tls and tls.cafile else ssl.CERT_NONE,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="control-api", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"

    def start(self, timeout: float = 30.0) -> str:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:  # a few milliseconds; the thread reports a failure itself
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise CdcError(f"the control API did not start on {self.url}: see the log above")
            time.sleep(0.01)
        log.info("instance %r: control API at %s", self.instance.name, self.url)
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.ident is not None:
            self._thread.join(10)
        self._socket.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CdcError(
            f"the control API cannot listen on {host}:{port}: {exc.strerror}; set api.host / api.port"
        ) from None
    sock.listen(MAX_CONNECTIONS)
    sock.set_inheritable(True)
    return sock
