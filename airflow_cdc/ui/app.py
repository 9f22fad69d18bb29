"""The CDC page's FastAPI app, mounted by the plugin under ``/cdc`` (``airflow_cdc.ui.URL_PREFIX``) on Airflow's API
server: ``GET /`` is the page (one HTML file that refreshes itself from the JSON below),
``GET /api/instances`` every instance the caller may see, ``GET /api/instances/{conn_id}`` one,
each with its last hour (``history``), the WAL its slot retains and whether the caller may act on
it; ``POST /api/instances/{conn_id}/actions/{action}`` acts on it (``actions``, ADR 0028).

Auth is Airflow's: the app sits behind the API server, reads the same JWT (the UI's ``_token``
cookie, or a bearer header) through Airflow's ``get_user`` and shows an instance only to a user
allowed to read its connection, asked with the connection's team in a multi-team deployment. A
DAG's instances (``?dag_id=``) are listed only to a user allowed to read that DAG and its tasks
(403 otherwise, before the DAG is looked up, as Airflow's own DAG routes answer). The page itself
carries no data, so it is served to anyone; its API answers 401 without a login (and the page
then says so).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.health import RETAINED_WAL_FIX
from airflow_cdc.monitoring import InstanceView
from airflow_cdc.ui import actions
from airflow_cdc.ui.history import History
from airflow_cdc.ui.instances import Instances, connection_ids, connection_teams, retained_wal

log = logging.getLogger(__name__)

#: The browser polls this often (the page's own refresh; an instance is asked at most this often
#: per open page).
REFRESH_MS = 2000

#: Past this many bytes of WAL retained by its slot an instance is shown in red (``[cdc]
#: retained_wal_warn_bytes``, AIRFLOW__CDC__RETAINED_WAL_WARN_BYTES).
RETAINED_WAL_WARN_BYTES = 1 << 30

instances = Instances()
history = History()


async def current_user(request: Request) -> Any:
    """Airflow's own ``get_user``: a bearer header, else the UI's ``_token`` cookie (401 without).
    Imported when first asked: the security module pulls in the API server's app, and the plugin
    that imports this module is loaded by every Airflow process, workers included."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request, None, await bearer_scheme(request))


UserDep = Annotated[Any, Depends(current_user)]


def acting_user(request: Request, user: UserDep) -> Any:
    """The signed-in user (401 without), once the request came from a page of this server: a
    dependency, so that a cross-site request is refused before its body is even read."""
    actions.require_same_origin(request)
    return user


ActingUserDep = Annotated[Any, Depends(acting_user)]


def _allowed(user: Any, conn_ids: Iterable[str]) -> Callable[[str], bool]:
    """Whether ``user`` may read each of ``conn_ids``, asked with the connection's team (in a
    multi-team deployment an auth manager grants a team's connections to its members only; asked
    without it, it would answer for a connection of no team)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

    manager = get_auth_manager()
    teams = connection_teams(conn_ids)

    def allowed(conn_id: str) -> bool:
        details = ConnectionDetails(conn_id=conn_id, team_name=teams.get(conn_id))
        return bool(manager.is_authorized_connection(method="GET", details=details, user=user))

    return allowed


def require_dag_readable(dag_id: str, user: Any) -> None:
    """403 unless ``user`` may read the DAG and its tasks (the page lists what its tasks name),
    asked as Airflow's own ``GET /dags/{dag_id}`` and ``.../tasks`` routes ask: the DAG's team
    from its bundle. Asked before the DAG is looked up, so a 404 tells only a reader that a DAG
    does not exist."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    manager = get_auth_manager()
    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id))
    for entity in (None, DagAccessEntity.TASK):
        if not manager.is_authorized_dag(method="GET", access_entity=entity, details=details, user=user):
            raise HTTPException(status_code=403, detail=f"you may not read DAG {dag_id!r}")


