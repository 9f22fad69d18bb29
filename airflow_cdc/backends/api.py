"""What every backend shares: the control API's operations on a client (the engine's own
``EngineClient``, or the Connect backend's ``ConnectorEngineClient``, which answers the same
operations), sync and async; and the parts written once for the backends that are driven only
through an API (an engine service, a connector): stop by asking, offsets by KIP-875.

A backend opens its client on first use: an instance beside the worker that is not running has
no address yet, and a backend made only for its status link must not need one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Self

from airflow_cdc.backends.protocol import Capabilities, StopOutcome, identity_problem
from airflow_cdc.engine.errors import ApiError, ApiRefusedError, ApiUnavailableError, CdcError, RefusedError
from airflow_cdc.engine.notifications import NotificationPage
from airflow_cdc.engine.positions import codec_for
from airflow_cdc.engine.server import offsets_admin
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, StateChange

#: How often a wait asks again.
POLL = 0.2


class ApiBackend:
    """The operations every backend answers through its client. ``open_client`` makes it (the
    engine's ``EngineClient`` or the Connect backend's client)."""

    capabilities = Capabilities()

    def __init__(self, open_client: Callable[[], Any], *, expected: str | None, conn_id: str) -> None:
        self._open_client = open_client
        self._client: Any = None
        self.expected = expected
        self.conn_id = conn_id

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._open_client()
        return self._client

    @property
    def url(self) -> str:
        return str(self.client.url)

    def status_url(self) -> str:
        return f"{self.url}/status"

    # -- reading -----------------------------------------------------------------------------------
    def verify(self) -> InstanceStatus:
        status: InstanceStatus = self.client.status()
        problem = identity_problem(status.name, self.expected, self.url, self.conn_id)
        if problem is not None:
            raise problem
        return status

    def status(self) -> InstanceStatus:
        return self.client.status()  # type: ignore[no-any-return]

    def position(self, target: str | None = None) -> InstancePosition:
        return self.client.position(target)  # type: ignore[no-any-return]

    def offsets(self) -> list[OffsetEntry]:
        return self.client.offsets()  # type: ignore[no-any-return]

    def notifications(self, cursor: str | None = None, limit: int = 1000) -> NotificationPage:
        return self.client.notifications(cursor, limit)  # type: ignore[no-any-return]

    def signal(self, kind: str, data: Mapping[str, Any] | str | None = None, *, signal_id: str | None = None) -> str:
        return self.client.signal(kind, data, signal_id=signal_id)  # type: ignore[no-any-return]

    def running_config(self) -> dict[str, Any]:
        return dict(self.client.connector(self.client.status().name).get("config") or {})

    def delivery_config(self) -> dict[str, Any]:
        return self.running_config()

    # -- acting ------------------------------------------------------------------------------------
    def pause(self) -> StateChange:
        return self.client.pause()  # type: ignore[no-any-return]

    def resume(self) -> StateChange:
        return self.client.resume()  # type: ignore[no-any-return]

    def run_until(self, props: Mapping[str, Any], bounds: Any) -> Any:
        raise RefusedError(
            "a bounded capture runs the instance's engine in the task, from its config file: set the extra "
            f"config_path of connection {self.conn_id!r}"
        )

    def check_drops_slot(self) -> None:
        """Refused unless it runs with ``slot.drop.on.stop``: a stop that must drop the slot."""
        config = self.running_config()
        if str(config.get("slot.drop.on.stop", "")).lower() != "true":
            raise RefusedError(
                f"instance {config.get('name') or self.expected!r} runs without slot.drop.on.stop, so stopping it "
                "would keep its replication slot (and the WAL it holds): start it with "
                "config={'slot.drop.on.stop': True} (CdcStartEngineOperator) before this stop, or stop it with "
                "drop_slot=False"
            )

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ThroughApi(ApiBackend):
    """A backend driven only through its API (an engine service, a connector on Connect):
    stopped by asking, its offsets changed by Kafka Connect's offsets API (KIP-875), which
    refuses while it runs."""

    def stop(self, *, drop_slot: bool = False, timeout: float = 60.0) -> StopOutcome:
        try:
            status = self.verify()
            if status.state == "STOPPED":  # an engine service whose engine is stopped, a stopped connector
                return StopOutcome(status.name, False, "STOPPED")
            if drop_slot:
                self.check_drops_slot()
            name = self.client.stop().name
            self._wait_stopped(timeout)
        except ApiUnavailableError:
            return StopOutcome(self.expected, False, "UNREACHABLE")
        return StopOutcome(name, True, "STOPPED")

    def _wait_stopped(self, timeout: float) -> None:
        """Until its API is gone (an instance run once), or it says STOPPED."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.client.status().state == "STOPPED":
                    return
            except ApiUnavailableError:
                return
            time.sleep(POLL)
        raise RefusedError(f"the instance still answers {timeout:.0f}s after it was asked to stop: look at its log")

    def _name(self) -> str:
        return self.expected or str(self.client.status().name)

    def reset_offsets(self, partition: Mapping[str, Any] | None = None) -> Any:
        return self.client.reset_offsets()

    def seek(
        self,
        position: str,
        partition: Mapping[str, Any] | None = None,
        *,
        force: bool = False,
        password: str | None = None,
    ) -> dict[str, Any]:
        # The API leaves the password out of the config: ``password`` (the source connection's)
        # reaches a server that asks for one.
        config = dict(self.client.connector(self._name()).get("config") or {})
        offset = offsets_admin.position_offset(config, position, force=force, password=password)
        entries = self.client.offsets()
        chosen = dict(partition) if partition is not None else None
        if chosen is None:
            chosen = dict(entries[0].partition) if len(entries) == 1 else {"server": config.get("topic.prefix")}
        before = next((e.offset for e in entries if e.partition == chosen), None)
        self.client.alter_offsets([{"partition": chosen, "offset": offset}])
        return {"partition": chosen, "before": before, "offset": offset, "position": codec_for(config).format(offset)}


