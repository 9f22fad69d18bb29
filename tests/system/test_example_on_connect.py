"""``dags/example_cdc_pipeline.py`` unchanged on the distributed engines (issue 17): capture by
Debezium's PostgreSQL connector on the Kafka Connect worker, transport by the Kafka broker, the
apply job on a Spark standalone master - only the connections differ from
``test_example_dags.py``'s run on the embedded engine. The DAG starts the connector from the
same kind of engine config file, snapshots through the signal table (Debezium has no API
channel), waits for Debezium's notifications and its committed offsets, and applies with
Spark's Kafka source on the cluster: the replica equals the source row by row."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_cdc.kafka_connect import ConnectClient
from tests.system.conftest import PASSWORD, WITH_SCHEMAS, connect_source, local_spark
from tests.system.support import Source, drop_topics, load_dag, task_states, xcom

pytestmark = pytest.mark.integration


@pytest.fixture
def connector(
    tmp_path: Path,
    source: Source,
    replica: Source,
    airflow_db: str,
    connect_worker: Any,
    kafka_broker: Any,
    spark_cluster: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, Any]]:
    """Connection ``cdc_shop`` of type ``kafka_connect`` with an engine config file, ``spark_cdc``
    at the standalone master; the connector, its slot and the job's checkpoint gone afterwards."""
    name = f"shop-connect-{source.database[-8:]}"
    slot = f"slot_connect_{source.database}"
    source.execute("create table cdc_heartbeat (id int primary key, at timestamptz)")
    source.execute("insert into cdc_heartbeat values (1, now())")
    config = {
        "name": name,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "topic.prefix": "shop",
        "slot.name": slot,
        "publication.name": f"pub_connect_{source.database}",
        "table.include.list": "public.orders,public.customers",
        "signal.data.collection": "public.debezium_signal",
        "snapshot.mode": "no_data",
        "incremental.snapshot.chunk.size": 100,
        # Debezium's offsets pass the server's position only with a later change: the
        # heartbeat's statement makes one on a quiet database (the offset sensor's "current").
        "heartbeat.interval.ms": 1000,
        "heartbeat.action.query": "update cdc_heartbeat set at = now() where id = 1",
        "notification.sink.topic.name": f"shop.notifications.{source.database[-8:]}",
        **WITH_SCHEMAS,
    }
    path = tmp_path / "shop-connect.yaml"
    path.write_text(yaml.safe_dump(config))
    connect_source(monkeypatch, source)
    local_spark(monkeypatch, spark_cluster.master_url)
    # The executors connect back to the driver (the task) on loopback.
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_SHOP",
        json.dumps(
            {
                "conn_type": "kafka_connect",
                "host": connect_worker.url,
                "extra": {
                    "config_path": str(path),
                    "bootstrap_servers": kafka_broker.bootstrap_servers,
                    "source_conn_id": "pg_shop",
                },
            }
        ),
    )
    checkpoint = Path(airflow_db) / "cdc" / "checkpoints" / "example_cdc_pipeline.apply_changes"
    shutil.rmtree(checkpoint, ignore_errors=True)
    drop_topics(kafka_broker, "shop")  # another test's connector may have written shop.* before
    client = ConnectClient(connect_worker.url)
    try:
        yield config
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
        with contextlib.suppress(Exception):  # never created: the test failed before
            client.delete(name)
        client.close()
        # Its slot goes with the test's database (pg_database drops both).


def without_position(rows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {key: {k: v for k, v in row.items() if k != "_cdc_position"} for key, row in rows.items()}


def test_the_example_pipeline_runs_unchanged_on_kafka_connect_and_a_spark_cluster(
    connector: dict[str, Any],
    source: Source,
    replica: Source,
    connect_worker: Any,
    capfd: pytest.CaptureFixture[str],
) -> None:
    run = load_dag("example_cdc_pipeline").test()

    states = task_states(run)
    assert set(states.values()) == {"success"}, (states, connect_worker.log(80))
    started = xcom(run, "start_engine")
    assert started["name"] == connector["name"] and started["started"] is True and started["phase"] == "streaming"

    signal_id = xcom(run, "snapshot")
    done = xcom(run, "snapshot_done")
    assert done["signal_id"] == signal_id
    assert done["rows"]["public.customers"] == 50 and done["rows"]["public.orders"] == 2000
    # The signal went into the signal table (Debezium has no API channel).
    with source.connect() as conn:
        row = conn.execute("select count(*) from debezium_signal where id = %s", (signal_id,)).fetchone()
    assert row == (1,)

    caught_up = xcom(run, "caught_up")
    [position] = caught_up["positions"]
    assert position["partition"] == {"server": "shop"} and position["target"]

    applied = xcom(run, "apply_changes")
    assert applied["records"] >= 2050 and applied["batches"] >= 1
    assert without_position(replica.rows("orders")) == source.rows("orders")
    assert without_position(replica.rows("customers")) == source.rows("customers")
    assert PASSWORD not in json.dumps([started, done, caught_up, applied, capfd.readouterr()], default=str)

    # A schema change on the source: Debezium's events carry the new schema (JSON converter
    # schemas), and the next apply adds the column to the replica the job created, with the
    # default the source's existing rows got.
    source.execute(
        "alter table orders add column note text not null default 'none'",
        "update orders set note = 'noted' where id % 40 = 0",
        "insert into orders (id, status, updated_at) values (9001, 'late', now())",
    )
    again = load_dag("example_cdc_pipeline").partial_subset(["caught_up", "apply_changes"], include_upstream=False)
    rerun = again.test()
    assert set(task_states(rerun).values()) == {"success"}, connect_worker.log(80)
    assert without_position(replica.rows("orders")) == source.rows("orders")
