"""A small client for Kafka Connect's REST API, sync (``ConnectClient``) and async
(``AsyncConnectClient``) on httpx.

Both build the same ``Call`` for every operation and send it through the project's shared
senders (``airflow_cdc.engine.rest``), so the two cannot drift apart. Connect answers errors as
``{"error_code": ..., "message": ...}``; they become ``ConnectRestError`` with that message. A
worker that cannot answer now is ``ConnectUnavailableError``, which is retriable: a refused
connection or a timeout, 503, a 409 other than "already exists" (a rebalance or a concurrent
config change), a 500 "Request timed out" (the herder is busy) or "... a rebalance is expected"
(a connector was just created or deleted), and a 404 that is not Connect's
JSON (a starting worker's web server answers every path with Jetty's HTML page before the API
is registered; recorded under tests/unit/data/connect/).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from airflow_cdc.engine.errors import CdcError, RetriableError
from airflow_cdc.engine.rest import AsyncSender, Call, SyncSender, error_message

#: Connector and task states as Connect reports them.
RUNNING, FAILED, PAUSED, STOPPED, UNASSIGNED, RESTARTING = (
    "RUNNING",
    "FAILED",
    "PAUSED",
    "STOPPED",
    "UNASSIGNED",
    "RESTARTING",
)


class ConnectRestError(CdcError):
    """Connect refused a request; ``status`` is the HTTP status, ``message`` Connect's words."""

    def __init__(self, method: str, url: str, status: int, message: str) -> None:
        self.method, self.url, self.status, self.message = method, url, status, message
        super().__init__(f"Kafka Connect {method} {url} -> {status}: {message}")


class ConnectUnavailableError(ConnectRestError, RetriableError):
    """Connect cannot answer now (unreachable, rebalancing, starting): worth trying again."""


@dataclass(frozen=True)
class TaskStatus:
    id: int
    state: str
    worker_id: str
    trace: str | None = None


@dataclass(frozen=True)
class ConnectorStatus:
    """``GET /connectors/{name}/status``."""

    name: str
    state: str
    worker_id: str
    type: str | None
    tasks: tuple[TaskStatus, ...] = ()
    trace: str | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ConnectorStatus:
        connector = body.get("connector", {})
        return cls(
            name=body["name"],
            state=connector.get("state", UNASSIGNED),
            worker_id=connector.get("worker_id", ""),
            type=body.get("type"),
            trace=connector.get("trace"),
            tasks=tuple(
                TaskStatus(t["id"], t.get("state", UNASSIGNED), t.get("worker_id", ""), t.get("trace"))
                for t in body.get("tasks", [])
            ),
        )

    @property
    def running(self) -> bool:
        """The connector and all of its tasks (at least one) are RUNNING."""
        return self.state == RUNNING and bool(self.tasks) and all(t.state == RUNNING for t in self.tasks)

    @property
    def failures(self) -> list[str]:
        """The failed connector or tasks, each with its trace's first line and root cause."""
        failed = []
        if self.state == FAILED:
            failed.append(f"connector {self.name}: {_summary(self.trace)}")
        failed += [f"task {t.id}: {_summary(t.trace)}" for t in self.tasks if t.state == FAILED]
        return failed


def _summary(trace: str | None) -> str:
    """A Java stack trace's first line, and its last "Caused by:" line: Debezium wraps the
    database's own words ("could not access file ...") a few exceptions deep."""
    lines = [line.strip() for line in (trace or "").splitlines() if line.strip()]
    if not lines:
        return "no trace"
    causes = [line.removeprefix("Caused by:").strip() for line in lines if line.startswith("Caused by:")]
    return f"{lines[0]} (caused by: {causes[-1]})" if causes else lines[0]


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(part, safe="") for part in parts)


