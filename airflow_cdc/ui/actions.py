"""What the CDC page may do to an instance (ADR 0028): start an incremental snapshot of chosen
tables (with an optional filter, Debezium's ``additional-conditions``), pause, resume or stop the
running one, stop or start the instance - each through the backend interface (ADR 0022), so the
same button drives the embedded engine, an engine service and Debezium on Kafka Connect.

Three guards, in this order, before anything happens:

* cross-site requests are refused (:func:`require_same_origin`): the page's own requests carry
  the ``X-Airflow-CDC`` header (a cross-site form cannot set a header, and a cross-origin script
  cannot without the CORS preflight Airflow does not grant), and a browser's ``Origin`` /
  ``Sec-Fetch-Site`` must name this server;
* the user must be allowed to edit the instance's connection (:func:`may_edit`, Airflow's auth
  manager asked ``PUT`` with the connection's team): a reader of the page sees no button and gets
  403 from the endpoint;
* the action and its arguments are checked (422 for an unknown one).

Every action that passed the guards is written to Airflow's audit log (the ``log`` table, shown
under Browse > Audit Log) with the user and the instance before it is done, its outcome after.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from pydantic import BaseModel, Field

from airflow_cdc.backends import EngineBackend, StartRequest
from airflow_cdc.engine.signals.signal import EXECUTE, PAUSE, RESUME, STOP
from airflow_cdc.ui.instances import client_for, connection_teams, source_config

log = logging.getLogger(__name__)

#: The header the page sends with every action; its value is fixed (it is no secret: what
#: protects is that a cross-site page cannot send it).
ACTION_HEADER = "X-Airflow-CDC"
ACTION_HEADER_VALUE = "action"

SIGNALS = {"snapshot": EXECUTE, "pause-snapshot": PAUSE, "resume-snapshot": RESUME, "stop-snapshot": STOP}
ACTIONS = (*SIGNALS, "stop", "start")
#: The audit log's event names: Airflow's own are verbs of its routes; ours say whose they are.
AUDIT_PREFIX = "cdc."


class ActionRequest(BaseModel):
    #: For ``snapshot`` (required) and ``stop-snapshot`` (none: the whole snapshot).
    tables: list[str] = Field(default_factory=list)
    #: For ``snapshot``: a SQL condition every chosen table's rows are read with.
    filter: str | None = None


def require_same_origin(request: Request) -> None:
    """403 unless the request comes from a page of this server (see the module's docstring)."""
    if request.headers.get(ACTION_HEADER) != ACTION_HEADER_VALUE:
        raise HTTPException(
            status_code=403,
            detail=f"cross-site request refused: an action needs the {ACTION_HEADER} header the CDC page sends",
        )
    site = request.headers.get("sec-fetch-site")
    if site and site not in ("same-origin", "none"):
        raise HTTPException(status_code=403, detail=f"cross-site request refused (Sec-Fetch-Site: {site})")
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc not in _own_hosts(request):
        raise HTTPException(status_code=403, detail=f"cross-site request refused (Origin: {origin})")


def _own_hosts(request: Request) -> set[str]:
    """The names this server answers as: the Host a browser asked for, a proxy's forwarded one,
    and Airflow's ``[api] base_url``."""
    from airflow.configuration import conf

    hosts = {request.headers.get("host", ""), request.headers.get("x-forwarded-host", "")}
    base_url = conf.get("api", "base_url", fallback="") or ""
    hosts.add(urlsplit(base_url).netloc)
    return {host for host in hosts if host}


def may_edit(user: Any, conn_ids: Iterable[str]) -> dict[str, bool]:
    """Whether ``user`` may edit each connection (``PUT``), asked with its team."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

    manager = get_auth_manager()
    teams = connection_teams(conn_ids)
    return {
        conn_id: bool(
            manager.is_authorized_connection(
                method="PUT", details=ConnectionDetails(conn_id=conn_id, team_name=team), user=user
            )
        )
        for conn_id, team in teams.items()
    }


def check(action: str, body: ActionRequest) -> None:
    if action not in ACTIONS:
        raise HTTPException(status_code=422, detail=f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
    if action == "snapshot" and not body.tables:
        raise HTTPException(status_code=422, detail="choose the tables to snapshot")
    if body.filter and action != "snapshot":
        raise HTTPException(status_code=422, detail="a filter is for starting a snapshot only")


def signal_data(action: str, body: ActionRequest) -> dict[str, Any]:
    """The signal's ``data``, as Debezium reads it."""
    tables = [t.strip() for t in body.tables if t.strip()]
    if action == "snapshot":
        data: dict[str, Any] = {"data-collections": tables, "type": "incremental"}
        if body.filter and body.filter.strip():
            data["additional-conditions"] = [{"data-collection": t, "filter": body.filter.strip()} for t in tables]
        return data
    if action == "stop-snapshot" and tables:
        return {"data-collections": tables, "type": "incremental"}
    return {}


def perform(conn_id: str, action: str, body: ActionRequest) -> dict[str, Any]:
    """Do ``action`` on the instance of ``conn_id``; what the page tells the user."""
    with client_for(conn_id) as backend:
        if action in SIGNALS:
            signal_id = _send(backend, conn_id, SIGNALS[action], signal_data(action, body))
            return {"message": f"{_SAID[action]}: signal {signal_id}", "signal_id": signal_id}
        if action == "stop":
            stopped = backend.stop()
            state = "stopped" if stopped.stopped else f"was not running ({stopped.state})"
            return {"message": f"instance {stopped.name or conn_id} {state}"}
        # With the connection's own configuration: its config file and source connection.
        if backend.start(StartRequest(source=source_config(conn_id))).started:
            return {"message": f"instance of {conn_id} started"}
        if backend.status().health in ("STOPPED", "PAUSED"):  # a connector Kafka Connect keeps stopped
            backend.resume()
            return {"message": f"instance of {conn_id} started (resumed)"}
        return {"message": f"instance of {conn_id} was running already"}


_SAID = {
    "snapshot": "incremental snapshot requested",
    "pause-snapshot": "pause of the snapshot requested",
    "resume-snapshot": "resume of the snapshot requested",
    "stop-snapshot": "stop of the snapshot requested",
}


def _send(backend: EngineBackend, conn_id: str, kind: str, data: dict[str, Any]) -> str:
    """Through the backend's own channel; Debezium on Connect has none, so the signal hook picks
    the connector's signal table (over the connection's ``source_conn_id``) or Kafka topic."""
    if backend.capabilities.api_signals:
        return backend.signal(kind, data)
    from airflow_cdc.hooks.signal import CdcSignalHook

    return CdcSignalHook(conn_id).send(kind, data, channel="api")


def audit(user: Any, conn_id: str, action: str, body: ActionRequest) -> int:
    """The action's row in Airflow's audit log (``log``), written before it is done, as Airflow's
    own routes write theirs (a failure to write it refuses the action); its id."""
    from airflow.models.log import Log
    from airflow.utils.session import create_session

    name = user.get_name() if user is not None else "anonymous"
    entry = Log(event=f"{AUDIT_PREFIX}{action}", owner=name, owner_display_name=name, extra=_extra(conn_id, body))
    with create_session() as session:
        session.add(entry)
        session.flush()
        return int(entry.id)


def audit_outcome(entry_id: int, conn_id: str, body: ActionRequest, outcome: str) -> None:
    """What came of the action, in its audit row."""
    from airflow.models.log import Log
    from airflow.utils.session import create_session

    try:
        with create_session() as session:
            entry = session.get(Log, entry_id)
            if entry is not None:
                entry.extra = _extra(conn_id, body, outcome)
    except Exception:  # the row says the action was asked for; the user sees its outcome anyway
        log.exception("could not write the outcome %r into audit log entry %s", outcome, entry_id)


def _extra(conn_id: str, body: ActionRequest, outcome: str = "requested") -> str:
    return json.dumps({"conn_id": conn_id, "tables": body.tables, "filter": body.filter, "outcome": outcome})
