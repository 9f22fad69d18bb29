"""Start and stop engine instances from a DAG."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_cdc.assets import sink_dataset
from airflow_cdc.backends import EngineBackend, InstanceStatus, StartRequest, check_config_argument, config_differences
from airflow_cdc.hooks.source_config import from_connection, lineage_namespace
from airflow_cdc.operators.base import CdcBaseOperator, CdcOperatorError
from airflow_cdc.triggers.progress import retry_note

__all__ = [
    "CdcStartEngineOperator",
    "CdcStopEngineOperator",
    "check_config_argument",
    "config_differences",
    "literal_tables",
    "table_lineage",
]

#: Phases in which an instance has finished starting (``finished``: snapshot.mode=initial_only).
STREAMING = ("streaming", "finished")
#: A table name without regex syntax (``public.orders``): one the lineage can name.
_LITERAL_TABLE = re.compile(r"^[\w$]+(\.[\w$]+)+$")


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
            config = dict(self.config or {})
            check_config_argument(config)  # once more: the rendered template
            deadline = time.monotonic() + self.timeout
            request = StartRequest(
                overrides=config,
                source=source,
                timeout=self.timeout,
                allow_unknown_keys=self.allow_unknown_keys,
                warn=lambda message: self.log.warning("engine configuration: %s", message),
            )
            with self.hook.get_backend() as backend:
                outcome = backend.start(request)
                status = self._wait_streaming(backend, deadline)
        if outcome.requested:
            requested = outcome.requested
            self.lineage_inputs, self.lineage_outputs = table_lineage(
                requested, literal_tables(requested.get("table.include.list"))
            )
        started = outcome.started
        self.log.info("instance %r %s: %s", status.name, "started" if started else "already running", status.phase)
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

    def _wait_streaming(self, backend: EngineBackend, deadline: float) -> InstanceStatus:
        backend.verify()
        self.instance_status_url = backend.status_url()
        while True:
            status = backend.status()
            if status.error or status.phase == "failed":
                where = f"see {status.state_dir}/engine.log" if status.state_dir else f"see {status.api}"
                raise CdcOperatorError(
                    f"instance {status.name!r} failed: {status.error}; {where}, mend the cause and start it again"
                )
            if status.phase in STREAMING:
                return status
            retrying = retry_note(status)
            if time.monotonic() >= deadline and retrying:  # why it does not stream: the cause
                raise CdcOperatorError(
                    f"instance {status.name!r} is still {status.phase} after {self.timeout:.0f}s: {retrying}; "
                    "it goes on retrying and recovers when the cause is gone: mend it, or raise timeout"
                )
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
        action = f"stopping the engine instance of connection {self.cdc_conn_id!r}"
        with self.failures(action), self.hook.get_backend() as backend:
            outcome = backend.stop(drop_slot=self.drop_slot, timeout=self.timeout)
            self.remember_status_url(backend)
        if outcome.stopped:
            self.log.info("instance %r stopped: %s", outcome.name, outcome.state)
        elif outcome.state == "UNREACHABLE":
            self.log.warning("the instance does not answer: taken as stopped")
        else:
            self.log.info("instance %r is not running (%s)", outcome.name, outcome.state)
        return {"name": outcome.name, "stopped": outcome.stopped, "state": outcome.state}