class AsyncApiBackend:
    """The operations the triggers read, as coroutines, on an async client."""

    capabilities = Capabilities()

    def __init__(self, client: Any, *, expected: str | None, conn_id: str) -> None:
        self.client = client
        self.expected = expected
        self.conn_id = conn_id

    @property
    def url(self) -> str:
        return str(self.client.url)

    async def verify(self) -> InstanceStatus:
        status: InstanceStatus = await self.client.status()
        problem = identity_problem(status.name, self.expected, self.url, self.conn_id)
        if problem is not None:
            raise problem
        return status

    async def status(self) -> InstanceStatus:
        return await self.client.status()  # type: ignore[no-any-return]

    async def position(self, target: str | None = None) -> InstancePosition:
        return await self.client.position(target)  # type: ignore[no-any-return]

    async def offsets(self) -> list[OffsetEntry]:
        return await self.client.offsets()  # type: ignore[no-any-return]

    async def notifications(self, cursor: str | None = None, limit: int = 1000) -> NotificationPage:
        return await self.client.notifications(cursor, limit)  # type: ignore[no-any-return]

    async def running_config(self) -> dict[str, Any]:
        name = (await self.client.status()).name
        return dict((await self.client.connector(name)).get("config") or {})

    def kafka_cluster(self) -> dict[str, Any] | None:
        return None

    async def flush_offsets(self) -> bool:
        """Ask the instance to commit what it delivered now (``POST /offsets/flush``) rather than
        at its next ``offset.flush.interval.ms``; whether it did (False: an older instance
        without the route)."""
        try:
            answer = await self.client.flush()
        except ApiError as exc:
            if exc.status in (404, 405):
                return False
            raise
        return bool(answer.get("committed"))

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def service_config(backend: ApiBackend) -> dict[str, Any]:
    """The configuration a service runs (or last ran) with; {} for one never started."""
    try:
        return backend.running_config()
    except ApiRefusedError:
        return {}


__all__ = ["ApiBackend", "AsyncApiBackend", "CdcError", "ThroughApi", "service_config"]
