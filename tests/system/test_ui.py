"""The CDC page in Airflow's UI, in a real browser: Debian's chromium driven by playwright against
a real ``airflow api-server`` on loopback, which loads our plugin through its entry point, with a
real engine instance running an incremental snapshot of a PostgreSQL table.

What is asserted is what a person sees: the login Airflow asks for, the instance card inside
Airflow's own frame, the snapshot's progress bar moving, a paused snapshot shown as paused, its
completion at 100 %, a viewer role that may not read connections seeing none, the DAG tab
showing the instances the DAG's tasks use, and the dark theme following Airflow's. Screenshots
go to ``$CDC_TEST_ARTIFACTS`` (default ``build/test-artifacts``)/ui.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from playwright.sync_api import sync_playwright

from airflow_cdc.engine.server import control
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.ports import free_port
from airflow_cdc.local.postgres import PostgresServer
from tests.system.conftest import TOKEN

CHROMIUM = "/usr/bin/chromium"
ROWS = 60_000
ARTIFACTS = Path(os.environ.get("CDC_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "test-artifacts"))
USERS = {"admin": ("admin", f"adm-{uuid.uuid4().hex[:8]}"), "viewer": ("viewer", f"vw-{uuid.uuid4().hex[:8]}")}


@dataclass
class Stack:
    base: str  # the API server's URL
    dsn: str  # the captured database
    config: dict[str, Any]


@pytest.fixture(scope="module")
def stack(pg_server: PostgresServer, airflow_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One API server for the module (Airflow's simple auth manager, users admin and viewer; the
    example DAGs serialized, for the DAG tab) and the instance of connection ``cdc_ui``: it
    streams ``public.items`` (60,000 rows, snapshotted 50 rows a chunk so that a snapshot lasts
    long enough to watch). Connection ``cdc_gone`` names an address where nothing listens."""
    work = tmp_path_factory.mktemp("ui")
    database = f"ui_{uuid.uuid4().hex[:8]}"
    with pg_server.connect() as conn:
        conn.execute(f"create database {database}")
    dsn = pg_server.dsn(database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table items (id int primary key, name text, price numeric(10,2))")
        conn.execute(f"insert into items select g, 'item ' || g, g * 0.5 from generate_series(1, {ROWS}) g")
        conn.execute("analyze items")  # the snapshot's row estimate comes from the planner's statistics
        conn.execute(
            "create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"
        )
    config = {
        "name": f"ui-{database[-8:]}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": "shop",
        "database.hostname": pg_server.host,
        "database.port": pg_server.port,
        "database.user": pg_server.user,
        **({"database.password": pg_server.password} if pg_server.password else {}),
        "database.dbname": database,
        "slot.name": f"slot_{database}",
        "publication.name": f"pub_{database}",
        "table.include.list": "public.items",
        "signal.data.collection": "public.debezium_signal",
        "snapshot.mode": "no_data",
        "slot.drop.on.stop": True,
        "incremental.snapshot.chunk.size": 50,
        "state.dir": str(work / "state"),
        "api.token": TOKEN,
        "sink.type": "changelog",
    }
    path = work / "ui.yaml"
    path.write_text(yaml.safe_dump(config))
    passwords = work / "passwords.json"
    passwords.write_text(json.dumps({user: password for user, password in USERS.values()}))
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{role}" for role, (u, _) in USERS.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW_CONN_CDC_UI": json.dumps(
            {"conn_type": "cdc_engine", "password": TOKEN, "extra": {"config_path": str(path)}}
        ),
        "AIRFLOW_CONN_CDC_GONE": json.dumps({"conn_type": "cdc_engine", "host": f"http://127.0.0.1:{free_port()}"}),
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    done = subprocess.run(
        [airflow, "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    control.start_detached(path, config, timeout=60)
    port = free_port()
    log_path = work / "api-server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [airflow, "api-server", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers rename themselves: stop the whole group
        )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert server.poll() is None, log_path.read_text()[-3000:]
        try:
            return httpx.get(f"{base}/api/v2/monitor/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(healthy, 120, "the API server answering", interval=0.5)
        yield Stack(base, dsn, config)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        control.stop(config, timeout=30)
        with pg_server.connect() as conn:
            conn.execute(f"drop database if exists {database} with (force)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run bash scripts/setup (it installs Debian's chromium)")
    with sync_playwright() as playwright:
        # --no-sandbox: the tests run as root, where chromium refuses its sandbox.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def _login(browser: Any, base: str, role: str, path: str) -> Any:
    """A page of a fresh browser context, signed in through Airflow's own login form at ``path``."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}{path}")
    page.wait_for_url(re.compile(r".*/auth/login.*"), timeout=30_000)
    user, password = USERS[role]
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r".*" + re.escape(path.split("?")[0]) + ".*"), timeout=30_000)
    return page


def _shot(page: Any, name: str) -> None:
    (ARTIFACTS / "ui").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "ui" / f"{name}.png"), full_page=True)


def _percent(frame: Any, snapshot_id: str) -> float | None:
    bar = frame.locator(f'[data-snapshot="{snapshot_id}"] [role=progressbar]')
    if not bar.count():
        return None
    value = bar.first.get_attribute("aria-valuenow")
    return float(value) if value else None


def _signal(stack: Stack, kind: str, data: dict[str, Any], signal_id: str) -> None:
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(
            "insert into debezium_signal (id, type, data) values (%s, %s, %s)",
            (f"{signal_id}-{kind}" if kind != "execute-snapshot" else signal_id, kind, json.dumps(data)),
        )


def test_the_page_shows_instances_and_a_snapshot_moving_in_airflows_frame(stack: Stack, browser: Any) -> None:
    api_server = stack.base
    # Nobody signed in: the page's data needs Airflow's login.
    assert httpx.get(f"{api_server}/cdc/api/instances", timeout=10).status_code == 401

    page = _login(browser, api_server, "admin", "/plugin/cdc")
    frame = page.frame_locator("iframe")
    card = frame.locator('section[data-instance="cdc_ui"]')
    card.wait_for(timeout=30_000)
    wait_until(lambda: "RUNNING" in card.locator(".badge").first.inner_text(), 30, "the instance shown running")
    gone = frame.locator('section[data-instance="cdc_gone"]')
    assert "UNREACHABLE" in gone.inner_text() and "Connection refused" in gone.inner_text()

    # A snapshot through the signal table, as a DAG's CdcSnapshotOperator would send it.
    snapshot_id = f"ui-{uuid.uuid4().hex[:8]}"
    _signal(stack, "execute-snapshot", {"data-collections": ["public.items"], "type": "incremental"}, snapshot_id)
    first = wait_until(
        lambda: (p := _percent(frame, snapshot_id)) is not None and 0 < p < 100 and p,
        60,
        "the snapshot's progress shown part way",
        interval=0.2,
    )
    text = frame.locator(f'[data-snapshot="{snapshot_id}"]').inner_text()
    assert re.search(r"of ~6\d,\d{3} rows", text), text  # rows scanned of the estimate
    assert "public.items" in text
    _shot(page, "snapshot-running")
    wait_until(lambda: (_percent(frame, snapshot_id) or 0) > first, 30, "the progress bar moving", interval=0.2)

    _signal(stack, "pause-snapshot", {}, snapshot_id)
    paused = frame.locator(f'[data-snapshot="{snapshot_id}"] .badge')
    wait_until(lambda: paused.inner_text().strip().upper() == "PAUSED", 30, "the snapshot shown paused")
    held = _percent(frame, snapshot_id)
    _shot(page, "snapshot-paused")
    _signal(stack, "resume-snapshot", {}, snapshot_id)

    wait_until(lambda: paused.inner_text().strip().upper() == "COMPLETED", 120, "the snapshot shown completed")
    assert _percent(frame, snapshot_id) == 100.0 and (held or 0) < 100
    done = frame.locator(f'[data-snapshot="{snapshot_id}"]').inner_text()
    assert f"{ROWS:,} rows" in done and "SUCCEEDED" in done, done
    notes = frame.locator('section[data-instance="cdc_ui"] ul.notes').inner_text()
    assert "COMPLETED" in notes and "TABLE_SCAN_COMPLETED" in notes
    _shot(page, "snapshot-completed")

    # Airflow's dark theme (its choice is kept in localStorage "theme"): the page follows it.
    page.evaluate("localStorage.setItem('theme', 'dark')")
    page.reload()
    frame = page.frame_locator("iframe")
    frame.locator('section[data-instance="cdc_ui"]').wait_for(timeout=30_000)
    background = frame.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
    assert background == "rgb(17, 24, 39)", background
    _shot(page, "dark")


def test_a_viewer_sees_no_instance_and_the_dag_tab_shows_the_dags_instances(stack: Stack, browser: Any) -> None:
    api_server = stack.base
    viewer = _login(browser, api_server, "viewer", "/plugin/cdc")
    notice = viewer.frame_locator("iframe").locator("#notice")
    wait_until(lambda: "hidden" in notice.inner_text(), 30, "the viewer told instances are hidden")
    assert not viewer.frame_locator("iframe").locator("section.card").count()
    _shot(viewer, "viewer")

    # example_cdc_pipeline's tasks use cdc_shop: its tab shows that instance (not running here).
    admin = _login(browser, api_server, "admin", "/dags/example_cdc_pipeline/plugin/cdc-dag")
    frame = admin.frame_locator("iframe")
    shop = frame.locator('section[data-instance="cdc_shop"]')
    shop.wait_for(timeout=30_000)
    assert "isn't defined" in shop.inner_text() and "Fix: add the connection" in shop.inner_text()  # not here
    assert not frame.locator('section[data-instance="cdc_ui"]').count()
    _shot(admin, "dag-tab")


def test_extra_links_open_the_page_at_the_instance_and_snapshot(stack: Stack, browser: Any) -> None:
    api_server = stack.base
    from airflow_cdc.ui import page_url

    page = _login(browser, api_server, "admin", page_url(instance="cdc_ui", snapshot="none-yet"))
    focused = page.frame_locator("iframe").locator("section.card.focus")  # inside Airflow's frame
    focused.wait_for(timeout=30_000)
    assert focused.get_attribute("data-instance") == "cdc_ui"
