"""An engine instance beside the worker: its config file (the connection's ``config_path``) and
state directory are on this machine. It is started detached (it outlives the task), stopped by
its process (SIGTERM: drain, commit, release the slots), its offsets changed in its own store,
and it can run inside the task until a bound (``run_until``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from airflow_cdc.backends.api import ApiBackend
from airflow_cdc.backends.config_check import check_engine_config, check_same
from airflow_cdc.backends.protocol import (
    START_FIX,
    Capabilities,
    InstanceNotRunningError,
    StartOutcome,
    StartRequest,
    StopOutcome,
)
from airflow_cdc.engine.errors import RefusedError
from airflow_cdc.engine.positions import codec_for
from airflow_cdc.engine.server import bounded, control, offsets_admin
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance_files import is_running, read_status, state_dir
from airflow_cdc.hooks.engine_connection import EngineConnection, engine_address, instance_config
from airflow_cdc.hooks.source_config import engine_config

#: Where a start with a task's configuration writes the configuration it starts the instance from.
EFFECTIVE_CONFIG = "airflow-instance.yaml"


class LocalInstanceBackend(ApiBackend):
    """The instance of ``settings.config_path`` on this worker."""

    capabilities = Capabilities(bounded_capture=True)

    def __init__(self, settings: EngineConnection, conn_id: str) -> None:
        super().__init__(self._api_client, expected=settings.instance, conn_id=conn_id)
        self.settings = settings
        self._config: dict[str, Any] | None = None

    def _api_client(self) -> EngineClient:
        try:
            url, token = engine_address(self.settings)
        except RefusedError as exc:
            raise InstanceNotRunningError(f"{exc}: {START_FIX}") from exc
        return EngineClient(url, token, timeout=self.settings.timeout, tls=self.settings.tls())

    @property
    def instance_config(self) -> dict[str, Any]:
        if self._config is None:
            self._config = instance_config(self.settings)
        return self._config

    def local_status(self) -> dict[str, Any]:
        """What the instance last wrote in its state directory, with ``running``."""
        directory = state_dir(self.instance_config)
        return {**(read_status(directory) or {}), "running": is_running(directory)}

    @property
    def url(self) -> str:
        """The connection's host, else the address the instance wrote last ("" if none)."""
        return (self.settings.url or str(self.local_status().get("api") or "")).rstrip("/")

    def status_url(self) -> str:
        return f"{self.url}/status" if self.url else ""

    # -- start and stop ----------------------------------------------------------------------------
    def start(self, request: StartRequest) -> StartOutcome:
        requested = engine_config(self.instance_config, source=request.source, overrides=dict(request.overrides))
        if self.expected and requested.get("name") != self.expected:
            raise RefusedError(
                f"connection {self.conn_id!r} names instance {self.expected!r}, its config file "
                f"{self.settings.config_path} instance {requested.get('name')!r}: make them agree"
            )
        where = f"the configuration of {self.settings.config_path} with the task's config"
        for warning in check_engine_config(requested, allow_unknown_keys=request.allow_unknown_keys, where=where):
            request.warn(warning)
        if self.local_status()["running"]:
            check_same(requested.get("name"), requested, self.running_config())
            return StartOutcome(False, requested)
        source = request.source
        whole = None if source is None and not request.overrides else requested
        env = source.environment() if source else None
        if whole is None:
            control.start_detached(Path(str(self.settings.config_path)), self.instance_config, timeout=request.timeout)
        else:
            path = state_dir(whole) / EFFECTIVE_CONFIG
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as file:
                yaml.safe_dump({key: _plain(value) for key, value in whole.items()}, file, sort_keys=True)
            control.start_detached(path, load_config_file(path), timeout=request.timeout, env=env)
        return StartOutcome(True, requested)

    def stop(self, *, drop_slot: bool = False, timeout: float = 60.0) -> StopOutcome:
        local = self.local_status()
        if not local["running"]:
            return StopOutcome(local.get("name"), False, local.get("state") or "NEVER_STARTED")
        if drop_slot:
            self.check_drops_slot()
        # SIGTERM, as POST /stop: drain, commit, release the slots; SIGKILL after the timeout.
        final = control.stop(self.instance_config, timeout) or local
        return StopOutcome(final.get("name"), True, final.get("state") or "STOPPED")

    # -- offsets, in its own store (refused while it runs: its next commit would undo the change) ---
    def last_config(self) -> dict[str, Any]:
        """The configuration it was last started with by a task, else its config file."""
        effective = state_dir(self.instance_config) / EFFECTIVE_CONFIG
        return load_config_file(effective) if effective.exists() else self.instance_config

    def reset_offsets(self, partition: Mapping[str, Any] | None = None) -> Any:
        return offsets_admin.reset(self.last_config(), dict(partition) if partition is not None else None)

    def seek(
        self,
        position: str,
        partition: Mapping[str, Any] | None = None,
        *,
        force: bool = False,
        password: str | None = None,
    ) -> dict[str, Any]:
        props = self.last_config()
        offset = offsets_admin.position_offset(props, position, force=force, password=password)
        changed = offsets_admin.set_offset(props, offset, dict(partition) if partition is not None else None)
        return {**changed, "position": codec_for(props).format(changed["offset"])}

    def run_until(self, props: Mapping[str, Any], bounds: Any) -> Any:
        return bounded.run_until(props, bounds)


def _plain(value: Any) -> Any:
    """A value YAML writes as the config file would (paths and the like as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)
