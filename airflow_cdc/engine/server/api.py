"""The control HTTP API of an engine instance (stdlib ``http.server``; ADRs 0006 and 0010).

Bound to loopback by default; every route but ``/health`` and ``/openapi.json`` needs
``Authorization: Bearer <token>``. Answers are built from the models in ``models.py``, which
the client (``client.py``) reads back; errors are Kafka Connect's ``{"error_code", "message"}``.
Besides its own routes it answers the read side of Kafka Connect's REST API for its one
connector (``/connectors``, ``/connectors/<name>``, ``.../status``, ``.../offsets``,
``PUT .../stop``), so a client written for a Debezium connector on a Connect cluster can drive
an embedded instance the same way.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import orjson

from airflow_cdc.engine.config import is_secret_key
from airflow_cdc.engine.errors import OffsetError
from airflow_cdc.engine.server.metrics import render_metrics
from airflow_cdc.engine.server.models import StateChange
from airflow_cdc.engine.server.openapi import OPENAPI
from airflow_cdc.engine.signals import SignalError

if TYPE_CHECKING:
    from airflow_cdc.engine.server.instance import EngineInstance

log = logging.getLogger(__name__)

PUBLIC = {"/health", "/openapi.json"}
MAX_BODY = 64 * 1024


class ControlApi:
    def __init__(self, instance: EngineInstance, host: str, port: int, token: str) -> None:
        self.instance = instance
        self.token = token
        self._server = _Server((host, port), self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="control-api", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> str:
        self._thread.start()
        log.info("instance %r: control API at %s", self.instance.name, self.url)
        return self.url

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def authorized(self, header: str | None) -> bool:
        scheme, _, credentials = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), self.token.encode())

    def route(self, method: str, path: str, query: str = "", body: bytes = b"") -> tuple[int, Any]:
        params = {key: values[-1] for key, values in parse_qs(query).items()}
        routes = self.routes(params, body)
        handler = routes.get((method, path))
        if handler is None:
            if any(p == path for _, p in routes):
                return _error(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not allowed on {path}")
            return _error(HTTPStatus.NOT_FOUND, f"no route {path}")
        try:
            result = handler()
        except _BadRequest as exc:
            return _error(HTTPStatus.BAD_REQUEST, str(exc))
        if isinstance(result, tuple):
            return result
        return (HTTPStatus.ACCEPTED if method in ("POST", "PUT") else HTTPStatus.OK), result

    def routes(self, params: dict[str, str], body: bytes) -> dict[tuple[str, str], Callable[[], Any]]:
        """Every route but ``/metrics`` (text, served by the handler) and its handler."""
        instance = self.instance
        connector = f"/connectors/{instance.name}"
        return {
            ("GET", "/health"): lambda: {"status": "UP"},
            ("GET", "/openapi.json"): lambda: OPENAPI,
            ("GET", "/status"): instance.status,
            ("GET", "/position"): lambda: self._position(params),
            ("GET", "/offsets"): self._offsets,
            ("POST", "/stop"): self._stop,
            ("POST", "/pause"): self._pause,
            ("POST", "/resume"): self._resume,
            ("POST", "/signals"): lambda: self._signal(body),
            ("GET", "/notifications"): lambda: self._notifications(params),
            ("GET", "/connectors"): lambda: [instance.name],
            ("GET", connector): self._connector_info,
            ("GET", connector + "/status"): self._connect_status,
            ("GET", connector + "/offsets"): self._offsets,
            ("PATCH", connector + "/offsets"): self._offsets_refused,
            ("DELETE", connector + "/offsets"): self._offsets_refused,
            ("PUT", connector + "/stop"): self._stop,
            ("PUT", connector + "/pause"): self._pause,
            ("PUT", connector + "/resume"): self._resume,
        }

    def _signal(self, body: bytes) -> tuple[int, dict[str, Any]]:
        """Debezium's signal shape: ``{"id"?, "type", "data"}`` (data an object or JSON text)."""
        try:
            request = orjson.loads(body or b"{}")
            if not isinstance(request, dict):
                raise SignalError("the body must be a JSON object {id?, type, data}")
            signal_id = self.instance.engine.signals.send(
                str(request.get("type") or ""), request.get("data"), request.get("id") or None
            )
        except orjson.JSONDecodeError as exc:
            return _error(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}")
        except SignalError as exc:
            return _error(HTTPStatus.BAD_REQUEST, str(exc))
        return HTTPStatus.ACCEPTED, {"id": signal_id}

    def _notifications(self, params: dict[str, str]) -> dict[str, Any]:
        """``?cursor=<run>:<seq>`` (``since`` is its older name; a bare number is a place in
        this run) and ``limit``."""
        cursor = params.get("cursor", params.get("since"))
        limit = _positive_int(params, "limit", 1000)
        return self.instance.engine.notifications.page(cursor, limit).to_json()

    def _position(self, params: dict[str, str]) -> dict[str, Any]:
        try:
            return self.instance.position(params.get("target")).to_json()
        except OffsetError as exc:
            raise _BadRequest(f"target: {exc}") from None

    def _offsets(self) -> dict[str, Any]:
        return {"offsets": [entry.to_json() for entry in self.instance.offsets()]}

    def _offsets_refused(self) -> tuple[int, dict[str, Any]]:
        # Kafka Connect (KIP-875) alters offsets of a STOPPED connector only; a stopped instance
        # has no API, so offsets are changed with the CLI: airflow-cdc offsets set|reset.
        return _error(
            HTTPStatus.CONFLICT,
            f"instance {self.instance.name!r} is running: stop it, "
            "then use `airflow-cdc offsets set|reset --config ...`",
        )

    def _stop(self) -> dict[str, Any]:
        self.instance.request_stop()
        return StateChange(self.instance.name, "STOPPING").to_json()

    def _pause(self) -> dict[str, Any]:
        self.instance.engine.pause()
        return StateChange(self.instance.name, "PAUSED").to_json()

    def _resume(self) -> dict[str, Any]:
        self.instance.engine.resume()
        return StateChange(self.instance.name, "RUNNING").to_json()

    def _connector_info(self) -> dict[str, Any]:
        status = self.instance.status()
        return {
            "name": self.instance.name,
            "type": "source",
            "config": {k: v for k, v in self.instance.engine.config.items() if not is_secret_key(k)},
            "tasks": [{"connector": self.instance.name, "task": i} for i, _ in enumerate(status["tasks"])],
        }

    def _connect_status(self) -> dict[str, Any]:
        """Kafka Connect's status document (RUNNING, FAILED, ...)."""
        status = self.instance.status()
        state = _connect_state(status["state"], status["error"], status["paused"])
        worker = f"{self.url.removeprefix('http://')}"
        tasks = [
            {
                "id": i,
                "state": "FAILED" if task.get("error") else ("PAUSED" if task.get("paused") else state),
                "worker_id": worker,
                **({"trace": task["error"]} if task.get("error") else {}),
            }
            for i, task in enumerate(status["tasks"])
        ]
        connector: dict[str, Any] = {"state": state, "worker_id": worker}
        if status["error"]:
            connector["trace"] = status["error"]
        return {"name": self.instance.name, "connector": connector, "tasks": tasks, "type": "source"}


