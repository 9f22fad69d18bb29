"""Contract tests of the Kafka Connect engine backend (airflow_cdc.kafka_connect.backend) against
Kafka Connect's own answers, recorded from a real worker with Debezium's PostgreSQL connector
(tests/unit/data/connect/, see record.py and record_backend.py there) and replayed with
``httpx.MockTransport``: the backend must answer with the embedded instance's models and raise
the engine's errors, naming the fix. The few answers that cannot be provoked on demand (a
refused connection, a rebalance) are built and say so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_cdc.engine.errors import (
    ApiRefusedError,
    ApiUnavailableError,
    CdcError,
    ConfigError,
    RefusedError,
    RetriableError,
)
from airflow_cdc.engine.notifications import NotificationPage
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus, OffsetEntry, StateChange
from airflow_cdc.engine.sources.postgres.pgoutput import format_lsn
from airflow_cdc.kafka_connect.backend import AsyncConnectorEngineClient, ConnectorEngineClient
from airflow_cdc.kafka_connect.errors import ConnectorNotFoundError, SignalChannelError
from airflow_cdc.kafka_connect.notification_topic import Cursor, notification_of
from airflow_cdc.triggers.progress import SnapshotWatch
from tests.unit.test_connect_client import DATA, answer, recorded

ROOT = Path(__file__).parents[2]
URL = "http://connect.test:8083"
PG = "io.debezium.connector.postgresql.PostgresConnector"


class Worker:
    """Answers each request with a recording (by name, served at another connector's path when
    asked), and keeps what the backend sent."""

    def __init__(self, routes: dict[tuple[str, str], str | dict[str, Any]]) -> None:
        self.routes = routes
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        route = self.routes.get((request.method, request.url.path))
        assert route is not None, f"no answer for {request.method} {request.url.path}"
        return answer(recorded(route)["response"] if isinstance(route, str) else route)

    def client(self, name: str = "orders", **kwargs: Any) -> ConnectorEngineClient:
        return ConnectorEngineClient(URL, name, transport=httpx.MockTransport(self), **kwargs)

    def async_client(self, name: str = "orders", **kwargs: Any) -> AsyncConnectorEngineClient:
        return AsyncConnectorEngineClient(URL, name, transport=httpx.MockTransport(self), **kwargs)


def body_of(name: str) -> Any:
    return recorded(name)["response"]["body"]


def ok(body: Any, status: int = 200) -> dict[str, Any]:
    return {"status": status, "content_type": "application/json", "body": body}


def orders(**routes: str | dict[str, Any]) -> Worker:
    """The connector ``orders`` as recorded: running, its config, its offsets."""
    base: dict[tuple[str, str], str | dict[str, Any]] = {
        ("GET", "/connectors/orders/status"): "status_running",
        ("GET", "/connectors/orders/config"): "config",
        ("GET", "/connectors/orders/offsets"): "offsets",
    }
    for key, route in routes.items():
        method, _, name = key.partition("_")
        base[(method.upper(), f"/connectors/orders/{name}".rstrip("/"))] = route
    return Worker(base)


# -- status, positions, offsets ------------------------------------------------------------------
def test_a_running_connector_reads_as_a_polling_instance_with_its_committed_position() -> None:
    with orders().client() as client:
        status = client.status()
    assert isinstance(status, InstanceStatus)
    assert (status.name, status.state, status.phase, status.paused, status.error) == (
        "orders",
        "POLLING_TASKS",
        "streaming",  # the snapshot's offset says snapshot_completed
        False,
        None,
    )
    assert status.running and status.connector_class == PG and status.api == URL
    assert [(t.id, t.paused, t.error) for t in status.tasks] == [("orders-0", False, None)]
    assert status.position is not None
    [task] = status.position.tasks
    # Debezium's offset after its snapshot: {"lsn": 26363504, "snapshot": "INITIAL", "snapshot_completed": true}
    assert (task.task, task.partition, task.committed, task.phase) == (
        "orders-0",
        {"server": "rec"},
        format_lsn(26363504),
        "streaming",
    )
    assert (task.current, task.lag, task.caught_up) == (None, None, None)  # Debezium does not say


def test_a_target_position_is_compared_with_the_connectors_codec() -> None:
    with orders().client() as client:
        reached = client.position(format_lsn(26363504))
        ahead = client.position(format_lsn(26363504 + 1))
    assert isinstance(reached, InstancePosition)
    assert (reached.target, reached.reached, reached.tasks[0].reached) == (format_lsn(26363504), True, True)
    assert (ahead.reached, ahead.tasks[0].reached, ahead.lag_unit) == (False, False, "bytes")
    with orders().client() as client, pytest.raises(CdcError, match="LSN like"):
        client.position("yesterday")


def test_offsets_are_the_engines_offset_entries() -> None:
    with orders().client() as client:
        entries = client.offsets()
    assert entries == [OffsetEntry({"server": "rec"}, body_of("offsets")["offsets"][0]["offset"])]


def test_an_unfinished_snapshot_is_the_snapshotting_phase() -> None:
    offset = {"lsn": 26363504, "txId": 728, "snapshot": "INITIAL", "last_snapshot_record": False}
    worker = orders(get_offsets=ok({"offsets": [{"partition": {"server": "rec"}, "offset": offset}]}))
    with worker.client() as client:
        status = client.status()
        position = client.position(format_lsn(1))
    assert (status.phase, status.position.tasks[0].phase if status.position else None) == (
        "snapshotting",
        "snapshotting",
    )
    assert position.reached is False  # rows not yet read cover no position


def test_a_connector_without_offsets_yet_is_snapshotting_or_streaming_by_its_snapshot_mode() -> None:
    no_data = {**body_of("config"), "snapshot.mode": "no_data"}
    for config, phase in ((body_of("config"), "snapshotting"), (no_data, "streaming")):
        with orders(get_offsets=ok({"offsets": []}), get_config=ok(config)).client() as client:
            status = client.status()
        assert status.phase == phase and status.position is not None
        assert [(t.task, t.committed) for t in status.position.tasks] == [("orders-0", None)]


def test_a_stopped_connector_is_stopped_even_while_its_task_is_still_listed() -> None:
    for recording in ("status_stopping", "status_stopped"):
        with orders(get_status=recording).client() as client:
            status = client.status()
            assert (status.state, status.phase, status.running) == ("STOPPED", "stopped", False)
            with pytest.raises(ApiUnavailableError, match="is STOPPED"):
                client.health()  # as an embedded instance that stopped (CdcStopEngineOperator waits for it)


def test_a_failed_task_is_the_failed_phase_with_its_trace_summarised_and_whole() -> None:
    worker = Worker(
        {
            ("GET", "/connectors/failing/status"): "status_failed",
            ("GET", "/connectors/failing/config"): ok({**body_of("config"), "name": "failing"}),
            ("GET", "/connectors/failing/offsets"): ok({"offsets": []}),
        }
    )
    with worker.client("failing") as client:
        status = client.status()
        position = client.position()
    assert (status.state, status.phase, status.running) == ("POLLING_TASKS", "failed", False)
    assert status.error is not None
    assert status.error.startswith(
        "task 0: io.debezium.DebeziumException: Creation of replication slot failed (caused by: "
        'org.postgresql.util.PSQLException: ERROR: could not access file "decoderbufs": No such file or directory)'
    )
    assert "restart(include_tasks=True, only_failed=True)" in status.error
    assert status.tasks[0].error == body_of("status_failed")["tasks"][0]["trace"]
    assert position.phase == "failed" and position.tasks[0].phase == "failed"


def test_a_connector_created_a_moment_ago_is_starting() -> None:
    """Connect answers "No status found" until a worker took the connector: not "unknown"."""
    worker = orders(get_status="backend_status_just_created", get_offsets=ok({"offsets": []}))
    with worker.client() as client:
        status = client.status()
    assert (status.state, status.phase, status.tasks) == ("STARTING_TASKS", "starting", ())


# -- errors --------------------------------------------------------------------------------------
def test_an_unknown_connector_names_the_fix() -> None:
    worker = Worker(
        {
            ("GET", "/connectors/nosuch/status"): "status_unknown",
            ("GET", "/connectors/nosuch/config"): "backend_config_unknown",
            ("GET", "/connectors/nosuch/offsets"): "backend_offsets_unknown",
            ("DELETE", "/connectors/nosuch"): "delete_unknown",
        }
    )
    with worker.client("nosuch") as client:
        with pytest.raises(ConnectorNotFoundError, match=r"create connector 'nosuch' \(create\(config\)\)"):
            client.status()
        with pytest.raises(ConnectorNotFoundError):
            client.offsets()
        with pytest.raises(ConnectorNotFoundError) as deleted:
            client.delete()
    assert deleted.value.status == 404 and not isinstance(deleted.value, RetriableError)


def test_an_unreachable_cluster_is_the_retriable_unavailable_error() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    client = ConnectorEngineClient(URL, "orders", transport=httpx.MockTransport(refused))
    with client, pytest.raises(ApiUnavailableError, match="check that the cluster is up") as caught:
        client.status()
    assert isinstance(caught.value, RetriableError) and caught.value.status == 0


def test_a_starting_worker_and_a_rebalance_are_retriable() -> None:
    # Built from Connect's words (a rebalance cannot be provoked on demand while recording).
    rebalance = ok({"error_code": 500, "message": "Request cannot be completed because a rebalance is expected"}, 500)
    for route in ("starting_connectors_404", rebalance):
        with orders(get_status=route).client() as client, pytest.raises(ApiUnavailableError):
            client.status()


def test_a_rejected_config_raises_config_error_with_connects_validation_messages() -> None:
    worker = Worker({("PUT", "/connector-plugins/PostgresConnector/config/validate"): "validate_missing_keys"})
    with worker.client() as client, pytest.raises(ConfigError) as rejected:
        client.create({"connector.class": "postgres", "name": "orders"})
    assert [p.key for p in rejected.value.problems] == [
        "database.hostname",
        "database.user",
        "database.dbname",
        "topic.prefix",
    ]
    assert rejected.value.problems[0].message == "The 'database.hostname' value is invalid: A value is required"
    assert [r.method for r in worker.sent] == ["PUT"]  # nothing created
    sent = json.loads(worker.sent[0].content)
    assert sent["connector.class"] == PG and sent["name"] == "orders"


def test_an_unknown_connector_class_is_a_config_error_on_connector_class() -> None:
    worker = Worker({("PUT", "/connector-plugins/NoSuchConnector/config/validate"): "validate_unknown_class"})
    with worker.client() as client, pytest.raises(ConfigError) as rejected:
        client.validate({"connector.class": "com.example.NoSuchConnector"})
    [problem] = rejected.value.problems
    assert problem.key == "connector.class" and "Failed to find any class" in problem.message


def test_a_name_taken_is_refused() -> None:
    worker = Worker(
        {
            ("PUT", "/connector-plugins/PostgresConnector/config/validate"): "validate_good",
            ("POST", "/connectors"): "create_exists",
        }
    )
    config = {k: v for k, v in recorded("create_created")["request"]["body"]["config"].items()}
    with worker.client() as client, pytest.raises(ApiRefusedError, match="already exists"):
        client.create(config)


def test_offsets_change_only_on_a_stopped_connector() -> None:
    worker = orders(patch_offsets="alter_offsets_running")
    with worker.client() as client, pytest.raises(ApiRefusedError, match=r"is RUNNING: stop it first \(stop\(\)\)"):
        client.alter_offsets([OffsetEntry({"server": "rec"}, {"lsn": 1})])
    assert [r.method for r in worker.sent] == ["GET"]  # refused before asking Connect to change anything
    # Connect's own refusal (the connector started again meanwhile) is the same error.
    raced = orders(get_status="status_stopped", patch_offsets="alter_offsets_running")
    with raced.client() as client, pytest.raises(ApiRefusedError, match="must be in the STOPPED state"):
        client.alter_offsets([{"partition": {"server": "rec"}, "offset": None}])
    assert json.loads(raced.sent[-1].content) == {"offsets": [{"partition": {"server": "rec"}, "offset": None}]}


def test_signals_are_refused_naming_the_channels_that_reach_debezium() -> None:
    with orders().client() as client, pytest.raises(SignalChannelError, match="channel='source'") as caught:
        client.signal("execute-snapshot", {"data-collections": ["public.orders"]})
    assert isinstance(caught.value, RefusedError)


# -- the rest of the surface -----------------------------------------------------------------------
def test_connector_shows_connects_answer_with_passwords_masked() -> None:
    info = body_of("backend_info")
    assert info["config"]["database.password"] == "unused"  # Connect shows it as given
    with orders(get_="backend_info").client() as client:
        shown = client.connector("orders")
    assert shown["config"]["database.password"] == "********"
    assert {k: v for k, v in shown["config"].items() if k != "database.password"} == {
        k: v for k, v in info["config"].items() if k != "database.password"
    }
    assert (shown["name"], shown["tasks"], shown["type"]) == ("orders", info["tasks"], "source")


def test_pause_resume_stop_restart_delete_send_connects_requests() -> None:
    worker = orders(put_pause="pause", put_resume="resume", put_stop="stop", post_restart="restart_tasks")
    worker.routes[("DELETE", "/connectors/orders")] = "delete"
    with worker.client() as client:
        changes = [client.pause(), client.resume(), client.stop(), client.restart(include_tasks=True)]
        assert client.delete() is None
    assert changes == [
        StateChange("orders", "PAUSED"),
        StateChange("orders", "RUNNING"),
        StateChange("orders", "STOPPED"),
        StateChange("orders", "RESTARTING"),
    ]
    assert [(r.method, r.url.path) for r in worker.sent][:3] == [
        ("PUT", "/connectors/orders/pause"),
        ("PUT", "/connectors/orders/resume"),
        ("PUT", "/connectors/orders/stop"),
    ]
    assert dict(worker.sent[3].url.params) == {"includeTasks": "true", "onlyFailed": "false"}


def test_create_from_an_engine_config_file_sends_debeziums_keys_only() -> None:
    worker = Worker(
        {
            ("PUT", "/connector-plugins/PostgresConnector/config/validate"): "validate_good",
            ("POST", "/connectors"): "create_created",
        }
    )
    config = load_config_file(ROOT / "docker" / "cdc" / "shop.yaml")
    with worker.client("shop", notification_topic="shop.notifications") as client:
        client.create(config)
    sent = json.loads(worker.sent[-1].content)
    assert sent["name"] == "shop"
    assert sent["config"] == {
        "connector.class": PG,
        "topic.prefix": "shop",
        "database.hostname": "postgres",
        "database.port": "5432",
        "database.user": "cdc",
        # A config provider's reference goes as it is: the Connect worker resolves it (its
        # EnvVarConfigProvider), as the engine service does.
        "database.password": "${env:CDC_PG_PASSWORD}",
        "database.dbname": "shop",
        "slot.name": "airflow_cdc_shop",
        "publication.name": "dbz_publication",
        "publication.autocreate.mode": "disabled",
        "table.include.list": "public.orders,public.customers",
        "signal.data.collection": "public.debezium_signal",
        "signal.enabled.channels": "source",
        "snapshot.mode": "no_data",
        "slot.drop.on.stop": "true",
        "notification.enabled.channels": "log,sink",
        "notification.sink.topic.name": "shop.notifications",
    }


def test_an_engine_config_of_another_name_is_refused_before_any_request() -> None:
    worker = Worker({})
    with worker.client("orders") as client, pytest.raises(ConfigError, match="'shop', the connector is 'orders'"):
        client.create(load_config_file(ROOT / "docker" / "cdc" / "shop.yaml"))
    assert worker.sent == []


def test_notifications_need_a_topic_and_the_kafka_cluster() -> None:
    with orders().client() as client, pytest.raises(ConfigError, match=r"add sink to its notification\.enabled"):
        client.notifications()
    with orders().client(notification_topic="n") as client, pytest.raises(ConfigError, match="bootstrap servers"):
        client.notifications()


def test_the_async_client_answers_the_same() -> None:
    async def ask() -> tuple[InstanceStatus, InstancePosition, list[OffsetEntry]]:
        async with orders().async_client() as client:
            return await client.status(), await client.position(format_lsn(26363504)), await client.offsets()

    with orders().client() as client:
        expected = (client.status(), client.position(format_lsn(26363504)), client.offsets())
    assert asyncio.run(ask()) == expected


def test_the_async_client_raises_the_same_errors() -> None:
    async def ask() -> None:
        async with orders(get_status="status_unknown", get_config="backend_config_unknown").async_client() as client:
            await client.status()

    with pytest.raises(ConnectorNotFoundError):
        asyncio.run(ask())


# -- notifications ---------------------------------------------------------------------------------
def notification_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((DATA / "notification_records.json").read_text())
    return records


def test_debeziums_sink_channel_records_read_as_the_engines_notifications() -> None:
    records = notification_records()
    notifications = [notification_of(r["value"].encode(), r["timestamp"]) for r in records]
    assert all(n is not None for n in notifications)
    ours = [n for n in notifications if n is not None and n.id == "snap-1"]
    assert [n.type for n in ours] == [
        "STARTED",
        "DATA_COLLECTIONS_RESOLVED",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
    ]
    scan = ours[3]
    assert scan.aggregate_type == "Incremental Snapshot" and scan.additional_data["total_rows_scanned"] == "2"
    assert scan.timestamp == str(json.loads(records[4]["value"])["timestamp"])  # the notification's own time
    # The sensor's rules (SnapshotWatch) judge them as the embedded instance's.
    watch = SnapshotWatch("snap-1", stall_timeout=60, tasks=1)
    watch.feed(NotificationPage("rec.notifications", "rec.notifications:0=6", tuple(n for n in notifications if n)))
    verdict = watch.verdict()
    assert (
        verdict is not None
        and verdict.succeeded
        and verdict.message == "snapshot snap-1 completed: public.orders 2 rows"
    )


def test_a_record_that_is_not_a_notification_is_skipped_and_schemas_are_unwrapped() -> None:
    value = json.loads(notification_records()[1]["value"])
    without_time = {k: v for k, v in value.items() if k != "timestamp"}
    wrapped = {"schema": {"type": "struct"}, "payload": without_time}
    notification = notification_of(json.dumps(wrapped).encode(), 1234)
    assert notification is not None and (notification.id, notification.timestamp) == ("snap-1", "1234")
    for junk in (b"", b"not json", b"[1]", json.dumps({"id": "x"}).encode(), None):
        assert notification_of(junk, 0) is None


def test_cursors_name_the_topic_and_the_next_offset_of_each_partition() -> None:
    assert str(Cursor("n", {1: 5, 0: 7})) == "n:0=7,1=5"
    assert Cursor.parse("n:0=7,1=5") == Cursor("n", {0: 7, 1: 5})
    assert Cursor.parse("n:") == Cursor("n", {})
    for garbage in ("run-1:15", "n", ":0=1", "n:0=x"):
        assert Cursor.parse(garbage) is None, garbage


def test_the_source_databases_position_gives_current_lag_and_caught_up() -> None:
    """Debezium reports no source position: given a reader of the source's, the answers carry
    it as the embedded instance's do (the offset sensor's "current")."""
    heads = [format_lsn(26363504), format_lsn(26363504 + 100)]
    with orders().client(source_position=lambda: heads.pop(0)) as client:
        level = client.position()
        behind = client.status().position
    [task] = level.tasks
    assert (task.current, task.lag, task.caught_up, level.caught_up) == (format_lsn(26363504), 0, True, True)
    assert behind is not None
    assert (behind.tasks[0].lag, behind.caught_up, behind.lag) == (100, False, 100)


def test_the_async_client_reads_the_source_position_in_a_thread() -> None:
    async def ask() -> InstancePosition:
        async with orders().async_client(source_position=lambda: format_lsn(26363504 + 8)) as client:
            return await client.position()

    position = asyncio.run(ask())
    assert (position.tasks[0].lag, position.caught_up) == (8, False)
