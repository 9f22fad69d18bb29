"""The one interface the Airflow layer drives an engine backend through (ADR 0022).

Three backends implement it: an instance beside the worker (``local``: its config file and
state directory are on this machine), an instance or engine service reached through its control
API (``service``), and a Debezium connector on Kafka Connect (``connect``). Operators, sensors,
triggers and the UI hold an :class:`EngineBackend` (or, in the triggerer, an
:class:`AsyncEngineBackend`) and never learn which one it is: what a backend cannot do is a
:class:`Capabilities` flag, not an ``isinstance`` - so event-driven DAGs, the CDC page's actions
and schema changes are written once for all three.

Answers are the control API's models (``InstanceStatus``, ``InstancePosition``, ...), which
every backend already speaks (the Connect backend translates Connect's answers into them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

from airflow_cdc.engine.errors import RefusedError, RetriableError
from airflow_cdc.engine.notifications import NotificationPage
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, StateChange

#: What a task tells the user to do when the instance beside the worker is not running.
START_FIX = "start it (CdcStartEngineOperator, or `airflow-cdc engine start --config ...` on its host)"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the callers ask these, never the backend's type."""

    #: Signals are taken by the backend itself (the control API's ``POST /signals``); Debezium on
    #: Connect has no such channel: the signal table or the Kafka signal topic instead.
    api_signals: bool = True
    #: It knows its source's current position (``current``, ``lag``, ``caught_up``). Debezium on
    #: Connect does only when the connection names the source database (``source_conn_id``).
    current_position: bool = True
    #: It can run its engine inside the task until a bound (``run_until``): its config file and
    #: offset store are on this worker.
    bounded_capture: bool = False


@dataclass(frozen=True)
class StartRequest:
    """What a start task asks for: the DAG's ``overrides`` over the backend's configuration, the
    source connection's properties and password (``source``: a ``SourceConfig``)."""

    overrides: Mapping[str, Any] = field(default_factory=dict)
    source: Any = None
    timeout: float = 300.0
    #: Start even with keys no part of the engine reads (each becomes a ``warn`` call).
    allow_unknown_keys: bool = False
    warn: Callable[[str], None] = lambda message: None


@dataclass(frozen=True)
class StartOutcome:
    #: False: it already ran with this configuration and was left alone.
    started: bool
    #: The whole configuration asked for (for lineage); empty where the backend keeps it (a service).
    requested: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StopOutcome:
    name: str | None
    #: False: it was not running (``state`` says what it was).
    stopped: bool
    state: str


class InstanceNotRunningError(RefusedError, RetriableError):
    """The instance beside the worker is not running: a retry after it is started may succeed."""


def identity_problem(served: str, expected: str | None, url: str, conn_id: str) -> RefusedError | None:
    """The error when the API at ``url`` serves another instance than the connection names."""
    if not expected or served == expected:
        return None
    return RefusedError(
        f"the API at {url} serves instance {served!r}, not {expected!r} (the login of connection {conn_id!r}): "
        "correct the connection's host, or its login"
    )


@runtime_checkable
class EngineBackend(Protocol):
    """An engine instance (or connector) as the Airflow layer drives it; a context manager."""

    capabilities: Capabilities

    @property
    def url(self) -> str:
        """The instance's API address (the Connect REST URL for a connector)."""

    def status_url(self) -> str:
        """Where a person sees its status (no network: "" when unknown)."""

    def verify(self) -> InstanceStatus:
        """Its status, once it answered as the instance the connection names (RefusedError if not)."""

    def status(self) -> InstanceStatus: ...

    def position(self, target: str | None = None) -> InstancePosition: ...

    def offsets(self) -> list[OffsetEntry]: ...

    def notifications(self, cursor: str | None = None, limit: int = 1000) -> NotificationPage: ...

    def signal(self, kind: str, data: Mapping[str, Any] | str | None = None, *, signal_id: str | None = None) -> str:
        """Send a Debezium signal; its id. Only where ``capabilities.api_signals``."""

    def running_config(self) -> dict[str, Any]:
        """The configuration it runs (or last ran) with, secrets left out."""

    def delivery_config(self) -> dict[str, Any]:
        """The running configuration with where its change events go (``sink.*``): what an apply
        job reads its inputs from."""

    def start(self, request: StartRequest) -> StartOutcome: ...

    def stop(self, *, drop_slot: bool = False, timeout: float = 60.0) -> StopOutcome: ...

    def pause(self) -> StateChange: ...

    def resume(self) -> StateChange: ...

    def reset_offsets(self, partition: Mapping[str, Any] | None = None) -> Any:
        """Forget committed offsets (refused while it runs); what was removed."""

    def seek(
        self,
        position: str,
        partition: Mapping[str, Any] | None = None,
        *,
        force: bool = False,
        password: str | None = None,
    ) -> dict[str, Any]:
        """Resume after ``position`` at the next start (refused while it runs, and when the source
        server - reached with ``password`` - has not reached ``position`` or cannot be asked,
        unless ``force``): ``{"partition", "before", "offset", "position"}``."""

    def run_until(self, props: Mapping[str, Any], bounds: Any) -> Any:
        """Run the engine of ``props`` in this process until ``bounds`` (``CaptureBounds``), commit,
        stop; a ``CaptureResult``. Only where ``capabilities.bounded_capture``."""

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class AsyncEngineBackend(Protocol):
    """What the triggers read, as coroutines; an async context manager."""

    capabilities: Capabilities

    @property
    def url(self) -> str: ...

    async def verify(self) -> InstanceStatus: ...

    async def status(self) -> InstanceStatus: ...

    async def position(self, target: str | None = None) -> InstancePosition: ...

    async def offsets(self) -> list[OffsetEntry]: ...

    async def notifications(self, cursor: str | None = None, limit: int = 1000) -> NotificationPage: ...

    async def running_config(self) -> dict[str, Any]: ...

    async def flush_offsets(self) -> bool:
        """Commit what is delivered now; whether it did (False where the backend cannot be asked:
        a connector on Connect commits on its worker's interval)."""

    def kafka_cluster(self) -> dict[str, Any] | None:
        """kafka-python settings of the cluster its events go to when the connection names it
        (a connector on Connect); None: read them from the running configuration's ``sink.*``."""

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...
