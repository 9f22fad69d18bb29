"""Regenerates the recorded Kafka Connect REST answers beside this file, which
tests/unit/test_connect_client.py replays: a throwaway PostgreSQL, Kafka broker and Connect worker
(airflow_cdc.local), then every endpoint the client calls, error paths included.

Run from the repository root after `bash scripts/setup`:
    .venv/bin/python tests/unit/data/connect/record.py

Each ``<name>.json`` holds the request sent and the worker's answer as it came: status code,
content type and body (JSON parsed, anything else as text). Ports, database names and the cluster
id are whatever this run had; the tests do not depend on them.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer

HERE = Path(__file__).parent
PG = "io.debezium.connector.postgresql.PostgresConnector"


def save(name: str, response: httpx.Response, body: Any = None, params: dict[str, str] | None = None) -> None:
    request: dict[str, Any] = {"method": response.request.method, "path": response.request.url.path}
    if params:
        request["params"] = params
    if body is not None:
        request["body"] = body
    try:
        answer: Any = response.json()
    except ValueError:
        answer = response.text
    content_type = response.headers.get("content-type")
    record = {"request": request, "response": {"status": response.status_code, "content_type": content_type}}
    record["response"]["body"] = answer
    (HERE / f"{name}.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(f"{name}: {response.status_code}", flush=True)


def watch_startup(worker: KafkaConnectWorker, seen: dict[str, httpx.Response], stop: threading.Event) -> None:
    """The first answer of each status code a starting worker gives on /connectors and /health."""
    while not worker.port and not stop.is_set():
        time.sleep(0.005)
    url = f"http://127.0.0.1:{worker.port}"
    while not stop.is_set():
        for path in ("/connectors", "/health"):
            try:
                response = httpx.get(url + path, timeout=2)
            except httpx.HTTPError:
                continue
            seen.setdefault(f"{path}:{response.status_code}", response)
        time.sleep(0.005)


def wait_for(http: httpx.Client, name: str, done: Any) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = http.get(f"/connectors/{name}/status")
        if response.status_code == 200 and done(response.json()):
            return
        time.sleep(0.1)
    raise SystemExit(f"{name} never reached the state wanted: {response.text}")


def record(pg: PostgresServer, database: str, worker: KafkaConnectWorker) -> None:
    http = httpx.Client(base_url=worker.url, timeout=120)

    def call(name: str, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> None:
        save(name, http.request(method, path, json=body, params=params), body, params)

    good = {
        "connector.class": PG,
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.password": "unused",
        "database.dbname": database,
        "topic.prefix": "rec",
        "plugin.name": "pgoutput",
        "slot.name": "rec_slot",
        "table.include.list": "public.orders",
        "tasks.max": "1",
    }
    call("version", "GET", "/")
    call("health", "GET", "/health")
    call("plugins", "GET", "/connector-plugins")
    call("connectors_empty", "GET", "/connectors")
    call("create_created", "POST", "/connectors", {"name": "orders", "config": good})
    call("create_exists", "POST", "/connectors", {"name": "orders", "config": good})
    wait_for(http, "orders", lambda s: s["tasks"] and all(t["state"] == "RUNNING" for t in s["tasks"]))
    call("status_running", "GET", "/connectors/orders/status")
    deadline = time.monotonic() + 60  # the snapshot's offset is flushed once a second
    while not http.get("/connectors/orders/offsets").json()["offsets"] and time.monotonic() < deadline:
        time.sleep(0.1)
    call("config", "GET", "/connectors/orders/config")
    call("connectors_one", "GET", "/connectors")
    call("status_unknown", "GET", "/connectors/nosuch/status")
    call("delete_unknown", "DELETE", "/connectors/nosuch")
    call("pause", "PUT", "/connectors/orders/pause")
    call("resume", "PUT", "/connectors/orders/resume")
    call("restart_tasks", "POST", "/connectors/orders/restart", params={"includeTasks": "true", "onlyFailed": "false"})
    offsets = {"offsets": [{"partition": {"server": "rec"}, "offset": None}]}
    call("alter_offsets_running", "PATCH", "/connectors/orders/offsets", offsets)
    call("stop", "PUT", "/connectors/orders/stop")
    wait_for(http, "orders", lambda s: s["connector"]["state"] == "STOPPED")
    call("status_stopping", "GET", "/connectors/orders/status")  # its task may still be listed
    wait_for(http, "orders", lambda s: s["connector"]["state"] == "STOPPED" and not s["tasks"])
    call("status_stopped", "GET", "/connectors/orders/status")
    call("offsets", "GET", "/connectors/orders/offsets")

    bad_port = {**good, "database.port": "1", "slot.name": "bad_slot"}
    call("create_bad_port", "POST", "/connectors", {"name": "bad-port", "config": bad_port})
    validate = "/connector-plugins/PostgresConnector/config/validate"
    call("validate_good", "PUT", validate, {**good, "name": "orders"})
    call("validate_bad_port", "PUT", validate, {**bad_port, "name": "bad-port"})
    call("validate_missing_keys", "PUT", validate, {"connector.class": PG, "name": "empty"})
    call("validate_without_name", "PUT", validate, good)
    unknown = {"connector.class": "com.example.NoSuchConnector", "name": "nope"}
    call("validate_unknown_class", "PUT", "/connector-plugins/NoSuchConnector/config/validate", unknown)
    call("create_unknown_class", "POST", "/connectors", {"name": "nope", "config": unknown})
    malformed = http.request("POST", "/connectors", content=b"{not json", headers={"content-type": "application/json"})
    save("create_malformed_json", malformed, "{not json")

    # Valid to Connect and to Debezium's validation, fails at run time: a slot with an output
    # plugin the server does not have.
    failing = {**good, "plugin.name": "decoderbufs", "slot.name": "failing_slot", "topic.prefix": "fail"}
    call("create_failing", "POST", "/connectors", {"name": "failing", "config": failing})
    wait_for(http, "failing", lambda s: any(t["state"] == "FAILED" for t in s["tasks"]))
    call("status_failed", "GET", "/connectors/failing/status")
    call("delete", "DELETE", "/connectors/orders")
    call("delete_failing", "DELETE", "/connectors/failing")


def main() -> None:
    with PostgresServer() as pg, KafkaBroker() as broker:
        database = pg.create_database()
        with pg.connect(database) as conn:
            conn.execute("create table orders (id int primary key, item text, qty int)")
            conn.execute("insert into orders values (1, 'apple', 3)")
        worker = KafkaConnectWorker(broker)
        seen: dict[str, httpx.Response] = {}
        stop = threading.Event()
        watcher = threading.Thread(target=watch_startup, args=(worker, seen, stop), daemon=True)
        watcher.start()
        with worker:
            stop.set()
            watcher.join(5)
            for key, response in sorted(seen.items()):
                path, status = key.split(":")
                if int(status) >= 400:
                    save(f"starting{path.replace('/', '_')}_{status}", response)
            record(pg, database, worker)
        pg.drop_database(database)


if __name__ == "__main__":
    main()
