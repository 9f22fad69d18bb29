"""PostgreSQL incremental snapshots: Debezium's connector and our engine both execute the same
``execute-snapshot`` signal (one row in the signal table both watch) over the same table; their
``op=r`` events, and everything else they emit around it, must be the same (ADR 0009).

Run twice: with the JSON converter's schemas disabled, and enabled with every column's source
type (``column.propagate.source.type=.*``), comparing the schemas whole as
test_postgres_schemas_oracle.py does.

Nothing writes to the table meanwhile: which rows a window drops under concurrent writes depends
on timing on each side (DBLog), so that is checked by the target-equals-source tests instead.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.kafka_connect import ConnectClient
from tests.compat.oracle import Variant, compare, read_topics, summary
from tests.compat.test_postgres_oracle import DUMP_ENV_VAR, common_config, dump
from tests.compat.test_postgres_schemas_oracle import SCHEMAS_ON, _split_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROWS = 1500
SCHEMA = f"""
create table debezium_signal (id varchar(42) primary key, type varchar(32) not null, data varchar(2048));
create table inc (id int primary key, v text, n numeric(10,2), ts timestamptz, big text);
insert into inc select g, 'v' || g, g / 7.0, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute',
    case when g % 100 = 0 then repeat('x', 3000) end
  from generate_series(1, {ROWS}) g;
create table other (id int primary key, v text);
insert into other values (1, 'not snapshotted');
create table oracle_marker (id int primary key);
create publication oracle_publication for all tables;
"""


def _count(bootstrap: str, prefix: str, topic: str, op: str | None = None) -> int:
    events = read_topics(bootstrap, prefix).get(topic, [])
    return sum(1 for e in events if op is None or e.op == op)


#: The converters' settings of each run, both sides.
CONVERTERS = {"json": {}, "schemas": {**SCHEMAS_ON, "column.propagate.source.type": ".*"}}


@pytest.fixture(params=list(CONVERTERS))
def captured(
    request: pytest.FixtureRequest, pg_server: Any, kafka_broker: Any, connect_worker: Any
) -> Iterator[tuple[dict, dict]]:
    database = pg_server.create_database()
    run = uuid.uuid4().hex[:6]
    theirs, ours = f"dbzinc_{run}", f"oursinc_{run}"
    bootstrap = kafka_broker.bootstrap_servers
    extra = {
        "snapshot.mode": "no_data",
        "signal.data.collection": "public.debezium_signal",
        "incremental.snapshot.chunk.size": 500,
        **CONVERTERS[request.param],
    }
    client = ConnectClient(connect_worker.url)
    sink = KafkaSink({"sink.kafka.producer.bootstrap.servers": bootstrap})
    runner = None
    try:
        with pg_server.connect(database) as conn:
            conn.execute(SCHEMA)
        config = {**common_config(pg_server, database, Variant("incremental"), theirs), **extra}
        converter = {
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        }
        replace = {"value.converter.replace.null.with.default": "false", "tasks.max": 1}
        client.create(theirs, {**converter, **config, **replace})
        ours_config = {**common_config(pg_server, database, Variant("incremental"), ours), **extra}
        runner = EngineRunner(
            Engine(
                {**ours_config, "name": ours, "offset.storage": "memory"},
                batch_handler=sink,
                serializer=JsonSerializer.from_config(ours_config),
            )
        )
        sink.__enter__()
        runner.__enter__()
        client.wait_running(theirs, timeout=120)
        with pg_server.connect(database) as conn:  # both stream once both have seen this
            conn.execute("insert into oracle_marker values (1)")
        for prefix in (theirs, ours):
            wait_until(lambda p=prefix: _count(bootstrap, p, "public.oracle_marker"), 120, f"{prefix} streaming")
        signal = {"data-collections": ["public.inc"], "type": "incremental"}
        with pg_server.connect(database) as conn:
            conn.execute(
                "insert into debezium_signal values (%s, 'execute-snapshot', %s)", ("inc-1", json.dumps(signal))
            )
        for prefix in (theirs, ours):
            wait_until(lambda p=prefix: _count(bootstrap, p, "public.inc", "r") >= ROWS, 180, f"{prefix}'s snapshot")
        with pg_server.connect(database) as conn:
            conn.execute("insert into oracle_marker values (2)")
        for prefix in (theirs, ours):
            wait_until(lambda p=prefix: _count(bootstrap, p, "public.oracle_marker") >= 2, 120, f"{prefix} caught up")
        wait_until(lambda: sink.metrics()["in_flight"] == 0, 60, "our sink acknowledged")
        result = read_topics(bootstrap, theirs), read_topics(bootstrap, ours)
        if request.param == "schemas":
            result = _split_all(result[0], theirs), _split_all(result[1], ours)
        if os.environ.get(DUMP_ENV_VAR):
            dump({"incremental": result}, os.environ[DUMP_ENV_VAR])
        yield result
    finally:
        if runner is not None:
            runner.__exit__(None, None, None)
        sink.__exit__(None, None, None)
        if theirs in client.connectors():
            client.delete(theirs)
        client.close()
        pg_server.drop_database(database)


def test_incremental_snapshot_events_as_debezium(captured: tuple[dict, dict]) -> None:
    theirs, ours = captured
    assert sum(1 for e in theirs["public.inc"] if e.op == "r") == ROWS
    problems = compare(theirs, ours)
    assert not problems, summary(problems)
