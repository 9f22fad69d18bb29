"""A Kafka sink that replaces its producer while the broker is away retries on its own, and the
instance says so (RETRYING, "kafka sink recovery: cannot connect to Kafka ..."), then RUNNING
once the broker is back - and the target still equals the source, row by row."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from airflow_cdc.engine.server.status import instance_health
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.pg_support import WriteLoad, create_load_table, source_image
from tests.integration.test_kafka_sink import assert_target_equals_source, kafka_engine

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_kafka_sink_recovering_from_a_broker_away_shows_as_retrying(
    pg_server: Any, pg_database: str, restartable_kafka_broker: Any, topic_prefix: str
) -> None:
    broker = restartable_kafka_broker
    dsn = pg_server.dsn(pg_database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_load_table(conn, 200)
    # Records time out quickly, so the producer gives up and the sink starts replacing it.
    timeouts = {"delivery.timeout.ms": 3000, "request.timeout.ms": 1000, "linger.ms": 5}
    engine, sink = kafka_engine(
        pg_server, pg_database, broker.bootstrap_servers, topic_prefix, "kafka-python", **timeouts
    )
    with sink, EngineRunner(engine):
        # Paced: the broker's stop and start can take minutes on a loaded machine, and an
        # unpaced load reaches its cap (200k transactions) in about 100 s, after which the
        # writes "after the broker is back" never come.
        with WriteLoad(dsn, 201, seed=7, per_second=500) as load:
            wait_until(lambda: sink.metrics()["delivered"] > 200, 60, "the snapshot delivered")
            assert instance_health(engine, sink, None).health == "RUNNING"
            broker.stop()
            health = wait_until(
                lambda: (now := instance_health(engine, sink, None)).health == "RETRYING" and now,
                90,
                "RETRYING while the broker is away",
            )
            assert health.cause is not None and health.cause.startswith("kafka sink recovery: "), health
            assert "Kafka" in health.cause, health
            retry = sink.retrying.current()
            assert retry is not None and retry.what == "recovery" and retry.attempt is not None, retry
            assert engine.error is None and engine.state.value == "POLLING_TASKS"
            broker.start()
            wait_until(lambda: instance_health(engine, sink, None).health == "RUNNING", 90, "RUNNING again")
            back_at = load.transactions
            wait_until(lambda: load.transactions >= back_at + 100, 30, "writes after the broker is back")
        assert sink.retrying.current() is None and sink.recoveries >= 1
        with psycopg.connect(dsn) as conn:
            expected = source_image(conn)
        assert_target_equals_source(broker.bootstrap_servers, f"{topic_prefix}.public.t", expected, 120)
        assert engine.error is None
