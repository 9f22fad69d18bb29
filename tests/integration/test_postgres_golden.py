"""Every operation and every type round-trips into the expected Debezium envelope.

The expected envelopes live in ``golden/``; volatile fields (timestamps, LSNs, transaction ids)
are blanked before comparing. Regenerate with ``CDC_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .pg_support import engine_config
from .test_postgres_source import Collector

GOLDEN = Path(__file__).with_name("golden")
VOLATILE_SOURCE = ("ts_ms", "ts_us", "ts_ns", "lsn", "txId", "sequence", "version", "db")

SCHEMA = """
create type mood as enum ('sad', 'happy');
create domain positive as int check (value > 0);
create table all_types (
    id int primary key,
    c_int2 smallint, c_int4 int, c_int8 bigint, c_num numeric(10,3), c_num_var numeric,
    c_float4 real, c_float8 double precision, c_bool boolean,
    c_text text, c_varchar varchar(20), c_char char(3),
    c_date date, c_time time, c_time3 time(3), c_ts timestamp, c_ts3 timestamp(3),
    c_tstz timestamptz, c_timetz timetz, c_interval interval,
    c_json json, c_jsonb jsonb, c_uuid uuid, c_bytea bytea,
    c_int_arr int[], c_text_arr text[], c_mood mood, c_positive positive, c_money money, c_inet inet
);
create table toasted (id int primary key, note text, big text);
alter table toasted alter column big set storage external;  -- out of line, uncompressed
create table full_identity (id int primary key, v text);
alter table full_identity replica identity full;
create table no_key (v text);
create table nothing_identity (id int primary key, v text);
alter table nothing_identity replica identity nothing;
"""

ROW = """
insert into all_types values (
    {id}, -32768, 2147483647, -9223372036854775808, 12345.678, 3.14159265358979, 1.5, 2.25, true,
    'text ü', 'varchar', 'ab', '2024-02-29', '13:37:03.123456', '13:37:03.123',
    '2024-02-29 13:37:03.123456', '2024-02-29 13:37:03.123', '2024-02-29 13:37:03.5+02', '13:37:03+02',
    '1 year 2 months 3 days 04:05:06.5', '{{"a": [1, 2]}}', '{{"b": null}}',
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x00ff10', '{{1,NULL,3}}', '{{"x y",NULL}}', 'happy', 7,
    '-1234.56', '192.168.0.1/24'
)
"""

CHANGES = [
    ROW.format(id=2),
    "update all_types set c_text = 'changed', c_int_arr = '{}' where id = 2",
    "delete from all_types where id = 2",
    "insert into toasted values (1, 'first', repeat('0123456789', 300))",
    "update toasted set note = 'second' where id = 1",  # big stays in TOAST: unchanged, not sent
    "insert into full_identity values (1, 'a')",
    "update full_identity set v = 'b' where id = 1",
    "delete from full_identity where id = 1",
    "insert into no_key values ('keyless')",
    "insert into nothing_identity values (1, 'n')",
    "update all_types set id = 10 where id = 1",  # a primary-key change: delete + create
]


def normalise(events: list[dict]) -> list[dict]:
    out = []
    for event in events:
        value = event["value"]
        if value is not None:
            value = {k: v for k, v in value.items() if k not in ("ts_ms", "ts_us", "ts_ns")}
            value["source"] = {k: v for k, v in value["source"].items() if k not in VOLATILE_SOURCE}
        out.append({"topic": event["topic"], "key": event["key"], "value": value})
    return out


class TopicCollector(Collector):
    def __call__(self, item) -> None:
        super().__call__(item)
        with self.lock:
            self.events[-1]["topic"] = item.topic


def test_every_operation_and_type_matches_the_golden_envelopes(pg_server, pg_database):
    with pg_server.connect(pg_database) as conn:
        conn.execute(SCHEMA)
        conn.execute(ROW.format(id=1))  # captured by the snapshot as op=r
    collected = TopicCollector()
    engine = Engine(engine_config(pg_server, pg_database), consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        wait_until(lambda: len(collected.snapshot()) == 1, 30, "snapshot")
        with pg_server.connect(pg_database) as conn:
            for statement in CHANGES:
                conn.execute(statement)
        wait_until(
            lambda: any(
                e["value"] and e["value"]["op"] == "c" and e["key"] == {"id": 10} for e in collected.snapshot()
            ),
            30,
            "all changes",
        )
    actual = normalise(collected.snapshot())
    path = GOLDEN / "postgres_all_operations.json"
    if os.environ.get("CDC_UPDATE_GOLDEN"):
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
        pytest.skip("golden file regenerated: review the diff")
    assert actual == json.loads(path.read_text())
