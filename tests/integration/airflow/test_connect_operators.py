"""The operators on a ``kafka_connect`` connection, against the real Connect worker with
Debezium's PostgreSQL connector (ADR 0017): start creates the connector and is idempotent, a
different configuration is refused naming the keys, the snapshot control signals go into the
signal table, stop leaves it STOPPED, the offsets operator seeks and resets through Connect's
offsets API (refused while it runs), and the source's password reaches Connect only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from kafka import KafkaConsumer

from airflow_cdc.engine.sources.postgres.pgoutput import format_lsn, parse_lsn
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.kafka_connect import ConnectClient
from airflow_cdc.local.ports import free_port
from airflow_cdc.operators.engine import CdcStartEngineOperator, CdcStopEngineOperator
from airflow_cdc.operators.offsets import CdcOffsetsOperator
from airflow_cdc.operators.snapshot import CdcSnapshotControlOperator, CdcSnapshotOperator
from airflow_cdc.sensors.snapshot import CdcSnapshotSensor
from airflow_cdc.triggers.offset import CdcConsumerLagTrigger
from tests.integration.airflow.conftest import CDC_CONN, PASSWORD, PG_CONN, Source, write_config
from tests.integration.airflow.support import task_context

pytestmark = pytest.mark.integration


@pytest.fixture
def connector(
    tmp_path: Path, source: Source, connect_worker: Any, kafka_broker: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """``cdc_test``: a kafka_connect connection whose config file names a connector; ``pg_test``
    the source with its password. The connector and its slot are gone afterwards."""
    name = f"connect-{source.database[-8:]}"
    slot = f"slot_c_{source.database}"
    config = tmp_path / "shop.yaml"
    write_config(
        config,
        {
            "name": name,
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "topic.prefix": f"ops{source.database[-8:]}",
            "slot.name": slot,
            "publication.name": f"pub_c_{source.database}",
            "table.include.list": "public.orders",
            "signal.data.collection": "public.debezium_signal",
            "snapshot.mode": "no_data",
            "state.dir": str(tmp_path / "state"),  # the embedded instance's: left out on Connect
        },
    )
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CDC_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "kafka_connect",
                "host": connect_worker.url,
                "extra": {
                    "config_path": str(config),
                    "bootstrap_servers": kafka_broker.bootstrap_servers,
                    "source_conn_id": PG_CONN,
                },
            }
        ),
    )
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{PG_CONN.upper()}",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": source.server.host,
                "port": source.server.port,
                "login": source.user,
                "password": source.password,
                "schema": source.database,
            }
        ),
    )
    client = ConnectClient(connect_worker.url)
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            client.delete(name)
        client.close()  # its slot goes with the test's database (pg_database drops both)


def read_and_commit(bootstrap: str, topic: str, group: str) -> int:
    """Read the topic to its end as ``group`` and commit (not the notification topic, which
    the lag leaves out and a pattern subscription would read first)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        read = sum(1 for _ in consumer)
        consumer.commit()
        return read
    finally:
        consumer.close()


def start(**kwargs: Any) -> CdcStartEngineOperator:
    return CdcStartEngineOperator(task_id="start", cdc_conn_id=CDC_CONN, source_conn_id=PG_CONN, timeout=120, **kwargs)


