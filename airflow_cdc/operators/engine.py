"""Start and stop engine instances from a DAG."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_cdc.assets import sink_dataset
from airflow_cdc.engine.errors import ApiRefusedError, ApiUnavailableError
from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.config_file import flatten, strip_prefixes
from airflow_cdc.engine.server.instance_files import override_problems, resolve
from airflow_cdc.engine.server.models import InstanceStatus
from airflow_cdc.hooks.engine import config_text
from airflow_cdc.hooks.source_config import (
    SourceConfig,
    engine_config,
    from_connection,
    is_secret_key,
    lineage_namespace,
)
from airflow_cdc.operators.base import CdcBaseOperator, CdcOperatorError
from airflow_cdc.operators.config_check import check_engine_config

#: Phases in which an instance has finished starting (``finished``: snapshot.mode=initial_only).
STREAMING = ("streaming", "finished")
#: A table name without regex syntax (``public.orders``): one the lineage can name.
_LITERAL_TABLE = re.compile(r"^[\w$]+(\.[\w$]+)+$")


def check_config_argument(config: Any) -> None:
    """``__init__``'s cheap check of an operator's ``config``: a dict of keys a DAG may set."""
    if config is None or isinstance(config, str):  # a template, checked once rendered
        return
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict of Debezium properties, not {type(config).__name__}")
    problems = override_problems(config)
    if problems:
        raise ValueError("config: " + "; ".join(str(p) for p in problems))


def config_differences(requested: Mapping[str, Any], running: Mapping[str, Any]) -> list[str]:
    """Keys on which the configuration asked for and the one an instance runs with differ,
    compared as the instance reads a config file (secrets are neither compared nor shown)."""
    want = _normal(resolve(strip_prefixes(flatten(requested))))
    have = _normal(running)
    return [
        f"{key}: running {have.get(key)!r}, asked {want.get(key)!r}"
        for key in sorted(set(want) | set(have))
        if not is_secret_key(key) and want.get(key) != have.get(key)
    ]


def _normal(config: Mapping[str, Any]) -> dict[str, str]:
    return {key: config_text(value) for key, value in config.items() if value is not None}


def literal_tables(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else str(value or "").split(",")
    return [str(t).strip() for t in items if _LITERAL_TABLE.match(str(t).strip())]


Datasets = list[tuple[str, str]]


def table_lineage(config: Mapping[str, Any], tables: Sequence[str]) -> tuple[Datasets, Datasets]:
    """OpenLineage datasets: each table in the source database, and its topic where the sink writes it."""
    source = lineage_namespace(config)
    prefix = str(config.get("topic.prefix") or "")
    inputs: Datasets = []
    outputs: Datasets = []
    for table in tables:
        if source is not None:
            namespace, database = source
            inputs.append((namespace, f"{database}.{table}" if database and table.count(".") == 1 else table))
        if prefix and (output := sink_dataset(config, f"{prefix}.{table}")) is not None:
            outputs.append(output)
    return inputs, outputs


class CdcStartEngineOperator(CdcBaseOperator):
    """Start an engine instance beside the worker, detached (it outlives the task), and wait
    until it streams.

    The instance is the one of the ``cdc_engine`` connection's config file (extra
    ``config_path``). ``config`` is laid over the file, and with ``source_conn_id`` the source
    database's Airflow connection gives host, port, user and database: a DAG never holds a
    password (one in ``config`` is refused). The password goes to the instance's driver through
    its environment (``PGPASSWORD``), never into a file, a log or an XCom. The whole
    configuration is written to ``<state.dir>/airflow-instance.yaml``.

    Idempotent: an instance already running with the same configuration is left alone; one
    running with another configuration fails the task, naming the keys that differ.

    .. seealso::
        ``CdcStopEngineOperator``; the README's "Running an engine instance".

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``, with ``config_path``).
    :param config: Debezium properties over the config file (templated), e.g.
        ``{"table.include.list": "public.orders", "snapshot.mode": "no_data"}``. ``name`` and
        ``state.dir`` (they say which instance it is) and secrets cannot be set here.
    :param source_conn_id: a ``postgres`` (or ``mysql``) connection to the captured database.
    :param timeout: seconds to wait until the instance streams (an initial snapshot included).
    :param allow_unknown_keys: start even if the configuration has keys no part of the engine
        reads (they are warnings in the task log). By default such a key - a misspelt one, most
        often - fails the task before anything starts, naming the nearest known key.
    :return: (XCom) ``{"name", "api_url", "run_id", "started", "phase", "positions"}``;
        ``positions`` lists each task's partition and committed and current positions.
    """

    template_fields: Sequence[str] = ("cdc_conn_id", "config", "source_conn_id")
    template_fields_renderers = {"config": "json"}

    def __init__(
        self,
        *,
        config: dict[str, Any] | None = None,
        source_conn_id: str | None = None,
        timeout: float = 300.0,
        allow_unknown_keys: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_config_argument(config)
        self.allow_unknown_keys = allow_unknown_keys
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, not {timeout!r}")
        self.config = config
        self.source_conn_id = source_conn_id
        self.timeout = timeout

    def execute(self, context: Context) -> dict[str, Any]:
        with self.failures(f"starting the engine instance of connection {self.cdc_conn_id!r}"):
            source = from_connection(self.hook.get_connection(self.source_conn_id)) if self.source_conn_id else None
            if not self.hook.settings.config_path and not self.hook.settings.kafka_connect:
                return self._start_service(source)
            requested = self._requested(source)
            if not self.hook.settings.kafka_connect:  # Connect validates a connector's config itself
                self._validate(
                    requested, f"the configuration of {self.hook.settings.config_path} with the task's config"
                )
            deadline = time.monotonic() + self.timeout
            if self.hook.settings.kafka_connect:
                started = self._create_connector(requested, source)
            elif (self.hook.local_status() or {}).get("running"):
                self._check_same(requested)
                started = False
            else:
                whole = None if source is None and not self.config else requested
                self.hook.start_instance(
                    timeout=self.timeout, config=whole, env=source.environment() if source else None
                )
                started = True
            status = self._wait_streaming(deadline)
        self.lineage_inputs, self.lineage_outputs = table_lineage(
            requested, literal_tables(requested.get("table.include.list"))
        )
        self.log.info("instance %r %s: %s", status.name, "started" if started else "already running", status.phase)
        return self._started_answer(status, started)

    def _start_service(self, source: SourceConfig | None) -> dict[str, Any]:
        """An engine service reached through its URL (``airflow-cdc engine serve``): started with
        the DAG's configuration, and the source connection's host, port, user and database, laid
        over its own - never a password, which the service keeps (its Secret)."""
        overrides = {**(source.properties if source else {}), **dict(self.config or {})}
        check_config_argument(overrides)
        deadline = time.monotonic() + self.timeout
        with self.engine_client() as client:
            running = self._service_config(client)
            self._validate({**running, **overrides}, f"the task's config over {client.url}'s", partial=not running)
            try:
                state = client.start(overrides).state
            except ApiRefusedError as exc:
                if "runs once" not in exc.message:  # a serving instance running with another configuration
                    raise CdcOperatorError(
                        f"{exc.message}; or change the task's config to the one it runs with"
                    ) from exc
                self._check_same({**client.connector(client.status().name).get("config", {}), **overrides})
                state = client.status().state
        started = state == "STARTING"
        status = self._wait_streaming(deadline)
        self.log.info("instance %r %s: %s", status.name, "started" if started else "already running", status.phase)
        return self._started_answer(status, started)

    def _validate(self, requested: Mapping[str, Any], where: str, *, partial: bool = False) -> None:
        checked = check_engine_config(
            requested, allow_unknown_keys=self.allow_unknown_keys, where=where, partial=partial
        )
        for warning in checked:
            self.log.warning("engine configuration: %s", warning)

    @staticmethod
    def _service_config(client: EngineClient) -> dict[str, Any]:
        """The configuration the service runs (or last ran) with, secrets left out."""
        try:
            return dict(client.connector(client.status().name).get("config") or {})
        except ApiRefusedError:  # a service never started has none yet: its file is validated there
            return {}

    def _started_answer(self, status: InstanceStatus, started: bool) -> dict[str, Any]:
        return {
            "name": status.name,
            "api_url": self.instance_status_url.removesuffix("/status"),
            "run_id": status.run_id,
            "started": started,
            "phase": status.phase,
            "positions": [
                {"task": t.task, "partition": t.partition, "committed": t.committed, "current": t.current}
                for t in (status.position.tasks if status.position else ())
            ],
        }

    def _requested(self, source: SourceConfig | None) -> dict[str, Any]:
        config = dict(self.config or {})
        check_config_argument(config)  # once more: the rendered template
        requested = engine_config(self.hook.instance_config, source=source, overrides=config)
        expected = self.hook.settings.instance
        if expected and requested.get("name") != expected:
            raise CdcOperatorError(
                f"connection {self.cdc_conn_id!r} names instance {expected!r}, its config file "
                f"{self.hook.settings.config_path} instance {requested.get('name')!r}: make them agree"
            )
        return requested

    def _create_connector(self, requested: Mapping[str, Any], source: SourceConfig | None) -> bool:
        """A ``kafka_connect`` connection: the connector is created from the same configuration
        (Debezium's keys; the source's password in it, as Connect keeps it); an existing one
        with the same configuration is left alone, one with another fails the task."""
        created, differences = self.hook.start_connector(requested, source, timeout=self.timeout)
        if differences:
            raise CdcOperatorError(
                f"connector {requested.get('name')!r} already runs on Kafka Connect with another configuration:\n  "
                + "\n  ".join(differences)
                + "\nstop and delete it first to create it with this configuration, or change the task's config"
            )
        if created:
            self.log.info("connector %r created on Kafka Connect", requested.get("name"))
        return created

    def _check_same(self, requested: Mapping[str, Any]) -> None:
        differences = config_differences(requested, self.hook.running_config())
        if differences:
            raise CdcOperatorError(
                f"instance {requested.get('name')!r} is already running with another configuration:\n  "
                + "\n  ".join(differences)
                + "\nstop it first (CdcStopEngineOperator) to start it with this configuration, or change "
                "the task's config to the one it runs with"
            )
        self.log.info("instance %r is already running with this configuration", requested.get("name"))

    def _wait_streaming(self, deadline: float) -> InstanceStatus:
        with self.engine_client() as client:
            while True:
                status = client.status()
                if status.error or status.phase == "failed":
                    where = f"see {status.state_dir}/engine.log" if status.state_dir else f"see {status.api}"
                    raise CdcOperatorError(
                        f"instance {status.name!r} failed: {status.error}; {where}, mend the cause and start it again"
                    )
                if status.phase in STREAMING:
                    return status
                if time.monotonic() >= deadline:
                    raise CdcOperatorError(
                        f"instance {status.name!r} is still {status.phase} after {self.timeout:.0f}s (it keeps "
                        "going): raise timeout, e.g. for a long initial snapshot"
                    )
                time.sleep(0.2)


class CdcStopEngineOperator(CdcBaseOperator):
    """Stop an engine instance gracefully: it drains what is in flight, commits its offsets and
    releases its replication slots' connections. Idempotent: a stopped instance is left alone.

    An instance beside the worker (``config_path``) is waited for until its process is gone
    (and killed after ``timeout``); one elsewhere until its API stops answering.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``).
    :param drop_slot: the stop must also drop the source's replication slot (and the WAL it
        keeps). The engine drops it when the instance runs with ``slot.drop.on.stop: true``;
        the task fails before stopping anything when it does not.
    :param timeout: seconds to wait for the stop.
    :return: (XCom) ``{"name", "stopped", "state"}``; ``stopped`` is False when it was not running.
    """

    template_fields: Sequence[str] = ("cdc_conn_id",)

    def __init__(self, *, drop_slot: bool = False, timeout: float = 60.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, not {timeout!r}")
        self.drop_slot = drop_slot
        self.timeout = timeout

    def execute(self, context: Context) -> dict[str, Any]:
        with self.failures(f"stopping the engine instance of connection {self.cdc_conn_id!r}"):
            local = self.hook.local_status()
            if local is None:
                return self._stop_remote()
            if not local["running"]:
                self.remember_status_url()
                self.log.info("instance %r is not running (%s)", local.get("name"), local.get("state"))
                return {"name": local.get("name"), "stopped": False, "state": local.get("state") or "NEVER_STARTED"}
            if self.drop_slot:
                with self.engine_client() as client:
                    self._check_drops_slot(client)
            # SIGTERM, as POST /stop: drain, commit, release the slots; SIGKILL after the timeout.
            final = control.stop(self.hook.instance_config, self.timeout) or local
            self.remember_status_url()
        self.log.info("instance %r stopped: %s", final.get("name"), final.get("state"))
        return {"name": final.get("name"), "stopped": True, "state": final.get("state") or "STOPPED"}

    def _stop_remote(self) -> dict[str, Any]:
        try:
            with self.engine_client() as client:
                status = client.status()
                if status.state == "STOPPED":  # an engine service whose engine is stopped
                    self.log.info("instance %r is not running (STOPPED)", status.name)
                    return {"name": status.name, "stopped": False, "state": "STOPPED"}
                if self.drop_slot:
                    self._check_drops_slot(client)
                name = client.stop().name
                self._wait_gone(client)
        except ApiUnavailableError as exc:
            self.log.warning("the instance does not answer at %s: taken as stopped", exc.url)
            return {"name": self.hook.settings.instance, "stopped": False, "state": "UNREACHABLE"}
        self.log.info("instance %r stopped", name)
        return {"name": name, "stopped": True, "state": "STOPPED"}

    def _check_drops_slot(self, client: EngineClient) -> None:
        name = client.status().name
        config = client.connector(name).get("config") or {}
        if str(config.get("slot.drop.on.stop", "")).lower() != "true":
            raise CdcOperatorError(
                f"instance {name!r} runs without slot.drop.on.stop, so stopping it would keep its replication slot "
                "(and the WAL it holds): start it with config={'slot.drop.on.stop': True} (CdcStartEngineOperator) "
                "before this stop, or stop it with drop_slot=False"
            )

    def _wait_gone(self, client: EngineClient) -> None:
        """Until its API is gone (an instance run once), or it says STOPPED (a service)."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                if client.status().state == "STOPPED":
                    return
            except ApiUnavailableError:
                return
            time.sleep(0.2)
        raise CdcOperatorError(
            f"the instance still answers {self.timeout:.0f}s after it was asked to stop: look at its log"
        )