class _BadRequest(Exception):
    """A request parameter the API cannot use (answered 400 with this message)."""


def _error(status: int, message: str) -> tuple[int, dict[str, Any]]:
    """An error answer in Kafka Connect's shape, which the client reads (``ApiError.message``)."""
    return status, {"error_code": int(status), "message": message}


def _positive_int(params: dict[str, str], name: str, default: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    if not text.isdigit() or int(text) < 1:
        raise _BadRequest(f"{name}={text!r} is not a positive integer")
    return int(text)


def _connect_state(engine_state: str, error: str | None, paused: bool = False) -> str:
    if error:
        return "FAILED"
    if paused and engine_state == "POLLING_TASKS":
        return "PAUSED"
    if engine_state in ("STOPPING", "STOPPED"):
        return "STOPPED"
    if engine_state == "POLLING_TASKS":
        return "RUNNING"
    return "UNASSIGNED"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: ControlApi) -> None:
        super().__init__(address, _Handler)
        self.api = api


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "airflow-cdc"

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        api = self.server.api
        path = urlsplit(self.path).path.rstrip("/") or "/"
        if path not in PUBLIC and not api.authorized(self.headers.get("Authorization")):
            self._send(*_error(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token"), auth=True)
            return
        if path == "/metrics" and method == "GET":
            text, content_type = render_metrics(api.instance)
            self._send_bytes(HTTPStatus.OK, text, content_type)
            return
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        request_body = self.rfile.read(min(length, MAX_BODY)) if length else b""
        try:
            status, body = api.route(method, path, parts.query, request_body)
        except Exception as exc:  # a broken request must not take the instance down
            log.exception("control API: %s %s failed", method, path)
            status, body = _error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
        self._send(status, body)

    def _send(self, status: int, body: Any, *, auth: bool = False) -> None:
        data = orjson.dumps(body, default=str, option=orjson.OPT_NON_STR_KEYS)
        self._send_bytes(status, data, "application/json", auth=auth)

    def _send_bytes(self, status: int, data: bytes, content_type: str, *, auth: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if auth:
            self.send_header("WWW-Authenticate", 'Bearer realm="airflow-cdc"')
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("control API: " + format, *args)