def test_start_stop_and_offsets_drive_the_connector(
    connector: str, source: Source, connect_worker: Any, kafka_broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    first = start().execute(task_context())
    assert (first["name"], first["started"], first["phase"]) == (connector, True, "streaming")
    again = start().execute(task_context())
    assert again["started"] is False  # the same configuration: left alone

    with ConnectClient(connect_worker.url) as client:
        config = client.config(connector)
    assert config["database.password"] == source.password  # Connect keeps it: the connector needs it
    assert "state.dir" not in config and config["notification.enabled.channels"] == "log,sink"
    assert PASSWORD not in json.dumps([first, again]) + caplog.text

    with pytest.raises(AirflowFailException) as refused:
        start(config={"table.include.list": "public.customers"}).execute(task_context())
    assert "table.include.list: running 'public.orders', asked 'public.customers'" in str(refused.value)

    with pytest.raises(AirflowFailException, match=r"is RUNNING.*CdcStopEngineOperator first"):
        CdcOffsetsOperator(task_id="o", cdc_conn_id=CDC_CONN, action="reset").execute(task_context())

    # A committed offset to seek back from: a change, and Connect's flush.
    source.connect().execute("insert into orders values (100, 'new', date '2026-02-01')")
    with ConnectClient(connect_worker.url) as client:
        wait_until(lambda: client.offsets(connector), 60, "a committed offset")

    # The consumer-lag trigger finds the connector's topics on the connection's Kafka.
    group = f"group-{connector}"

    def look() -> Any:
        lag = CdcConsumerLagTrigger(CDC_CONN, group, max_lag=0)

        async def once() -> Any:
            try:
                return await lag.poll()
            finally:
                await lag.cleanup()

        return asyncio.run(once())

    assert look() is None  # the group has read nothing: the change is its lag
    assert read_and_commit(kafka_broker.bootstrap_servers, f"{config['topic.prefix']}.public.orders", group) == 1
    caught_up = look()
    assert caught_up is not None and caught_up["status"] == "success" and caught_up["lag"]["total"] == 0

    stopped = CdcStopEngineOperator(task_id="stop", cdc_conn_id=CDC_CONN, timeout=60).execute(task_context())
    assert (stopped["name"], stopped["stopped"], stopped["state"]) == (connector, True, "STOPPED")
    with ConnectClient(connect_worker.url) as client:
        assert client.status(connector).state == "STOPPED"
        [entry] = client.offsets(connector)
    committed = int(entry["offset"]["lsn"])

    sought = CdcOffsetsOperator(
        task_id="seek", cdc_conn_id=CDC_CONN, action="seek", position=format_lsn(committed - 8)
    ).execute(task_context())
    assert sought["partition"] == entry["partition"] and sought["position"] == format_lsn(committed - 8)
    with ConnectClient(connect_worker.url) as client:
        [moved] = client.offsets(connector)
    assert parse_lsn(format_lsn(int(moved["offset"]["lsn"]))) == committed - 8

    reset = CdcOffsetsOperator(task_id="reset", cdc_conn_id=CDC_CONN, action="reset").execute(task_context())
    assert reset["action"] == "reset"
    with ConnectClient(connect_worker.url) as client:
        assert client.offsets(connector) == []


def test_connect_side_failures_fail_the_task_with_connects_words_and_the_fix(
    connector: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A configuration Connect's validation rejects: its messages, per key.
    with pytest.raises(AirflowFailException) as rejected:
        start(config={"slot.name": "Not A Valid Slot!"}).execute(task_context())
    assert "invalid configuration" in str(rejected.value) and "slot.name" in str(rejected.value)

    # Valid to Connect; its task fails at run time (no such output plugin): the trace's summary.
    with pytest.raises(AirflowFailException) as failed:
        start(config={"plugin.name": "decoderbufs"}).execute(task_context())
    message = str(failed.value)
    assert f"instance {connector!r} failed" in message and 'could not access file "decoderbufs"' in message
    assert "only_failed=True" in message  # the fix: restart the failed tasks once mended

    # Nothing answers at the connection's host: retriable, naming Kafka Connect and the host.
    settings = json.loads(os.environ[f"AIRFLOW_CONN_{CDC_CONN.upper()}"])
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CDC_CONN.upper()}", json.dumps({**settings, "host": f"http://127.0.0.1:{free_port()}"})
    )
    with pytest.raises(AirflowException) as unreachable:
        start().execute(task_context())
    assert not isinstance(unreachable.value, AirflowFailException)
    assert "Kafka Connect" in str(unreachable.value) and "reachable" in str(unreachable.value)


def test_the_snapshot_operators_drive_debeziums_incremental_snapshot(
    connector: str, source: Source, connect_worker: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Signals go into the signal table (Debezium has no API channel); pause and resume are
    acted on as Debezium's notifications say, and the snapshot then completes."""
    with source.connect() as conn:
        conn.execute("insert into orders select g, 'bulk', date '2026-03-01' from generate_series(1001, 21000) g")
    start(config={"incremental.snapshot.chunk.size": 20}).execute(task_context())
    signal_id = CdcSnapshotOperator(task_id="snap", cdc_conn_id=CDC_CONN, tables=["public.orders"]).execute(
        task_context()
    )
    with source.connect() as conn:
        row = conn.execute("select type from debezium_signal where id = %s", (signal_id,)).fetchone()
    assert row == ("execute-snapshot",)
    for action in ("pause", "resume"):
        CdcSnapshotControlOperator(task_id=action, cdc_conn_id=CDC_CONN, action=action).execute(task_context())
    logged = capfd.readouterr().out
    assert "acted on signal" in logged and ": PAUSED" in logged and ": RESUMED" in logged

    sensor = CdcSnapshotSensor(task_id="done", cdc_conn_id=CDC_CONN, signal_id=signal_id, deferrable=False)
    wait_until(lambda: sensor.poke(task_context()), 180, "the snapshot completed")


def test_the_health_check_reads_a_connectors_figures_and_fails_past_a_threshold(connector: str, source: Source) -> None:
    """The same figures as on the engine (ADR 0028): the slot's retained WAL asked of the source
    over the connection's ``source_conn_id``, the age of the newest committed event from Connect's
    offsets (Debezium's ``ts_usec``); past a threshold the task fails with the reason and the fix."""
    from airflow_cdc.operators.health import CdcHealthCheckOperator

    start().execute(task_context())
    source.connect().execute("insert into orders values (101, 'new', date '2026-02-01')")
    loose = CdcHealthCheckOperator(
        task_id="health", cdc_conn_id=CDC_CONN, max_retained_wal_bytes=2 * 1024**3, max_seconds_since_last_event=3600
    )

    def streamed() -> dict[str, Any] | None:
        # Debezium's offset after its (no_data) snapshot still says "snapshot", for which no lag is
        # computed: the insert's offset, committed at Connect's next flush, is the one to wait for.
        figures = loose.execute(task_context())
        return figures if figures["idle_s"] is not None and figures["lag"] is not None else None

    figures = wait_until(streamed, 60, "a streamed event's offset", interval=0.5)
    assert figures["retained_bytes"] is not None and figures["retained_bytes"] >= 0, figures
    assert figures["lag_unit"], figures  # the lag is against the source's position
    assert 0 <= figures["idle_s"] < 600, figures

    wait_until(lambda: loose.execute(task_context())["idle_s"] > 1, 30, "the last event a second old")
    strict = CdcHealthCheckOperator(task_id="health", cdc_conn_id=CDC_CONN, max_seconds_since_last_event=1)
    with pytest.raises(AirflowFailException, match=r"the last committed event is [0-9,]+ s old, past the threshold"):
        strict.execute(task_context())
