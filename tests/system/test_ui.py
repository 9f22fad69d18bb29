"""The CDC page in Airflow's UI, in a real browser: Debian's chromium driven by playwright against
a real ``airflow api-server`` on loopback, which loads our plugin through its entry point, with a
real engine instance running an incremental snapshot of a PostgreSQL table.

What is asserted is what a person sees: the login Airflow asks for, the instance card inside
Airflow's own frame, the snapshot's progress bar moving, a paused snapshot shown as paused, its
completion at 100 %, a viewer role that may not read connections seeing none, the DAG tab
showing the instances the DAG's tasks use, and the dark theme following Airflow's. Then the
page acting (ADR 0028): an editor starts a filtered snapshot, pauses, resumes and stops one,
stops and starts the instance, each confirmed in the page, notified, and in Airflow's audit log;
a reader (role ``user``, allowed by the tests' auth manager to read connections, not to edit
them) sees no button and is refused by the endpoint; a cross-site form and a cross-origin
script are refused. Screenshots go to ``$CDC_TEST_ARTIFACTS`` (default
``build/test-artifacts``)/ui.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
ROOT = Path(__file__).resolve().parents[2]
ROWS = 60_000
ARTIFACTS = Path(os.environ.get("CDC_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "test-artifacts"))
#: role -> (user, password); role ``user`` may read connections, not edit them (ui_auth_manager).
USERS = {
    "admin": ("admin", f"adm-{uuid.uuid4().hex[:8]}"),
    "viewer": ("viewer", f"vw-{uuid.uuid4().hex[:8]}"),
    "user": ("reader", f"rd-{uuid.uuid4().hex[:8]}"),
}
AUTH_MANAGER = "tests.system.ui_auth_manager.ConnectionReadersAuthManager"
#: The page shows a slot's retained WAL in red past this (``[cdc] retained_wal_warn_bytes``).
WAL_WARN_BYTES = 8_000_000


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
        # Kept when stopped: the page stops and starts the instance (dropped after the module).
        "slot.drop.on.stop": False,
        # Debezium's default (the engine's is on): WAL other databases write stays in the slot.
        "heartbeat.interval.ms": 0,
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
        "AIRFLOW__CORE__AUTH_MANAGER": AUTH_MANAGER,
        "AIRFLOW__CDC__RETAINED_WAL_WARN_BYTES": str(WAL_WARN_BYTES),
        # The API server imports the tests' auth manager from this checkout.
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
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
        pg_server.drop_database(database)  # with its slot


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


# -- the page acts (ADR 0028) ------------------------------------------------------------------------


def _act(frame: Any, page: Any, button: Any, expected_dialog: str) -> str:
    """Click an action's button, check the page's confirmation, confirm; the notification's text."""
    seen = frame.locator("body").evaluate("() => window.cdcToasts || 0")  # notifications leave after 15 s
    button.click()
    dialog = frame.locator("dialog#confirm")
    dialog.wait_for(state="visible", timeout=10_000)
    assert expected_dialog in dialog.inner_text(), dialog.inner_text()
    frame.locator("#confirm-yes").click()
    toast = frame.locator(f'#toasts .toast[data-seq="{seen + 1}"]')
    toast.wait_for(timeout=90_000)
    text = toast.inner_text()
    assert "failed" not in (toast.get_attribute("class") or ""), text
    return text


def _audit(event: str) -> list[tuple[str, dict[str, Any]]]:
    """``(owner, extra)`` of the audit log's rows of ``event``, oldest first."""
    from airflow.models.log import Log
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(Log.owner, Log.extra).where(Log.event == event).order_by(Log.id)).all()
    return [(owner, json.loads(extra)) for owner, extra in rows]


def _badge(frame: Any, snapshot_id: str) -> str:
    badge = frame.locator(f'[data-snapshot="{snapshot_id}"] .badge')
    return badge.first.inner_text().strip().upper() if badge.count() else ""


