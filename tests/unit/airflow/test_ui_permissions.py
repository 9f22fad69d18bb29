"""Who sees what on the CDC page (ADR 0013) in a multi-team Airflow: the page's FastAPI app behind
a real ``TestClient``, Airflow's own ``SimpleAuthManager`` (users of teams ``blue`` and ``red``,
role ``op``: they may read connections of no team and of their own team, DAGs likewise) and a
real metadata database (sqlite in the throwaway ``AIRFLOW_HOME``) holding the teams, a DAG bundle
of team ``blue``, a DAG in it and a connection of team ``blue``.

The page must ask the auth manager as Airflow's own routes do: a connection with its team (else
the auth manager answers for a connection of no team, and a red user sees blue's instance), and a
DAG's instances only after asking about that DAG (else a user allowed the DAG's connection but
not the DAG learns what the DAG runs)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from airflow.api_fastapi.app import init_auth_manager, purge_cached_app
from airflow.api_fastapi.auth.managers.base_auth_manager import BaseAuthManager
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from fastapi.testclient import TestClient

from airflow_cdc.local.ports import free_port
from airflow_cdc.operators.engine import CdcStartEngineOperator
from airflow_cdc.ui.app import create_app


@dataclass
class Deployment:
    blue: str  # team names
    red: str
    dag_id: str  # a DAG of team blue; its task names `shared`
    shared: str  # a connection of no team (the environment's)
    blue_conn: str  # a connection of team blue (the metadata database's)
    blue_host: str


@pytest.fixture(scope="module")
def metadata_db() -> None:
    from airflow.utils import db

    db.initdb()  # idempotent: the package's throwaway AIRFLOW_HOME, sqlite


@pytest.fixture
def deployment(metadata_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    from airflow.api.common.delete_dag import delete_dag
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.models import Connection
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.team import Team
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    tag = uuid.uuid4().hex[:8]
    found = Deployment(f"blue{tag}", f"red{tag}", f"shop_{tag}", f"cdc_shared_{tag}", f"cdc_blue_{tag}", "")
    found.blue_host = f"http://127.0.0.1:{free_port()}"  # nothing listens: the page says so
    bundle = f"bundle_{tag}"
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{found.shared.upper()}",
        json.dumps({"conn_type": "cdc_engine", "host": f"http://127.0.0.1:{free_port()}"}),
    )
    with create_session() as session:
        teams = [Team(name=found.blue), Team(name=found.red)]
        session.add_all(teams)
        session.flush()  # the rows below name the teams
        owned = DagBundleModel(name=bundle)
        owned.teams.append(teams[0])
        session.add(owned)
        session.add(
            Connection(conn_id=found.blue_conn, conn_type="cdc_engine", host=found.blue_host, team_name=found.blue)
        )
    with DAG(found.dag_id, schedule=None) as dag:
        CdcStartEngineOperator(task_id="start", cdc_conn_id=found.shared)
    with create_session() as session:
        update_dag_parsing_results_in_db(bundle, None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(), session)
    try:
        yield found
    finally:
        delete_dag(found.dag_id, keep_records_in_log=False)
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == found.blue_conn).delete()
            session.query(DagBundleModel).filter(DagBundleModel.name == bundle).delete()
            session.query(Team).filter(Team.name.in_([found.blue, found.red])).delete()


@pytest.fixture
def auth_manager(deployment: Deployment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[BaseAuthManager]:
    """Airflow's SimpleAuthManager as the API server starts it, with a user per team."""
    manager = SimpleAuthManager
    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER", f"{manager.__module__}.{manager.__qualname__}")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", f"blue:op:{deployment.blue},red:op:{deployment.red}")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(tmp_path / "passwords.json"))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", uuid.uuid4().hex * 2)
    purge_cached_app()
    try:
        yield init_auth_manager()
    finally:
        purge_cached_app()


@pytest.fixture
def page(auth_manager: BaseAuthManager, deployment: Deployment) -> Any:
    """``page(user, path, **params)``: the page's API answer to that team's user."""
    client = TestClient(create_app())
    teams = {"blue": deployment.blue, "red": deployment.red}

    def get(user: str, path: str, **params: str) -> Any:
        token = auth_manager.generate_jwt(SimpleAuthManagerUser(username=user, role="op", teams=[teams[user]]))
        return client.get(path, params=params, headers={"Authorization": f"Bearer {token}"})

    return get


def labels(answer: Any) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [view["label"] for view in answer.json()["instances"]]


def test_a_dags_instances_are_listed_only_to_a_user_allowed_to_read_the_dag(page: Any, deployment: Deployment) -> None:
    # Red may read the DAG's connection (it belongs to no team) but not blue's DAG.
    assert page("red", f"/api/instances/{deployment.shared}").status_code == 200
    refused = page("red", "/api/instances", dag_id=deployment.dag_id)
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"] == f"you may not read DAG {deployment.dag_id!r}"

    assert labels(page("blue", "/api/instances", dag_id=deployment.dag_id)) == [deployment.shared]
    # A DAG of no team that does not exist: a reader learns that it does not.
    assert page("red", "/api/instances", dag_id=f"{deployment.dag_id}_gone").status_code == 404


def test_a_connections_team_reaches_the_auth_managers_check(page: Any, deployment: Deployment) -> None:
    red = page("red", "/api/instances")
    assert deployment.blue_conn not in labels(red) and deployment.shared in labels(red)
    assert red.json()["hidden"] >= 1  # the page says that instances exist it does not show
    assert page("red", f"/api/instances/{deployment.blue_conn}").status_code == 403

    [view] = [v for v in page("blue", "/api/instances").json()["instances"] if v["label"] == deployment.blue_conn]
    # Looked up as team blue's connection (Airflow finds it only so): its host, unreachable.
    assert view["url"] == deployment.blue_host and view["reachable"] is False
    one = page("blue", f"/api/instances/{deployment.blue_conn}")
    assert one.status_code == 200 and one.json()["url"] == deployment.blue_host


def test_an_action_on_a_teams_connection_is_only_for_that_teams_editors(
    page: Any, auth_manager: BaseAuthManager, deployment: Deployment
) -> None:
    """Asked ``PUT`` with the connection's team: red may not act on blue's instance (403, and
    before anything is sent or audited), blue may (here: the instance does not answer, 409)."""
    from airflow.models.log import Log
    from airflow.utils.session import create_session

    [view] = [v for v in page("blue", "/api/instances").json()["instances"] if v["label"] == deployment.blue_conn]
    assert view["may_act"] is True
    client = TestClient(create_app())
    headers = {"X-Airflow-CDC": "action"}

    def post(user: str) -> Any:
        team = deployment.blue if user == "blue" else deployment.red
        token = auth_manager.generate_jwt(SimpleAuthManagerUser(username=user, role="op", teams=[team]))
        return client.post(
            f"/api/instances/{deployment.blue_conn}/actions/pause-snapshot",
            headers={**headers, "Authorization": f"Bearer {token}"},
        )

    refused = post("red")
    assert refused.status_code == 403 and "may not edit connection" in refused.json()["detail"]
    failed = post("blue")
    assert failed.status_code == 409 and "pause-snapshot failed" in failed.json()["detail"], failed.text
    with create_session() as session:
        rows = session.query(Log).filter(Log.event == "cdc.pause-snapshot").all()
        mine = [json.loads(r.extra) for r in rows if json.loads(r.extra)["conn_id"] == deployment.blue_conn]
        assert [r.owner for r in rows if json.loads(r.extra)["conn_id"] == deployment.blue_conn] == ["blue"]
    assert mine[0]["outcome"].startswith("failed: ")