def dag_connections(dag_id: str) -> list[str]:
    """The ``cdc_conn_id`` of every task of the DAG (its serialized form), in task order."""
    from airflow.models.serialized_dag import SerializedDagModel

    dag = SerializedDagModel.get_dag(dag_id)
    if dag is None:
        raise HTTPException(status_code=404, detail=f"no DAG {dag_id!r} is known to Airflow")
    seen: list[str] = []
    for task in dag.tasks:
        conn_id = getattr(task, "cdc_conn_id", None)
        if isinstance(conn_id, str) and conn_id and conn_id not in seen:
            seen.append(conn_id)
    return seen


def warn_bytes() -> int:
    from airflow.configuration import conf

    return conf.getint("cdc", "retained_wal_warn_bytes", fallback=RETAINED_WAL_WARN_BYTES)


def instance_json(conn_id: str, view: InstanceView, may_act: bool) -> dict[str, Any]:
    """The view with its history (this observation recorded into it first), the WAL its slot
    retains, and whether the caller may act on it."""
    wal = history.retained(conn_id, lambda: retained_wal(conn_id)) if view.reachable else None
    history.record(conn_id, view, wal.bytes if wal else None)
    limit = warn_bytes()
    retained = None
    if wal is not None and (wal.bytes is not None or wal.problem):
        over = wal.bytes is not None and wal.bytes > limit
        retained = {"bytes": wal.bytes, "problem": wal.problem, "warn_bytes": limit, "over": over}
        retained["fix"] = RETAINED_WAL_FIX if over else None
    return {
        **view.to_json(),
        "history": history.series(conn_id),
        "history_bucket_s": history.bucket_s,
        "retained_wal": retained,
        "may_act": may_act,
    }


def create_app() -> FastAPI:
    app = FastAPI(title="airflow-cdc", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        html = resources.files("airflow_cdc.ui").joinpath("page.html").read_text(encoding="utf-8")
        return HTMLResponse(html.replace("__REFRESH_MS__", str(REFRESH_MS)))

    @app.get("/api/instances")
    def list_instances(user: UserDep, dag_id: Annotated[str | None, Query()] = None) -> dict[str, Any]:
        if dag_id:
            require_dag_readable(dag_id, user)
        # The DAG's own connections (even those only a secrets backend holds), else all listed.
        ids = dag_connections(dag_id) if dag_id else connection_ids()
        allowed = _allowed(user, ids)
        visible = [conn_id for conn_id in ids if allowed(conn_id)]
        editable = actions.may_edit(user, visible)
        views = [(conn_id, instances.monitor(conn_id).observe()) for conn_id in visible]
        return {
            "instances": [instance_json(conn_id, view, editable[conn_id]) for conn_id, view in views],
            # Instances whose connections this user may not read: the page says they exist.
            "hidden": len(ids) - len(visible),
            "refresh_ms": REFRESH_MS,
        }

    @app.get("/api/instances/{conn_id}")
    def one_instance(conn_id: str, user: UserDep) -> dict[str, Any]:
        if not _allowed(user, [conn_id])(conn_id):
            raise HTTPException(status_code=403, detail=f"you may not read connection {conn_id!r}")
        view = instances.monitor(conn_id).observe()
        return instance_json(conn_id, view, actions.may_edit(user, [conn_id])[conn_id])

    @app.post("/api/instances/{conn_id}/actions/{action}")
    def act(
        conn_id: str,
        action: str,
        user: ActingUserDep,
        body: Annotated[actions.ActionRequest | None, Body()] = None,
    ) -> dict[str, Any]:
        if not actions.may_edit(user, [conn_id])[conn_id]:
            raise HTTPException(status_code=403, detail=f"you may not edit connection {conn_id!r}: no actions on it")
        wanted = body or actions.ActionRequest()
        actions.check(action, wanted)
        entry = actions.audit(user, conn_id, action, wanted)
        try:
            done = actions.perform(conn_id, action, wanted)
        except Exception as exc:
            problem = str(exc) if isinstance(exc, CdcError) else f"{type(exc).__name__}: {exc}"
            actions.audit_outcome(entry, conn_id, wanted, f"failed: {problem}")
            log.warning("%s on %s by %s failed: %s", action, conn_id, user.get_name(), problem)
            raise HTTPException(status_code=409, detail=f"{action} failed: {problem}") from exc
        actions.audit_outcome(entry, conn_id, wanted, done["message"])
        return done

    return app