def test_an_editor_acts_from_the_page_each_action_confirmed_notified_and_audited(stack: Stack, browser: Any) -> None:
    page = _login(browser, stack.base, "admin", "/plugin/cdc")
    frame = page.frame_locator("iframe")
    card = frame.locator('section[data-instance="cdc_ui"]')
    card.wait_for(timeout=30_000)
    wait_until(lambda: "RUNNING" in card.locator(".badge").first.inner_text(), 30, "the instance shown running")

    # A snapshot of the chosen table with a filter: the typed fields survive the page's refreshes.
    card.locator("input[name=tables]").fill("public.items")
    card.locator("input[name=filter]").fill("id <= 3000")
    wait_until(lambda: "updated" in frame.locator("#updated").inner_text(), 10, "a refresh")
    note = _act(frame, page, card.locator('button[data-action="snapshot"]'), "public.items where id <= 3000")
    filtered = re.search(r"incremental snapshot requested: signal (\S+)", note)
    assert filtered, note
    snapshot_id = filtered.group(1)
    wait_until(lambda: _badge(frame, snapshot_id) == "COMPLETED", 120, "the filtered snapshot completed")
    done = frame.locator(f'[data-snapshot="{snapshot_id}"]').inner_text()
    assert re.search(r"\b3,000\b", done) and "60,000 rows" not in done.split("of ~")[0], done
    owner, extra = _audit("cdc.snapshot")[-1]
    assert owner == "admin" and extra["conn_id"] == "cdc_ui" and extra["tables"] == ["public.items"], extra
    assert extra["filter"] == "id <= 3000" and snapshot_id in extra["outcome"], extra

    # A whole-table snapshot, paused, resumed and stopped with its own buttons.
    card.locator("input[name=filter]").fill("")
    note = _act(frame, page, card.locator('button[data-action="snapshot"]'), "(every row)")
    whole = re.search(r"signal (\S+)", note).group(1)  # type: ignore[union-attr]
    wait_until(lambda: _badge(frame, whole) == "RUNNING", 60, "the snapshot shown running")
    _shot(page, "actions")
    snapshot = frame.locator(f'[data-snapshot="{whole}"]')
    assert "pause of the snapshot requested" in _act(
        frame, page, snapshot.locator('button[data-action="pause-snapshot"]'), "Pause the running snapshot of cdc_ui"
    )
    wait_until(lambda: _badge(frame, whole) == "PAUSED", 60, "the snapshot shown paused")
    _act(frame, page, snapshot.locator('button[data-action="resume-snapshot"]'), "Resume the paused snapshot")
    wait_until(lambda: _badge(frame, whole) == "RUNNING", 60, "the snapshot shown running again")
    _act(frame, page, snapshot.locator('button[data-action="stop-snapshot"]'), "Stop the snapshot of cdc_ui")
    wait_until(lambda: _badge(frame, whole) in ("ABORTED", "COMPLETED"), 60, "the snapshot shown stopped")
    assert _badge(frame, whole) == "ABORTED"
    for event in ("cdc.pause-snapshot", "cdc.resume-snapshot", "cdc.stop-snapshot"):
        assert _audit(event)[-1][0] == "admin", event

    # The last hour's charts, kept by the page's backend, and the WAL the slot retains.
    wait_until(lambda: int(card.locator('[data-chart="events"]').get_attribute("data-points") or 0) >= 2, 60, "samples")
    assert card.locator('[data-chart="lag"] svg').count() == 1
    assert "WAL retained by the slot" in card.locator('[data-figure="wal"]').inner_text()

    # Stop and start the instance itself.
    assert "stopped" in _act(frame, page, card.locator('button[data-action="stop"]'), "Stop instance cdc_ui?")
    start = card.locator('button[data-action="start"]')
    start.wait_for(timeout=60_000)
    assert "started" in _act(frame, page, start, "Start instance cdc_ui?")
    wait_until(lambda: "RUNNING" in card.locator(".badge").first.inner_text(), 60, "the instance running again")
    assert [owner for owner, _ in _audit("cdc.stop")[-1:] + _audit("cdc.start")[-1:]] == ["admin", "admin"]


def test_an_idle_slot_retaining_wal_is_shown_red_with_the_fix(
    stack: Stack, pg_server: PostgresServer, browser: Any
) -> None:
    page = _login(browser, stack.base, "admin", "/plugin/cdc")
    card = page.frame_locator("iframe").locator('section[data-instance="cdc_ui"]')
    card.locator('[data-figure="wal"]').wait_for(timeout=60_000)
    # The captured table changes: the instance confirms its position, the slot keeps little.
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute("update items set price = price + 1 where id = 1")
    wait_until(lambda: not card.locator(".wal-fix").count(), 60, "the slot's WAL below the threshold")
    # The instance paused (a running engine lets an idle slot advance on the server's keepalives,
    # so a slot retains WAL while its reader is stopped, paused or behind), another database writes.
    client = control.client_for(stack.config)
    assert client.pause().state == "PAUSED"
    noise = f"noise_{uuid.uuid4().hex[:8]}"
    with pg_server.connect() as conn:
        conn.execute(f"create database {noise}")
    try:
        with psycopg.connect(pg_server.dsn(noise), autocommit=True) as conn:
            conn.execute("create table noise (id serial primary key, payload text)")
            for _ in range(8):
                conn.execute("insert into noise (payload) select repeat('x', 1000) from generate_series(1, 2000)")
        warning = card.locator(".wal-fix")
        warning.wait_for(timeout=60_000)  # read at most once per history bucket
        text = warning.inner_text()
        assert "The replication slot retains" in text and "heartbeat.interval.ms" in text, text
        assert "heartbeat.action.query" in text
        assert card.locator('[data-figure="wal"].over').count() == 1
        assert card.locator('[data-chart="wal"].over').count() == 1
        card.scroll_into_view_if_needed()
        _shot(page, "wal-retained")

        # Resumed, captured changes let the instance confirm past it: the red goes away. (The
        # slot's restart_lsn moves to a running-xacts record the server logged after the noise,
        # once a position after that record is confirmed: so changes keep coming until it does.
        # The instance confirms when it commits its offsets, every offset.flush.interval.ms,
        # 60 s as Debezium's: two commits could outlast the wait, so each change is committed.)
        assert client.resume().state != "PAUSED"

        def released() -> bool:
            with psycopg.connect(stack.dsn, autocommit=True) as conn:
                conn.execute("update items set price = price + 1 where id = 1")
            client.flush()
            return not card.locator(".wal-fix").count()

        wait_until(released, 90, "the WAL released", interval=2)
    finally:
        client.resume()  # the module's other tests need it reading
        with pg_server.connect() as conn:
            conn.execute(f"drop database if exists {noise} with (force)")


