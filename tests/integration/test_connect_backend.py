"""The engine backend on a real Kafka Connect worker with Debezium's PostgreSQL connector
(issue 17): a connector created from an engine config, its status, positions and offsets, a
target position reached, an incremental snapshot's notifications from the sink channel's topic,
pause / resume / stop, a FAILED task's trace, Connect's validation messages; and one config
file that runs unchanged on the embedded engine and on Connect, both ending target == source."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
import yaml
from kafka import KafkaConsumer, TopicPartition

from airflow_cdc.engine.errors import ApiRefusedError, ApiUnavailableError, ConfigError, RefusedError
from airflow_cdc.engine.server.config_file import load_config_file
from airflow_cdc.engine.server.instance import EngineInstance
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.server.models import InstancePosition, InstanceStatus
from airflow_cdc.engine.sources.postgres.pgoutput import format_lsn, parse_lsn
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.kafka_connect.backend import AsyncConnectorEngineClient, ConnectorEngineClient
from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.postgres import PostgresServer
from tests.integration.pg_support import SIGNAL_TABLE, apply, create_load_table, image_diff, source_image

pytestmark = pytest.mark.integration

T = TypeVar("T")

#: A connector's first start takes a snapshot; the machine may be busy.
TIMEOUT = 120


def engine_config(
    pg: PostgresServer, database: str, name: str, prefix: str, broker: KafkaBroker, state: Path
) -> dict[str, Any]:
    """An instance config as docker/cdc/shop.yaml writes one (nested YAML, the embedded
    instance's own keys included), for this test's database and topics."""
    database_settings: dict[str, Any] = {"hostname": pg.host, "port": pg.port, "user": pg.user, "dbname": database}
    if pg.password:
        database_settings["password"] = pg.password
    return {
        "name": name,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": prefix,
        "database": database_settings,
        "plugin.name": "pgoutput",
        "slot.name": f"slot_{prefix}",
        "publication.name": f"pub_{prefix}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": f"public.t,public.{SIGNAL_TABLE}",
        "signal.data.collection": f"public.{SIGNAL_TABLE}",
        "snapshot.mode": "initial",
        "slot.drop.on.stop": True,
        "offset.flush.interval.ms": 200,
        "poll.interval.ms": 100,
        "state.dir": str(state),
        "sink": {"type": "kafka", "kafka": {"producer": {"bootstrap.servers": broker.bootstrap_servers}}},
    }


def prepare(pg: PostgresServer, database: str, rows: int = 20) -> str:
    dsn = pg.dsn(database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, rows)
        conn.execute(
            f"create table {SIGNAL_TABLE} (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))"
        )
    return dsn


def topic_events(broker: KafkaBroker, topic: str, start: int = 0) -> list[dict[str, Any]]:
    """Every record of ``topic`` (one partition) from offset ``start`` as ``{"key", "value"}``."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    try:
        if not consumer.partitions_for_topic(topic):
            consumer.topics()
            return []
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek(tp, start)
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                events += [
                    {"key": json.loads(m.key), "value": None if m.value is None else json.loads(m.value)} for m in batch
                ]
        return events
    finally:
        consumer.close()


def wait_target_equals_source(broker: KafkaBroker, topic: str, dsn: str, start: int = 0) -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        expected = source_image(conn)
    events: list[dict[str, Any]] = []

    def same() -> bool:
        events[:] = topic_events(broker, topic, start)
        return apply(events) == expected

    try:
        wait_until(same, TIMEOUT, "target equals source", interval=0.2)
    except TimeoutError:
        raise AssertionError(image_diff(expected, apply(events))) from None
    return events


@pytest.fixture
def backend(
    connect_worker: KafkaConnectWorker, kafka_broker: KafkaBroker, kafka_topic_prefix: str, connect: ConnectClient
) -> Iterator[ConnectorEngineClient]:
    """A backend client for connector ``<prefix>-pg`` (deleted afterwards by ``connect``)."""
    with ConnectorEngineClient(
        connect_worker.url,
        f"{kafka_topic_prefix}-pg",
        notification_topic=f"{kafka_topic_prefix}.notifications",
        bootstrap_servers=kafka_broker.bootstrap_servers,
    ) as client:
        yield client


def answer(question: Callable[[], T]) -> T | None:
    """The answer, or None while Connect is busy (a rebalance after a create): ask again, as
    the triggers do."""
    try:
        return question()
    except ApiUnavailableError:
        return None


def wait_status(client: ConnectorEngineClient, wanted: Callable[[InstanceStatus], Any], what: str) -> InstanceStatus:
    def look() -> InstanceStatus | None:
        status = answer(client.status)
        return status if status is not None and wanted(status) else None

    status = wait_until(look, TIMEOUT, what, interval=0.2)
    assert status is not None
    return status


def wait_phase(client: ConnectorEngineClient, phase: str) -> InstanceStatus:
    def streaming(status: InstanceStatus) -> bool:
        assert status.error is None, status.error
        return status.phase == phase

    return wait_status(client, streaming, f"phase {phase}")


def event_shape(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Each value key and its JSON type."""
    return {(k, type(v).__name__) for e in events if e["value"] for k, v in e["value"].items()}


def test_a_connector_from_an_engine_config_streams_reports_positions_and_reaches_a_target(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_database: str,
    kafka_broker: KafkaBroker,
    kafka_topic_prefix: str,
    backend: ConnectorEngineClient,
) -> None:
    dsn = prepare(pg_server, pg_database)
    config = engine_config(pg_server, pg_database, backend.name, kafka_topic_prefix, kafka_broker, tmp_path / "state")
    created = backend.create(config)
    assert created["config"]["notification.sink.topic.name"] == f"{kafka_topic_prefix}.notifications"
    assert "state.dir" not in created["config"] and "offset.flush.interval.ms" not in created["config"]

    status = wait_phase(backend, "streaming")
    assert (status.name, status.state, status.connector_class) == (
        backend.name,
        "POLLING_TASKS",
        "io.debezium.connector.postgresql.PostgresConnector",
    )
    assert [t.id for t in status.tasks] == [f"{backend.name}-0"] and status.running
    wait_target_equals_source(kafka_broker, f"{kafka_topic_prefix}.public.t", dsn)

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into t values (1001, 'new', 1)")
        conn.execute("update t set n = -1 where id = 2")
        conn.execute("delete from t where id = 3")
    events = wait_target_equals_source(kafka_broker, f"{kafka_topic_prefix}.public.t", dsn)
    # Debezium's offsets stop at the last change (they move past it only with the next change, or
    # a heartbeat.action.query's): the target is the last change's position, as its event says.
    head = format_lsn(events[-2]["value"]["source"]["lsn"])  # the delete; its tombstone follows

    def committed() -> InstancePosition | None:
        position = answer(lambda: backend.position(head))
        return position if position is not None and position.reached else None

    reached = wait_until(committed, TIMEOUT, f"position {head} committed", 0.2)
    assert reached is not None
    assert reached.target == head and reached.phase == "streaming"
    [task] = reached.tasks
    assert (task.task, task.partition, task.reached) == (f"{backend.name}-0", {"server": kafka_topic_prefix}, True)
    assert parse_lsn(str(task.committed)) >= parse_lsn(head)
    # Debezium does not report its source's head: degraded, not guessed.
    assert (task.current, task.lag, task.caught_up, reached.caught_up) == (None, None, None, None)
    assert backend.position("FFFF/0").reached is False

    [entry] = backend.offsets()
    assert entry.partition == {"server": kafka_topic_prefix} and int(str(entry.offset["lsn"])) >= parse_lsn(head)
    shown = backend.connector(backend.name)
    assert shown["name"] == backend.name and shown["config"]["slot.name"] == f"slot_{kafka_topic_prefix}"
    assert backend.health() == "UP"


def test_an_incremental_snapshot_signalled_through_the_table_is_followed_by_its_notifications(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_database: str,
    kafka_broker: KafkaBroker,
    kafka_topic_prefix: str,
    backend: ConnectorEngineClient,
    connect_worker: KafkaConnectWorker,
) -> None:
    dsn = prepare(pg_server, pg_database, rows=50)
    config = engine_config(pg_server, pg_database, backend.name, kafka_topic_prefix, kafka_broker, tmp_path / "state")
    backend.create({**config, "snapshot.mode": "no_data"})
    wait_phase(backend, "streaming")
    end_cursor = backend.notifications().cursor  # nothing yet: the topic's start
    signal_id = f"snap-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"insert into {SIGNAL_TABLE} values (%s, 'execute-snapshot', %s)",
            (signal_id, json.dumps({"data-collections": ["public.t"], "type": "incremental"})),
        )
    seen: list[Any] = []

    def completed() -> bool:
        nonlocal end_cursor
        page = backend.notifications(end_cursor, limit=3)
        end_cursor = page.cursor
        seen.extend(page.notifications)
        return any(n.id == signal_id and n.type == "COMPLETED" for n in seen)

    wait_until(completed, TIMEOUT, "the snapshot's COMPLETED notification", interval=0.2)
    ours = [n for n in seen if n.id == signal_id]
    assert {n.aggregate_type for n in ours} == {"Incremental Snapshot"}
    kinds = [n.type for n in ours]
    assert kinds[0] == "STARTED" and kinds[-1] == "COMPLETED" and "TABLE_SCAN_COMPLETED" in kinds
    [scan] = [n for n in ours if n.type == "TABLE_SCAN_COMPLETED"]
    assert scan.additional_data["status"] == "SUCCEEDED" and scan.additional_data["total_rows_scanned"] == "50"
    assert all(n.timestamp.isdigit() for n in ours)

    # Read again from the start, in one page and through the async client: the same notifications.
    async def every_page() -> Any:
        async with AsyncConnectorEngineClient(
            connect_worker.url, backend.name, bootstrap_servers=kafka_broker.bootstrap_servers
        ) as client:  # the topic from the connector's config
            return await client.notifications()

    import asyncio

    page = asyncio.run(every_page())
    assert [n.id for n in page.notifications if n.id == signal_id] == [n.id for n in ours]
    assert page.run_id == f"{kafka_topic_prefix}.notifications" and not page.reset
    assert backend.notifications(page.cursor).notifications == ()
    assert backend.notifications("another-topic:0=5").reset


def test_pause_resume_stop_and_offsets_only_while_stopped(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_database: str,
    kafka_broker: KafkaBroker,
    kafka_topic_prefix: str,
    backend: ConnectorEngineClient,
) -> None:
    prepare(pg_server, pg_database, rows=5)
    config = engine_config(pg_server, pg_database, backend.name, kafka_topic_prefix, kafka_broker, tmp_path / "state")
    backend.create(config)
    wait_phase(backend, "streaming")
    assert backend.pause().state == "PAUSED"
    paused = wait_status(backend, lambda s: s.paused, "paused")
    assert paused.state == "POLLING_TASKS" and all(t.paused for t in paused.tasks)
    with pytest.raises(ApiRefusedError, match="stop it first"):
        backend.reset_offsets()
    assert backend.resume().state == "RUNNING"
    wait_status(backend, lambda s: not s.paused, "resumed")

    assert backend.stop().state == "STOPPED"
    stopped = wait_status(backend, lambda s: s.state == "STOPPED", "stopped")
    assert stopped.phase == "stopped" and not stopped.running
    with pytest.raises(ApiUnavailableError, match="STOPPED"):
        backend.health()  # as an embedded instance that stopped: CdcStopEngineOperator's wait ends
    assert "reset" in backend.reset_offsets().lower()
    wait_until(lambda: backend.offsets() == [], TIMEOUT, "offsets reset", 0.2)
    assert backend.restart(include_tasks=True, only_failed=False).state == "RESTARTING"
    backend.delete()
    with pytest.raises(Exception, match="create connector"):
        backend.status()


def test_a_failed_task_shows_its_trace_and_a_rejected_config_connects_validation_messages(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_database: str,
    kafka_broker: KafkaBroker,
    kafka_topic_prefix: str,
    backend: ConnectorEngineClient,
) -> None:
    prepare(pg_server, pg_database, rows=1)
    config = engine_config(pg_server, pg_database, backend.name, kafka_topic_prefix, kafka_broker, tmp_path / "state")
    with pytest.raises(ConfigError) as rejected:
        backend.create({**config, "database": {**config["database"], "port": 1}})
    [problem] = rejected.value.problems
    assert problem.key == "database.hostname" and "Connection to" in problem.message and "refused" in problem.message
    with pytest.raises(ConfigError) as unknown:
        backend.validate({**config, "connector.class": "com.example.NoSuchConnector"})
    assert [p.key for p in unknown.value.problems] == ["connector.class"]

    # Valid to Connect and to Debezium's validation; fails at run time: no such output plugin.
    backend.create({**config, "plugin.name": "decoderbufs"})
    failed = wait_status(backend, lambda s: s.error, "the task FAILED")
    assert failed.phase == "failed" and not failed.running
    assert "task 0: io.debezium" in str(failed.error) and 'could not access file "decoderbufs"' in str(failed.error)
    assert "only_failed=True" in str(failed.error)
    assert "PostgresConnectorTask" in str(failed.tasks[0].error)  # the whole trace
    assert backend.position().phase == "failed"
    with pytest.raises(RefusedError, match="channel='source'"):
        backend.signal("execute-snapshot", {"data-collections": ["public.t"]})


def test_one_config_file_runs_unchanged_on_the_embedded_engine_and_on_connect(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_database: str,
    kafka_broker: KafkaBroker,
    kafka_topic_prefix: str,
    backend: ConnectorEngineClient,
) -> None:
    dsn = prepare(pg_server, pg_database, rows=30)
    path = tmp_path / "shop.yaml"
    path.write_text(
        yaml.safe_dump(
            engine_config(pg_server, pg_database, backend.name, kafka_topic_prefix, kafka_broker, tmp_path / "state")
        )
    )
    topic = f"{kafka_topic_prefix}.public.t"

    instance = EngineInstance({**load_config_file(path), "api.token": "t0k"})
    thread = threading.Thread(target=instance.run)
    thread.start()
    try:
        wait_until(lambda: (read_status(instance.directory) or {}).get("state") == "POLLING_TASKS", TIMEOUT, "polling")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("insert into t values (101, 'embedded', 1)")
            conn.execute("delete from t where id = 1")
        embedded = wait_target_equals_source(kafka_broker, topic, dsn)
    finally:
        instance.request_stop()
        thread.join(60)
    assert not thread.is_alive()

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into t values (102, 'between', 2)")  # not captured by either: the slot was dropped
    backend.create(load_config_file(path))
    wait_phase(backend, "streaming")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("update t set v = 'connect' where id = 2")
        conn.execute("delete from t where id = 4")
    on_connect = wait_target_equals_source(kafka_broker, topic, dsn, start=len(embedded))
    # Both started with a snapshot of the table, then streamed; the events have one shape.
    for events in (embedded, on_connect):
        first = events[0]["value"]
        assert first["op"] == "r" and first["source"]["name"] == kafka_topic_prefix and first["source"]["table"] == "t"
    assert {e["value"]["op"] for e in on_connect if e["value"]} == {"r", "u", "d"}
    assert event_shape(embedded) == event_shape(on_connect)