class _Calls:
    """Every operation as a ``Call``; the senders (``airflow_cdc.engine.rest``) send them."""

    _send: Callable[[Call[Any]], Any]

    def version(self) -> Any:
        """``{"version", "commit", "kafka_cluster_id"}``."""
        return self._send(Call("GET", "/"))

    def plugins(self) -> Any:
        """The connector classes installed: ``[{"class", "type", "version"}, ...]``."""
        return self._send(Call("GET", "/connector-plugins"))

    def connectors(self) -> Any:
        return self._send(Call("GET", "/connectors"))

    def create(self, name: str, config: Mapping[str, Any]) -> Any:
        """Create a connector; ``ConnectRestError`` (409) if one has that name."""
        return self._send(Call("POST", "/connectors", body={"name": name, "config": _strings(config)}))

    def put_config(self, name: str, config: Mapping[str, Any]) -> Any:
        """Create the connector, or replace its config."""
        return self._send(Call("PUT", _path("connectors", name, "config"), body=_strings(config)))

    def info(self, name: str) -> Any:
        """``{"name", "config", "tasks", "type"}``."""
        return self._send(Call("GET", _path("connectors", name)))

    def config(self, name: str) -> Any:
        return self._send(Call("GET", _path("connectors", name, "config")))

    def status(self, name: str) -> Any:
        return self._send(Call("GET", _path("connectors", name, "status"), read=_status))

    def pause(self, name: str) -> Any:
        return self._send(Call("PUT", _path("connectors", name, "pause")))

    def resume(self, name: str) -> Any:
        return self._send(Call("PUT", _path("connectors", name, "resume")))

    def stop(self, name: str) -> Any:
        """Stop the connector and its tasks, keeping its config (the state offsets change in)."""
        return self._send(Call("PUT", _path("connectors", name, "stop")))

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> Any:
        params = {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
        return self._send(Call("POST", _path("connectors", name, "restart"), params=params))

    def delete(self, name: str) -> Any:
        return self._send(Call("DELETE", _path("connectors", name)))

    def offsets(self, name: str) -> Any:
        """``[{"partition": {...}, "offset": {...}}, ...]`` (Connect 3.5+)."""
        return self._send(Call("GET", _path("connectors", name, "offsets"), read=lambda r: r.json()["offsets"]))

    def alter_offsets(self, name: str, offsets: list[Mapping[str, Any]]) -> Any:
        """Set offsets (``offset`` None removes one); the connector must be STOPPED."""
        return self._send(Call("PATCH", _path("connectors", name, "offsets"), body={"offsets": offsets}))

    def reset_offsets(self, name: str) -> Any:
        """Remove every offset of the connector; it must be STOPPED."""
        return self._send(Call("DELETE", _path("connectors", name, "offsets")))

    def validate(self, connector_class: str, config: Mapping[str, Any]) -> Any:
        """Connect's validation of a config: ``{"error_count", "configs": [...]}``. Connect
        requires ``name`` in the config it validates; without one (a config as passed to
        ``create``) the short class name stands in, so that only real problems are counted."""
        short = connector_class.rsplit(".", 1)[-1]
        body = _strings({"connector.class": connector_class, "name": short, **config})
        return self._send(Call("PUT", _path("connector-plugins", short, "config", "validate"), body=body))


def _strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Connect configs are string maps; Python values are written as Connect expects them."""
    return {
        key: (str(value).lower() if isinstance(value, bool) else str(value))
        for key, value in config.items()
        if value is not None  # unset: Connect's default applies (it has no null)
    }


def _status(response: httpx.Response) -> ConnectorStatus:
    return ConnectorStatus.from_json(response.json())


def validation_errors(answer: Mapping[str, Any]) -> list[str]:
    """``"key: message"`` for every error in an answer of ``validate()``."""
    return [
        f"{item['value']['name']}: {error}" for item in answer.get("configs", []) for error in item["value"]["errors"]
    ]


def _check(call: Call[Any], response: httpx.Response) -> Any:
    if response.is_success:
        return call.read(response)
    status = response.status_code
    message = error_message(response)
    if message is not None:
        retriable = status == 503 or (status == 409 and "already exists" not in message)
        busy = message.startswith("Request timed out") or "rebalance is expected" in message
        retriable = retriable or (status == 500 and busy)
    else:
        # Not Connect's error body: its web server answered before the REST API was registered
        # (HTML 404 while the worker starts), or something else sits at this URL.
        message = f"{response.reason_phrase or 'HTTP error'} (not a Kafka Connect answer: {response.text[:200]!r})"
        retriable = status in (404, 409, 503)
    error = ConnectUnavailableError if retriable else ConnectRestError
    raise error(call.method, str(response.url), status, message)


def _unavailable(call: Call[Any], base_url: str, exc: httpx.TransportError) -> ConnectUnavailableError:
    return ConnectUnavailableError(call.method, f"{base_url}{call.path}", 0, f"{type(exc).__name__}: {exc}")


class ConnectClient(_Calls, SyncSender):
    """Synchronous client: ``ConnectClient("http://127.0.0.1:8083")``; a context manager.
    ``transport`` replaces the network (tests replay recorded answers with ``httpx.MockTransport``)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        auth: tuple[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(url, _check, _unavailable, timeout=timeout, auth=auth, transport=transport)

    def wait_running(self, name: str, *, timeout: float = 60.0) -> ConnectorStatus:
        """Poll the status until the connector and its tasks run; fail at once with the trace of a
        FAILED connector or task, or at the deadline with the last status."""
        deadline = time.monotonic() + timeout
        status: ConnectorStatus | None = None
        while True:
            try:
                status = self.status(name)
            except ConnectRestError as exc:
                if exc.status not in (0, 404, 409, 503):  # not created yet, or rebalancing
                    raise
            else:
                if status.running:
                    return status
                if status.failures:
                    raise ConnectRestError(
                        "GET", f"{self.url}/connectors/{name}/status", 200, "; ".join(status.failures)
                    )
            if time.monotonic() > deadline:
                raise ConnectRestError(
                    "GET", f"{self.url}/connectors/{name}/status", 200, f"not RUNNING after {timeout:.0f}s: {status}"
                )
            time.sleep(0.1)


class AsyncConnectClient(_Calls, AsyncSender):
    """The same operations as coroutines (for triggers): ``await client.status(name)``."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        auth: tuple[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(url, _check, _unavailable, timeout=timeout, auth=auth, transport=transport)
