"""The control HTTP API of an engine instance: FastAPI, served by uvicorn (``api_server.py``; ADR 0019).

Every route but ``/health`` and ``/openapi.json`` needs ``Authorization: Bearer <token>``, and
an empty token is never accepted (an instance refuses to serve without one). Answers are built
from the models in ``models.py``, which the client (``client.py``) reads back; errors are Kafka
Connect's ``{"error_code", "message"}``. Besides its own routes it answers Kafka Connect's REST
API for its one connector (``/connectors``, ``/connectors/<name>``, ``.../status``,
``.../offsets``, ``PUT .../stop|pause|resume``), so a client written for a Debezium connector on
a Connect cluster drives an embedded instance the same way. The OpenAPI document is generated
from the routes.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from airflow_cdc.engine.errors import CdcError, OffsetError, RefusedError
from airflow_cdc.engine.secret_keys import without_secrets
from airflow_cdc.engine.server.instance_files import override_problems
from airflow_cdc.engine.server.metrics import render_metrics
from airflow_cdc.engine.server.models import StateChange
from airflow_cdc.engine.signals import SignalError
from airflow_cdc.engine.storage import OffsetStore

if TYPE_CHECKING:
    from airflow_cdc.engine.server.instance import EngineInstance

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
BODY_TIMEOUT_S = 10.0
#: How long POST /offsets/flush waits for every task to commit.
FLUSH_TIMEOUT_S = 10.0


class Refusal(Exception):
    """An answer in Kafka Connect's error shape."""

    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message
        super().__init__(message)


def error_response(status: int, message: str, *, auth: bool = False) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="airflow-cdc"'} if auth else None
    return JSONResponse({"error_code": int(status), "message": message}, status_code=status, headers=headers)


