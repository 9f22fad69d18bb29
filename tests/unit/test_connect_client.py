"""Contract tests of airflow_cdc.kafka_connect.client against Kafka Connect's own answers.

The answers were recorded from a real Connect 4.3.1 worker with Debezium's PostgreSQL connector
(tests/unit/data/connect/record.py says how to record them again) and are replayed here with
``httpx.MockTransport``: the client must send what the worker was sent and read what it answered.
The few answers that could not be provoked on demand (a 409 during a rebalance, a 503, a herder
timeout) are built from Connect's message texts and say so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.kafka_connect import AsyncConnectClient, ConnectClient, ConnectRestError, ConnectUnavailableError
from airflow_cdc.kafka_connect.client import FAILED, RUNNING, STOPPED, ConnectorStatus, TaskStatus, validation_errors

DATA = Path(__file__).parent / "data" / "connect"
URL = "http://connect.test:8083"
PG = "io.debezium.connector.postgresql.PostgresConnector"


def recorded(name: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return record


def answer(response: dict[str, Any]) -> httpx.Response:
    """The recorded answer as the worker sent it: JSON, text (Jetty's HTML pages) or nothing."""
    body, headers = response["body"], {}
    if response["content_type"]:
        headers["content-type"] = response["content_type"]
    if isinstance(body, (dict, list)):
        return httpx.Response(response["status"], headers=headers, content=json.dumps(body).encode())
    return httpx.Response(response["status"], headers=headers, content=body.encode("latin-1"))


class Replay:
    """A transport that answers each request with the recording made for that method and path,
    and keeps what the client sent."""

    def __init__(self, *names: str) -> None:
        self.records = {(r["request"]["method"], r["request"]["path"]): r for r in map(recorded, names)}
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        record = self.records.get((request.method, request.url.path))
        assert record is not None, f"no recording for {request.method} {request.url.path}"
        return answer(record["response"])

    def body(self, index: int = -1) -> Any:
        return json.loads(self.sent[index].content)


def client_for(handler: Callable[[httpx.Request], httpx.Response]) -> ConnectClient:
    return ConnectClient(URL, transport=httpx.MockTransport(handler))


def replay(*names: str) -> tuple[ConnectClient, Replay]:
    transport = Replay(*names)
    return client_for(transport), transport


def connect_error(status: int, message: str) -> httpx.Response:
    """Connect's error body (``ConnectExceptionMapper``) for an answer we could not record."""
    return httpx.Response(status, json={"error_code": status, "message": message})


# -- reading what Connect answers -------------------------------------------------------------


def test_status_of_a_running_connector() -> None:
    client, _ = replay("status_running")
    status = client.status("orders")
    worker = recorded("status_running")["response"]["body"]["connector"]["worker_id"]
    assert status == ConnectorStatus(
        name="orders",
        state=RUNNING,
        worker_id=worker,
        type="source",
        tasks=(TaskStatus(0, RUNNING, worker),),
    )
    assert status.running
    assert status.failures == []


def test_a_stopped_connector_is_not_running_even_while_its_task_is_still_listed() -> None:
    stopping = client_for(lambda request: answer(recorded("status_stopping")["response"])).status("orders")
    assert (stopping.state, [t.state for t in stopping.tasks]) == (STOPPED, [RUNNING])  # recorded right after stop
    assert not stopping.running and stopping.failures == []
    client, _ = replay("status_stopped")
    status = client.status("orders")
    assert (status.state, status.tasks, status.running, status.failures) == (STOPPED, (), False, [])


def test_failures_name_the_failed_task_with_the_first_line_and_the_root_cause_of_its_trace() -> None:
    client, _ = replay("status_failed")
    status = client.status("failing")
    assert status.state == RUNNING  # Connect keeps the connector RUNNING when only a task failed
    assert [t.state for t in status.tasks] == [FAILED]
    assert status.tasks[0].trace is not None and "\tat " in status.tasks[0].trace
    assert not status.running
    assert status.failures == [
        "task 0: io.debezium.DebeziumException: Creation of replication slot failed (caused by: "
        'org.postgresql.util.PSQLException: ERROR: could not access file "decoderbufs": No such file or directory)'
    ]


def test_wait_running_fails_at_once_with_the_failed_tasks_root_cause() -> None:
    client, transport = replay("status_failed")
    with pytest.raises(ConnectRestError, match='could not access file "decoderbufs"') as caught:
        client.wait_running("failing", timeout=60)
    assert not isinstance(caught.value, RetriableError)
    assert len(transport.sent) == 1  # judged on the first answer, not at the deadline


def test_wait_running_polls_through_not_found_until_running() -> None:
    answers = iter(["status_unknown", "starting_connectors_404", "status_running"])
    client = client_for(lambda request: answer(recorded(next(answers))["response"]))
    assert client.wait_running("orders", timeout=30).running


def test_a_failed_connector_without_a_trace_still_reads() -> None:
    status = ConnectorStatus.from_json({"name": "c", "connector": {"state": FAILED, "worker_id": "w", "trace": "  "}})
    assert status.failures == ["connector c: no trace"]


def test_version_plugins_connectors_and_config() -> None:
    client, _ = replay("version", "plugins", "connectors_one", "config")
    assert client.version()["version"] == "4.3.1"
    plugins = {p["class"]: p["version"] for p in client.plugins()}
    assert plugins[PG] == "3.7.0.Final"
    assert {"io.debezium.connector.mysql.MySqlConnector", "io.debezium.connector.mariadb.MariaDbConnector"} <= set(
        plugins
    )
    assert client.connectors() == ["orders"]
    config = client.config("orders")
    assert config["connector.class"] == PG and config["name"] == "orders"


def test_offsets_are_the_list_of_partition_and_offset() -> None:
    client, _ = replay("offsets")
    offsets = client.offsets("orders")
    assert [o["partition"] for o in offsets] == [{"server": "rec"}]
    assert offsets[0]["offset"]["snapshot_completed"] is True
    assert isinstance(offsets[0]["offset"]["lsn"], int)


def test_operations_answered_without_a_body_return_none() -> None:
    client, transport = replay("pause", "resume", "stop", "delete")
    assert client.pause("orders") is None
    assert client.resume("orders") is None
    assert client.stop("orders") is None
    assert client.delete("orders") is None
    assert [(r.method, r.url.path, r.content) for r in transport.sent] == [
        ("PUT", "/connectors/orders/pause", b""),
        ("PUT", "/connectors/orders/resume", b""),
        ("PUT", "/connectors/orders/stop", b""),
        ("DELETE", "/connectors/orders", b""),
    ]


def test_restart_sends_its_flags_and_returns_the_restarting_status() -> None:
    client, transport = replay("restart_tasks")
    body = client.restart("orders", include_tasks=True)
    assert dict(transport.sent[0].url.params) == recorded("restart_tasks")["request"]["params"]
    assert body["connector"]["state"] == "RESTARTING"


# -- what the client sends --------------------------------------------------------------------


def test_create_sends_the_config_as_connect_strings() -> None:
    client, transport = replay("create_created")
    sent = recorded("create_created")["request"]["body"]
    config = {**sent["config"], "database.port": int(sent["config"]["database.port"]), "tasks.max": 1}
    created = client.create("orders", config)
    assert transport.body() == sent
    assert created["name"] == "orders" and created["config"]["tasks.max"] == "1"


def test_booleans_are_sent_the_way_java_spells_them() -> None:
    client, transport = replay("create_created")
    client.create(
        "orders", {"connector.class": PG, "tombstones.on.delete": False, "provide.transaction.metadata": True}
    )
    assert transport.body()["config"] == {
        "connector.class": PG,
        "tombstones.on.delete": "false",
        "provide.transaction.metadata": "true",
    }


def test_names_are_quoted_in_paths() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return answer(recorded("status_unknown")["response"])

    with pytest.raises(ConnectRestError):
        client_for(handler).status("a/b c")
    assert seen == ["/connectors/a%2Fb%20c/status"]


def test_validate_names_the_config_so_that_a_good_one_has_no_errors() -> None:
    """Connect requires ``name`` in a validated config (recorded: one error without it)."""
    without_name = recorded("validate_without_name")
    assert validation_errors(without_name["response"]["body"]) == [
        'name: Missing required configuration "name" which has no default value.'
    ]
    client, transport = replay("validate_good")
    config = {k: v for k, v in without_name["request"]["body"].items() if k != "connector.class"}
    result = client.validate(PG, config)
    assert transport.sent[0].url.path == "/connector-plugins/PostgresConnector/config/validate"
    assert transport.body() == {**without_name["request"]["body"], "name": "PostgresConnector"}
    assert result["error_count"] == 0
    assert validation_errors(result) == []


def test_validation_errors_name_each_key_and_connects_words() -> None:
    client, _ = replay("validate_bad_port")
    result = client.validate(PG, {"database.port": 1})
    assert result["error_count"] == 1
    assert validation_errors(result) == [
        "database.hostname: Error while validating connector config: Connection to 127.0.0.1:1 refused. "
        "Check that the hostname and port are correct and that the postmaster is accepting TCP/IP connections."
    ]
    missing = validation_errors(recorded("validate_missing_keys")["response"]["body"])
    assert [error.split(":")[0] for error in missing] == [
        "database.hostname",
        "database.user",
        "database.dbname",
        "topic.prefix",
    ]


# -- errors: Connect's message, and whether to try again ------------------------------------------


@pytest.mark.parametrize(
    ("name", "call", "status", "words"),
    [
        ("status_unknown", lambda c: c.status("nosuch"), 404, "No status found for connector nosuch"),
        ("delete_unknown", lambda c: c.delete("nosuch"), 404, "Connector nosuch not found"),
        ("create_exists", lambda c: c.create("orders", {}), 409, "Connector orders already exists"),
        ("create_bad_port", lambda c: c.create("bad-port", {}), 400, "Connection to 127.0.0.1:1 refused"),
        ("create_unknown_class", lambda c: c.create("nope", {}), 400, "which name matches com.example.NoSuchConnector"),
        (
            "validate_unknown_class",
            lambda c: c.validate("com.example.NoSuchConnector", {}),
            500,
            "Failed to find any class that implements Connector",
        ),
        (
            "alter_offsets_running",
            lambda c: c.alter_offsets("orders", []),
            400,
            "Connectors must be in the STOPPED state before their offsets can be modified",
        ),
    ],
)
def test_refusals_are_fatal_and_carry_connects_message(
    name: str, call: Callable[[ConnectClient], Any], status: int, words: str
) -> None:
    client, _ = replay(name)
    with pytest.raises(ConnectRestError) as caught:
        call(client)
    error = caught.value
    assert type(error) is ConnectRestError  # not ConnectUnavailableError: trying again cannot help
    assert not isinstance(error, RetriableError)
    assert error.status == status
    assert error.message == recorded(name)["response"]["body"]["message"]
    assert words in error.message and words in str(error)
    assert str(error).startswith(f"Kafka Connect {error.method} {URL}/")


def test_a_body_connect_could_not_parse_is_a_fatal_error_with_its_message() -> None:
    record = recorded("create_malformed_json")
    client = client_for(lambda request: answer(record["response"]))
    with pytest.raises(ConnectRestError, match="was expecting double-quote") as caught:
        client.connectors()
    assert caught.value.status == 500 and not isinstance(caught.value, RetriableError)


def test_a_starting_workers_html_404_is_unavailable_not_unknown() -> None:
    """Before its API is registered, a starting worker's Jetty answers every path with an HTML
    404 (recorded): that is "not yet", not "no such connector"."""
    client, _ = replay("starting_connectors_404")
    with pytest.raises(ConnectUnavailableError) as caught:
        client.connectors()
    assert caught.value.status == 404
    assert "not a Kafka Connect answer" in caught.value.message
    assert len(caught.value.message) < 300  # a snippet of the page, not the whole of it


@pytest.mark.parametrize(
    "response",
    [
        # Connect 4.3.1's HerderRequestHandler texts for a request that met a rebalance:
        connect_error(409, "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"),
        connect_error(
            409,
            "Cannot complete request momentarily due to stale configuration (typically caused by a "
            "concurrent config change)",
        ),
        connect_error(503, "Service Unavailable"),
        httpx.Response(503, text="Service Unavailable"),
        # ... and for a request the herder did not get to in time (its text goes on to say why):
        connect_error(500, "Request timed out. The worker is currently starting up the worker"),
    ],
    ids=["409-rebalance", "409-stale-config", "503", "503-not-json", "500-herder-timeout"],
)
def test_answers_that_mean_not_now_are_retriable(response: httpx.Response) -> None:
    client = client_for(lambda request: response)
    with pytest.raises(ConnectUnavailableError) as caught:
        client.create("orders", {"connector.class": PG})
    assert isinstance(caught.value, RetriableError)
    assert caught.value.status == response.status_code


@pytest.mark.parametrize(
    "exc", [httpx.ConnectError("Connection refused"), httpx.ReadTimeout("timed out"), httpx.RemoteProtocolError("x")]
)
def test_transport_errors_are_retriable_and_name_the_url(exc: httpx.TransportError) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    with pytest.raises(ConnectUnavailableError) as caught:
        client_for(handler).status("orders")
    assert caught.value.status == 0
    assert f"{URL}/connectors/orders/status" in str(caught.value)
    assert type(exc).__name__ in caught.value.message


def test_wait_running_gives_up_at_its_deadline_with_the_last_status() -> None:
    client, transport = replay("status_stopped")
    with pytest.raises(ConnectRestError, match=r"not RUNNING after 0s: .*state='STOPPED'"):
        client.wait_running("orders", timeout=0.3)
    assert len(transport.sent) >= 2


# -- the async client is the same contract -------------------------------------------------------


def test_the_async_client_reads_and_fails_the_same_way() -> None:
    transport = Replay("status_failed", "create_exists", "starting_connectors_404")

    async def calls() -> tuple[ConnectorStatus, BaseException, BaseException]:
        async with AsyncConnectClient(URL, transport=httpx.MockTransport(transport)) as client:
            status = await client.status("failing")
            with pytest.raises(ConnectRestError) as exists:
                await client.create("orders", {})
            with pytest.raises(ConnectUnavailableError) as starting:
                await client.connectors()
            return status, exists.value, starting.value

    status, exists, starting = asyncio.run(calls())
    assert status.failures == client_for(Replay("status_failed")).status("failing").failures
    assert type(exists) is ConnectRestError and "already exists" in str(exists)
    assert isinstance(starting, RetriableError)
