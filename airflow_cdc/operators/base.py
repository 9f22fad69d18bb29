"""What every airflow-cdc operator shares: the ``cdc_engine`` connection and its hook, the
instance link, lineage, and one translation of the engine's errors into task failures that say
what to fix. No CDC logic: that stays in the engine (ADR 0011)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

from airflow_cdc.assets import operator_lineage
from airflow_cdc.backends import START_FIX, EngineBackend, InstanceNotRunningError
from airflow_cdc.engine.errors import (
    ApiError,
    ApiRefusedError,
    ApiUnavailableError,
    CdcError,
    ConfigError,
    RefusedError,
    RetriableError,
)
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.links import CdcInstanceLink, instance_status_url

__all__ = ["START_FIX", "CdcBaseOperator", "CdcOperatorError", "CdcUnavailableError", "explain"]


class CdcOperatorError(AirflowFailException):
    """A task failure the task's retries cannot mend: the message names the fix."""


class CdcUnavailableError(AirflowException):
    """The instance cannot answer now (not running, unreachable): a retry may succeed."""


class CdcBaseOperator(BaseOperator):
    """Base of the airflow-cdc operators.

    :param cdc_conn_id: the engine instance's connection (type ``cdc_engine``).
    """

    operator_extra_links: tuple[Any, ...] = (CdcInstanceLink(),)
    ui_color = "#e8f1f8"

    def __init__(self, *, cdc_conn_id: str = CdcEngineHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cdc_conn_id = cdc_conn_id
        #: Filled while the task runs, for the instance link.
        self.instance_status_url = ""
        #: ``(namespace, name)`` datasets read and written, for OpenLineage.
        self.lineage_inputs: list[tuple[str, str]] = []
        self.lineage_outputs: list[tuple[str, str]] = []

    @cached_property
    def hook(self) -> CdcEngineHook:
        return CdcEngineHook(self.cdc_conn_id)

    @contextlib.contextmanager
    def engine_backend(self) -> Iterator[EngineBackend]:
        """The connection's backend, once the instance answered as the one the connection names."""
        with self.hook.get_backend() as backend:
            try:
                backend.verify()
            except InstanceNotRunningError as exc:  # an instance beside the worker that is not running
                raise CdcUnavailableError(str(exc)) from exc
            except RefusedError as exc:
                if isinstance(exc, ApiRefusedError):
                    raise
                raise CdcOperatorError(str(exc)) from exc
            self.instance_status_url = backend.status_url()
            yield backend

    def remember_status_url(self, backend: EngineBackend | None = None) -> None:
        with contextlib.suppress(Exception):
            self.instance_status_url = backend.status_url() if backend else instance_status_url(self.hook)

    @contextlib.contextmanager
    def failures(self, action: str) -> Iterator[None]:
        """Turns the engine's errors into task failures naming the fix (retriable ones stay
        retriable)."""
        try:
            yield
        except AirflowNotFoundException as exc:
            raise CdcOperatorError(
                f"{action}: {exc}: define it (Admin > Connections, `airflow connections add`, or an "
                "AIRFLOW_CONN_<ID> variable)"
            ) from exc
        except CdcError as exc:
            raise explain(action, exc, self.cdc_conn_id) from exc

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage's view of the run (tables in, topics out) when Airflow's openlineage
        provider is installed; None otherwise or when the task moved no data."""
        return operator_lineage(self.lineage_inputs, self.lineage_outputs)


def explain(action: str, exc: CdcError, conn_id: str) -> AirflowException:
    """The task failure for an engine error: the engine's (or the API's) words and the fix."""
    if isinstance(exc, ApiUnavailableError) and getattr(exc, "explains_fix", False):  # a connector on Connect
        return CdcUnavailableError(f"{action}: {exc.message}")
    if isinstance(exc, InstanceNotRunningError):
        return CdcUnavailableError(f"{action}: {exc}")
    if isinstance(exc, ApiUnavailableError):
        return CdcUnavailableError(
            f"{action}: the engine instance does not answer at {exc.url} ({exc.message}): {START_FIX}, "
            f"or correct the host of connection {conn_id!r}"
        )
    if isinstance(exc, ApiError) and exc.status == 401:
        return CdcOperatorError(
            f"{action}: the instance refused the token of connection {conn_id!r} ({exc.message}): set the "
            "connection's password to the instance's api.token (or the content of <state.dir>/api.token)"
        )
    if isinstance(exc, ApiRefusedError):
        return CdcOperatorError(f"{action}: refused by the instance: {exc.message}")
    if isinstance(exc, ApiError) and exc.status == 404:
        return CdcOperatorError(
            f"{action}: {exc.method} {exc.url} is not an operation of this instance ({exc.message}): is the "
            f"host of connection {conn_id!r} an airflow-cdc engine instance of this version?"
        )
    if isinstance(exc, ApiError):
        return CdcOperatorError(f"{action}: the instance answered {exc.status}: {exc.message}")
    if isinstance(exc, ConfigError):
        lines = "\n".join(f"  - {problem}" for problem in exc.problems)
        return CdcOperatorError(f"{action}: invalid configuration:\n{lines}")
    if isinstance(exc, RetriableError):
        return CdcUnavailableError(f"{action}: {exc}")
    return CdcOperatorError(f"{action}: {exc}")