def _post_from(page: Any, url: str, headers: dict[str, str]) -> dict[str, Any]:
    """A POST by the page's own script (the browser's cookie): status and body, or the error."""
    return page.evaluate(
        """async ([url, headers]) => {
          try {
            const answer = await fetch(url, {method: "POST", credentials: "include", headers, body: "{}"});
            return {status: answer.status, body: await answer.text()};
          } catch (err) { return {error: String(err)}; }
        }""",
        [url, headers],
    )


PAGE_HEADERS = {"Content-Type": "application/json", "X-Airflow-CDC": "action"}


def test_a_reader_sees_no_button_and_the_endpoint_refuses_them(stack: Stack, browser: Any) -> None:
    page = _login(browser, stack.base, "user", "/plugin/cdc")
    frame = page.frame_locator("iframe")
    card = frame.locator('section[data-instance="cdc_ui"]')
    card.wait_for(timeout=30_000)  # a reader of the connection sees the instance ...
    wait_until(lambda: "RUNNING" in card.locator(".badge").first.inner_text(), 60, "the instance shown running")
    assert not frame.locator("button[data-action]").count()  # ... and no action
    _shot(page, "reader")
    refused = _post_from(page, f"{stack.base}/cdc/api/instances/cdc_ui/actions/stop", PAGE_HEADERS)
    assert refused["status"] == 403 and "may not edit connection 'cdc_ui'" in refused["body"], refused

    viewer = _login(browser, stack.base, "viewer", "/plugin/cdc")
    notice = viewer.frame_locator("iframe").locator("#notice")
    wait_until(lambda: "hidden" in notice.inner_text(), 30, "the viewer told instances are hidden")
    assert not viewer.frame_locator("iframe").locator("button[data-action]").count()
    refused = _post_from(viewer, f"{stack.base}/cdc/api/instances/cdc_ui/actions/stop", PAGE_HEADERS)
    assert refused["status"] == 403, refused
    assert not [row for row in _audit("cdc.stop") if row[0] in ("reader", "viewer")]


class _Attacker(BaseHTTPRequestHandler):
    """A page of another origin (another port of the same host: the same *site*, so the browser
    sends Airflow's SameSite=Lax cookie with its form's POST) that posts to the action endpoint."""

    target = ""

    def do_GET(self) -> None:
        body = f"""<html><body><form id="f" method="POST" action="{self.target}" enctype="text/plain">
          <input name='{{"tables":["public.items"],"x":"' value='"}}'></form></body></html>""".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cross_site_post_is_refused(stack: Stack, browser: Any) -> None:
    page = _login(browser, stack.base, "admin", "/plugin/cdc")
    page.frame_locator("iframe").locator('section[data-instance="cdc_ui"]').wait_for(timeout=30_000)
    target = f"{stack.base}/cdc/api/instances/cdc_ui/actions/stop"
    _Attacker.target = target
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Attacker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stops = len(_audit("cdc.stop"))
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        # A form: no header of ours; the browser sends the login cookie (403, not 401: it was signed in).
        with page.expect_response(target) as answer:
            page.locator("form#f").evaluate("f => f.submit()")
        assert answer.value.status == 403, answer.value.status
        assert "cross-site request refused" in answer.value.text()
        # A script of that origin cannot add the header: the browser's CORS preflight is refused.
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")  # back from the form's answer
        assert page.evaluate("location.port") == str(server.server_address[1])
        scripted = _post_from(page, target, PAGE_HEADERS)
        assert "error" in scripted and "Failed to fetch" in scripted["error"], scripted
    finally:
        server.shutdown()
        server.server_close()
    assert len(_audit("cdc.stop")) == stops  # nothing done, nothing recorded
    check = _login(browser, stack.base, "admin", "/plugin/cdc").frame_locator("iframe")
    check = check.locator('section[data-instance="cdc_ui"] .badge').first
    wait_until(lambda: "RUNNING" in check.inner_text(), 30, "the instance still running")