class _Json(JSONResponse):
    """orjson, as the client reads it (non-string keys, anything else as its text)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=str, option=orjson.OPT_NON_STR_KEYS)


def create_app(instance: EngineInstance, token: str, url: Callable[[], str]) -> FastAPI:
    """The API's routes over ``instance``; ``url`` is the API's own address (Connect's worker id)."""
    if not token:
        raise CdcError("the control API needs a token; an empty one would let anyone in")
    bearer = HTTPBearer(auto_error=False, description="the instance's api.token")

    def authorized(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:  # noqa: B008
        given = credentials.credentials.strip() if credentials is not None else ""
        if not given or not hmac.compare_digest(given.encode(), token.encode()):
            raise Refusal(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token")

    app = FastAPI(
        title="airflow-cdc engine instance control API",
        version="1",
        description="One engine instance. The /connectors routes mirror Kafka Connect's REST API. "
        'Errors are {"error_code", "message"}.',
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        default_response_class=_Json,
        redirect_slashes=False,
    )
    _install_error_handlers(app)

    @app.get("/health", summary="Liveness", tags=["public"])
    def health() -> dict[str, str]:
        return {"status": "UP"}

    routes = APIRouter(dependencies=[Depends(authorized)])
    _InstanceRoutes(instance).register(routes)
    _ConnectRoutes(instance, url).register(routes)
    app.include_router(routes)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(Refusal)
    async def api_error(_request: Request, exc: Refusal) -> JSONResponse:
        return error_response(exc.status, exc.message, auth=exc.status == HTTPStatus.UNAUTHORIZED)

    @app.exception_handler(RefusedError)
    async def refused(_request: Request, exc: RefusedError) -> JSONResponse:
        return error_response(HTTPStatus.CONFLICT, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == HTTPStatus.NOT_FOUND:
            return error_response(HTTPStatus.NOT_FOUND, f"no route {request.url.path}")
        if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
            return error_response(exc.status_code, f"{request.method} is not allowed on {request.url.path}")
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors())
        return error_response(HTTPStatus.BAD_REQUEST, problems or "bad request")

    @app.exception_handler(ClientDisconnect)
    async def gone(request: Request, _exc: ClientDisconnect) -> Response:
        # The client left before its body arrived, or was cut off for being slow (api_protocol):
        # not a failure of the route, and nobody reads this answer.
        log.info("control API: %s %s: the client went before its body arrived", request.method, request.url.path)
        return Response(status_code=HTTPStatus.BAD_REQUEST)

    @app.exception_handler(Exception)
    async def broken(request: Request, exc: Exception) -> JSONResponse:  # a broken request must not take it down
        log.exception("control API: %s %s failed", request.method, request.url.path)
        return error_response(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")


class _InstanceRoutes:
    """The instance's own routes."""

    def __init__(self, instance: EngineInstance) -> None:
        self.instance = instance

    def register(self, routes: APIRouter) -> None:
        get = ["GET"]
        routes.add_api_route(
            "/status",
            self.status,
            methods=get,
            summary="InstanceStatus: run_id, state, phase, position, tasks' counters, sink, error",
        )
        routes.add_api_route(
            "/position",
            self.position,
            methods=get,
            summary="InstancePosition: phase, committed and current positions and lag per task, caught_up; with "
            "?target=<position> (an LSN 0/16B3748, a GTID set, a binlog file:pos) whether every task reached it",
        )
        routes.add_api_route("/offsets", self.offsets, methods=get, summary="Committed offsets: {offsets: [...]}")
        routes.add_api_route(
            "/offsets",
            self.alter_offsets,
            methods=["PATCH"],
            summary="KIP-875: {offsets: [{partition, offset}]} of a stopped serving instance (409 while it runs)",
        )
        routes.add_api_route(
            "/offsets",
            self.reset_offsets,
            methods=["DELETE"],
            summary="KIP-875: forget the offsets of a stopped serving instance (409 while it runs)",
        )
        routes.add_api_route(
            "/offsets/flush",
            self.flush,
            methods=["POST"],
            summary="Commit what is delivered now, not at the next offset.flush.interval.ms: {committed, offsets}",
        )
        routes.add_api_route(
            "/metrics", self.metrics, methods=get, summary="Prometheus metrics (text format)", response_class=Response
        )
        _accepted(
            routes,
            "/start",
            self.start,
            summary="A serving instance (engine serve): start its engine, {config: {...}} over the file's; 409 when it "
            "runs with another configuration",
        )
        _accepted(routes, "/stop", self.stop, summary="Stop the engine gracefully (a serving instance's process stays)")
        _accepted(routes, "/pause", self.pause, summary="Stop polling the source; commits go on")
        _accepted(routes, "/resume", self.resume, summary="Poll the source again")
        _accepted(
            routes,
            "/signals",
            self.signals,
            summary="Send a signal (Debezium's shape): {id?, type, data}; type execute-snapshot, stop-snapshot, "
            "pause-snapshot, resume-snapshot or log",
        )
        routes.add_api_route(
            "/notifications",
            self.notifications,
            methods=get,
            summary="Notifications after a cursor: ?cursor=<run id>:<seq>&limit=<n> -> {run_id, cursor, "
            "notifications, reset}. A cursor of an earlier run gets the rest of that run and everything since; an "
            "unknown one gets everything kept, with reset=true",
        )

    def status(self) -> dict[str, Any]:
        return self.instance.status()

    def position(self, target: str | None = None) -> dict[str, Any]:
        try:
            return self.instance.position(target).to_json()
        except OffsetError as exc:
            raise Refusal(HTTPStatus.BAD_REQUEST, f"target: {exc}") from None

    def offsets(self) -> dict[str, Any]:
        return {"offsets": [entry.to_json() for entry in self.instance.offsets()]}

    def _store(self) -> OffsetStore:
        if not self.instance.serve:
            # Kafka Connect (KIP-875) alters offsets of a STOPPED connector only; this process
            # ends when its engine stops: offsets are changed with the CLI then.
            raise Refusal(
                HTTPStatus.CONFLICT,
                f"instance {self.instance.name!r} is running: stop it, then use `airflow-cdc offsets set|reset`",
            )
        return self.instance.stopped_store()

    async def alter_offsets(self, request: Request) -> dict[str, Any]:
        store = self._store()  # 409 first: a running engine's offsets are not changed, whatever asked
        entries = _json_object(await _body(request)).get("offsets")
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "partition" in e for e in entries):
            raise Refusal(HTTPStatus.BAD_REQUEST, "the body must be {offsets: [{partition, offset}, ...]}")
        store.start()
        try:
            for entry in entries:
                if entry.get("offset") is None:
                    store.delete(entry["partition"])
                else:
                    store.write([(entry["partition"], entry["offset"])])
        finally:
            store.stop()
        return {"message": "The offsets for this connector have been altered successfully"}

    def reset_offsets(self) -> dict[str, Any]:
        store = self._store()
        store.start()
        try:
            for partition, _ in store.entries():
                store.delete(partition)
        finally:
            store.stop()
        return {"message": "The offsets for this connector have been reset successfully"}

    def flush(self) -> dict[str, Any]:
        committed = self.instance.engine.commit_now(FLUSH_TIMEOUT_S)
        return {"committed": committed, **self.offsets()}

    def metrics(self) -> Response:
        text, content_type = render_metrics(self.instance)
        return Response(text, media_type=content_type)

    async def start(self, request: Request) -> dict[str, Any]:
        sent = _json_object(await _body(request))
        config = sent.get("config") or {}
        if not isinstance(config, dict):
            raise Refusal(HTTPStatus.BAD_REQUEST, "config must be an object of Debezium properties")
        problems = override_problems(config)
        if problems:
            raise Refusal(HTTPStatus.BAD_REQUEST, "config: " + "; ".join(str(p) for p in problems))
        return StateChange(self.instance.name, self.instance.request_start(config)).to_json()

    def stop(self) -> dict[str, Any]:
        self.instance.request_stop()
        return StateChange(self.instance.name, "STOPPING").to_json()

    def pause(self) -> dict[str, Any]:
        self.instance.engine.pause()
        return StateChange(self.instance.name, "PAUSED").to_json()

    def resume(self) -> dict[str, Any]:
        self.instance.engine.resume()
        return StateChange(self.instance.name, "RUNNING").to_json()

    async def signals(self, request: Request) -> dict[str, Any]:
        sent = _json_object(await _body(request))
        kind, data, signal_id = str(sent.get("type") or ""), sent.get("data"), sent.get("id") or None
        try:
            return {"id": self.instance.engine.signals.send(kind, data, signal_id)}
        except SignalError as exc:
            raise Refusal(HTTPStatus.BAD_REQUEST, str(exc)) from None

    def notifications(self, cursor: str | None = None, since: str | None = None, limit: str = "1000") -> dict[str, Any]:
        if not limit.isdigit() or int(limit) < 1:
            raise Refusal(HTTPStatus.BAD_REQUEST, f"limit={limit!r} is not a positive integer")
        return self.instance.engine.notifications.page(cursor if cursor is not None else since, int(limit)).to_json()


class _ConnectRoutes:
    """Kafka Connect's REST API for the instance's one connector."""

    def __init__(self, instance: EngineInstance, url: Callable[[], str]) -> None:
        self.instance, self.url, self.own = instance, url, _InstanceRoutes(instance)

    def register(self, routes: APIRouter) -> None:
        get = ["GET"]
        named = "/connectors/{name}"
        routes.add_api_route("/connectors", self.connectors, methods=get, summary="Kafka Connect: connector names")
        routes.add_api_route(named, self.connector, methods=get, summary="Kafka Connect: name, type, config, tasks")
        routes.add_api_route(named + "/status", self.status, methods=get, summary="Kafka Connect: states")
        routes.add_api_route(named + "/offsets", self.offsets, methods=get, summary="KIP-875: committed offsets")
        routes.add_api_route(
            named + "/offsets",
            self.alter_offsets,
            methods=["PATCH"],
            summary="KIP-875: {offsets: [{partition, offset}]} of a stopped serving instance (409 while it runs)",
        )
        routes.add_api_route(
            named + "/offsets",
            self.reset_offsets,
            methods=["DELETE"],
            summary="KIP-875: forget the offsets of a stopped serving instance (409 while it runs)",
        )
        _accepted(routes, named + "/stop", self.stop, summary="Kafka Connect: stop", method="PUT")
        _accepted(routes, named + "/pause", self.pause, summary="Kafka Connect: pause", method="PUT")
        _accepted(routes, named + "/resume", self.resume, summary="Kafka Connect: resume", method="PUT")

    def _named(self, name: str) -> None:
        if name != self.instance.name:
            raise Refusal(HTTPStatus.NOT_FOUND, f"Connector {name} not found")

    def connectors(self) -> list[str]:
        return [self.instance.name]

    def connector(self, name: str) -> dict[str, Any]:
        self._named(name)
        instance = self.instance
        status = instance.status()
        return {
            "name": instance.name,
            "type": "source",
            # what it runs, or would start, with: a service that has not run yet has a config too
            "config": without_secrets(instance.settings),
            "tasks": [{"connector": instance.name, "task": i} for i, _ in enumerate(status["tasks"])],
        }

    def status(self, name: str) -> dict[str, Any]:
        self._named(name)
        return connect_status_document(self.instance.name, self.instance.status(), self.url().split("://", 1)[-1])

    def offsets(self, name: str) -> dict[str, Any]:
        self._named(name)
        return self.own.offsets()

    async def alter_offsets(self, name: str, request: Request) -> dict[str, Any]:
        self._named(name)
        return await self.own.alter_offsets(request)

    def reset_offsets(self, name: str) -> dict[str, Any]:
        self._named(name)
        return self.own.reset_offsets()

    def stop(self, name: str) -> dict[str, Any]:
        self._named(name)
        return self.own.stop()

    def pause(self, name: str) -> dict[str, Any]:
        self._named(name)
        return self.own.pause()

    def resume(self, name: str) -> dict[str, Any]:
        """Kafka Connect resumes a paused connector, and starts a stopped one (KIP-875)."""
        self._named(name)
        if self.instance.serve and not self.instance.running:
            return StateChange(self.instance.name, self.instance.request_start()).to_json()
        return self.own.resume()


def _accepted(routes: APIRouter, path: str, endpoint: Callable[..., Any], summary: str, method: str = "POST") -> None:
    """A route that asks for something (202 Accepted, as Kafka Connect answers)."""
    routes.add_api_route(path, endpoint, methods=[method], status_code=HTTPStatus.ACCEPTED, summary=summary)


def connect_status_document(name: str, status: dict[str, Any], worker: str) -> dict[str, Any]:
    """Kafka Connect's status document (RUNNING, FAILED, ...) of an instance's status."""
    state = _connect_state(status["state"], status["error"], status["paused"])
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
    return {"name": name, "connector": connector, "tasks": tasks, "type": "source"}


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


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        sent = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise Refusal(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}") from None
    if not isinstance(sent, dict):
        raise Refusal(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
    return sent


async def _body(request: Request) -> bytes:
    """The request's body, read within BODY_TIMEOUT_S (a client that trickles it is cut off);
    the connection's own deadline (``api.read.timeout.ms``, ``api_protocol.py``) usually comes first."""
    try:
        return await asyncio.wait_for(request.body(), BODY_TIMEOUT_S)
    except TimeoutError:
        raise Refusal(HTTPStatus.REQUEST_TIMEOUT, f"the body did not arrive within {BODY_TIMEOUT_S:.0f}s") from None
