"""The CDC page shows an instance that retries a fault as RETRYING, with the cause (issue: "the
instance's status and the CDC page say RETRYING with the cause while it retries").

A real engine instance whose PostgreSQL does not answer (nothing listens on its port: it retries
its start), the page's real FastAPI app behind a ``TestClient`` with Airflow's SimpleAuthManager
(an admin's token), and the page itself rendered by Debian's chromium through playwright: every
request the page makes is answered by the app, so what is asserted is what a person sees."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow.api_fastapi.app import init_auth_manager, purge_cached_app
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from fastapi.testclient import TestClient
from playwright.sync_api import Route, sync_playwright

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.ui import app as ui_app
from tests.integration.test_retrying_status import TOKEN, Serving, refused_config

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("CDC_TEST_ARTIFACTS", Path(__file__).resolve().parents[3] / "build" / "test-artifacts"))
CONN = f"cdc_retry_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def retrying_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Serving]:
    """The instance, RETRYING, and connection ``CONN`` naming it."""
    with Serving(refused_config(tmp_path)) as serving:
        wait_until(lambda: serving.status()["health"] == "RETRYING", 60, "health RETRYING")
        conn = {"conn_type": "cdc_engine", "host": serving.instance.api_url, "login": "refused", "password": TOKEN}
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps(conn))
        yield serving


@pytest.fixture(scope="module")
def metadata_db() -> None:
    from airflow.utils import db

    db.initdb()  # idempotent: the package's throwaway AIRFLOW_HOME, sqlite (tokens are checked there)


@pytest.fixture
def page_app(
    metadata_db: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """The page's app, and the headers of a signed-in admin (Airflow's SimpleAuthManager)."""
    manager = SimpleAuthManager
    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER", f"{manager.__module__}.{manager.__qualname__}")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(tmp_path / "passwords.json"))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", uuid.uuid4().hex * 2)
    monkeypatch.setattr(ui_app, "instances", ui_app.Instances(lambda: [CONN]))  # this test's connection only
    purge_cached_app()
    try:
        token = init_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
        yield TestClient(ui_app.create_app()), {"Authorization": f"Bearer {token}"}
    finally:
        purge_cached_app()


def test_the_page_shows_an_instance_retrying_with_its_cause(
    retrying_instance: Serving, page_app: tuple[TestClient, dict[str, str]]
) -> None:
    client, auth = page_app
    answer = client.get(f"/api/instances/{CONN}", headers=auth)
    assert answer.status_code == 200, answer.text
    view = answer.json()
    assert view["health"] == "retrying" and view["error"] is None, view
    assert view["cause"].startswith("task refused-0 start: cannot connect to PostgreSQL"), view
    assert "Connection refused" in view["cause"] and view["fix"], view
    assert view["retrying"]["what"] == "start" and view["tasks"][0]["retrying"]["what"] == "start"

    def through_the_app(route: Route) -> None:
        """The browser's requests, answered by the page's app (the API server's part)."""
        path = route.request.url.removeprefix("http://airflow.test/cdc")
        answered = client.get(path or "/", headers=auth)
        route.fulfill(status=answered.status_code, body=answered.content, headers=dict(answered.headers))

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run bash scripts/setup (it installs Debian's chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])  # root: no sandbox
        try:
            page = browser.new_page()
            page.route("http://airflow.test/**", through_the_app)
            page.goto("http://airflow.test/cdc/")
            card = page.locator(f'section[data-instance="{CONN}"]')
            card.wait_for(timeout=30_000)
            assert card.locator(".badge").first.inner_text() == "RETRYING"
            retry = card.locator('[data-health="retrying"]')
            shown = retry.inner_text()
            assert shown.startswith("Retrying: task refused-0 start: cannot connect to PostgreSQL"), shown
            assert "Connection refused" in shown and "failing since " in shown and "attempt " in shown, shown
            assert "The instance retries on its own and recovers when the cause is gone; if it persists:" in shown
            assert card.locator(".error:not(.retry)").count() == 0  # not shown as failed
            task_row = card.locator("tr", has_text="refused-0")
            assert "retrying start" in task_row.inner_text().lower()
            (ARTIFACTS / "ui").mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "ui" / "retrying.png"), full_page=True)
        finally:
            browser.close()
