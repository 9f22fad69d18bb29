"""An engine instance reached only through its control API: an engine service
(``airflow-cdc engine serve``, in its own container or pod) or an instance on another host.
It is started with the DAG's configuration laid over its own - the source connection's host,
port, user and database, never a password, which the service keeps (its Secret)."""

from __future__ import annotations

from airflow_cdc.backends.api import ThroughApi, service_config
from airflow_cdc.backends.config_check import check_engine_config, check_same
from airflow_cdc.backends.protocol import StartOutcome, StartRequest
from airflow_cdc.engine.errors import ApiRefusedError, RefusedError
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.hooks.engine_connection import EngineConnection


class ServiceBackend(ThroughApi):
    """The instance at ``settings.url``."""

    def __init__(self, settings: EngineConnection, conn_id: str) -> None:
        assert settings.url is not None
        url, token = settings.url, settings.token
        super().__init__(
            lambda: EngineClient(url, token, timeout=settings.timeout, tls=settings.tls()),
            expected=settings.instance,
            conn_id=conn_id,
        )
        self.settings = settings

    @property
    def url(self) -> str:
        return str(self.settings.url)

    def status_url(self) -> str:
        return f"{self.url.rstrip('/')}/status"

    def start(self, request: StartRequest) -> StartOutcome:
        source = request.source
        overrides = {**(source.properties if source else {}), **dict(request.overrides)}
        running = service_config(self)
        where = f"the task's config over {self.url}'s"
        for warning in check_engine_config(
            {**running, **overrides}, allow_unknown_keys=request.allow_unknown_keys, where=where, partial=not running
        ):
            request.warn(warning)
        try:
            state = self.client.start(overrides).state
        except ApiRefusedError as exc:
            if "runs once" not in exc.message:  # a serving instance running with another configuration
                raise RefusedError(f"{exc.message}; or change the task's config to the one it runs with") from exc
            running = self.running_config()
            check_same(self.client.status().name, {**running, **overrides}, running)
            state = self.client.status().state
        return StartOutcome(state == "STARTING")
