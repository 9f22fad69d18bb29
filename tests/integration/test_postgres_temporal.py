"""The text converters' calendar arithmetic agrees with PostgreSQL's own day and microsecond
counts (proleptic Gregorian, year 0 = 1 BC), BC dates and the far ends of the ranges included."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sources.postgres import temporal
from airflow_cdc.engine.sources.postgres.types import SESSION_OPTIONS, TypeInfo, ValueModes, converter_for
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .pg_support import engine_config
from .test_postgres_source import Collector

DATES = [
    "4713-11-24 BC",  # PostgreSQL's first date
    "4713-12-31 BC",
    "0401-01-01 BC",  # year -400: a 400-year era boundary
    "0400-12-31 BC",
    "0401-02-29 BC",  # year -400 is a leap year
    "0101-02-28 BC",  # year -100 is not
    "0101-03-01 BC",
    "0044-03-15 BC",
    "0005-02-29 BC",  # year -4
    "0001-01-01 BC",  # year 0
    "0001-02-29 BC",
    "0001-12-31 BC",
    "0001-01-01",
    "1582-10-10",
    "1969-12-31",
    "1970-01-01",
    "2000-02-29",
    "9999-12-31",
    "10000-01-01",
    "294276-12-31",
]
TYPES = {oid: TypeInfo(oid, name, "D", "b") for oid, name in ((1082, "date"), (1114, "timestamp"))}


@pytest.fixture(scope="module")
def conn(pg_server: Any) -> Any:
    dsn = psycopg.conninfo.make_conninfo(pg_server.dsn("postgres"), options=SESSION_OPTIONS)
    with psycopg.connect(dsn, autocommit=True) as connection:
        yield connection


@pytest.mark.parametrize("day", DATES)
def test_dates_count_days_as_postgresql_does(conn: Any, day: str):
    text, days = conn.execute("select d::text, d - date '1970-01-01' from (select %s::date d) t", [day]).fetchone()
    convert = converter_for(1082, -1, ValueModes(), TYPES.__getitem__)
    assert convert(text) == days
    year, month, dom = temporal.civil_from_days(days)  # and back: year 0 is 1 BC
    assert text == f"{1 - year if year <= 0 else year:04d}-{month:02d}-{dom:02d}{' BC' if year <= 0 else ''}"


@pytest.mark.parametrize("day", [d for d in DATES if d != "294276-12-31"])
@pytest.mark.parametrize("clock", ["00:00:00", "13:37:03.25", "23:59:59.999999"])
def test_timestamps_count_microseconds_as_postgresql_does(conn: Any, day: str, clock: str):
    bc = day.endswith(" BC")
    literal = f"{day.removesuffix(' BC')} {clock}{' BC' if bc else ''}"
    ts_text, ts_us, tz_text, tz_us = conn.execute(
        "select ts::text, (extract(epoch from ts) * 1000000)::int8, tz::text, (extract(epoch from tz) * 1000000)::int8"
        " from (select %s::timestamp ts, %s::timestamptz tz) t",
        [literal, literal],
    ).fetchone()
    assert temporal.parse_timestamp_us(ts_text) == ts_us
    assert converter_for(1114, -1, ValueModes(), TYPES.__getitem__)(ts_text) == ts_us
    assert temporal.parse_timestamp_us(tz_text) == tz_us == ts_us


INFINITE = """
create table infinite (
    id int primary key, d date, ts timestamp, ts3 timestamp(3), tstz timestamptz, d_arr date[], ts_arr timestamp[]
);
insert into infinite values
    (1, 'infinity', 'infinity', 'infinity', 'infinity', '{infinity,-infinity}', '{infinity,-infinity}'),
    (2, '-infinity', '-infinity', '-infinity', '-infinity', null, null);
"""
POS_US, NEG_US = 9_223_372_036_825_200_000, -9_223_372_036_832_400_000
#: The oracle (tests/compat): streamed dates +5877611-06-21 / -5877611-06-22; the snapshot's are
#: pgjdbc's java.sql.Date infinity constants as LocalDate.
POS_DAYS, NEG_DAYS = 2_146_033_979, -2_147_472_691
SNAPSHOT_POS_DAYS, SNAPSHOT_NEG_DAYS = -622_191_234, -625_821_272


@pytest.mark.parametrize("mode", ["adaptive", "adaptive_time_microseconds", "connect"])
def test_infinite_values_snapshot_and_stream_as_debezium_emits_them(pg_server: Any, pg_database: str, mode: str):
    """The JsonSerializer carries them (a value past int64 used to stop the stream) and they are
    Debezium's: MicroTimestamp Long.MAX/MIN_VALUE, milliseconds pgjdbc's infinity unchanged."""
    with pg_server.connect(pg_database) as conn:
        conn.execute(INFINITE)
    collected = Collector()
    config = engine_config(pg_server, pg_database, **{"time.precision.mode": mode})
    engine = Engine(config, consumer=collected, serializer=JsonSerializer())
    with EngineRunner(engine):
        wait_until(lambda: len(collected.snapshot()) == 2, 30, "snapshot")
        with pg_server.connect(pg_database) as conn:
            conn.execute(INFINITE.split(";")[1].replace("(1,", "(11,").replace("(2,", "(12,"))
        wait_until(lambda: len(collected.snapshot()) == 4, 30, "streamed rows")
    pos_ts, neg_ts = (POS_US, NEG_US) if mode == "connect" else (2**63 - 1, -(2**63))
    expected = {
        1: {"d": POS_DAYS, "ts": pos_ts, "ts3": POS_US, "tstz": "infinity"},
        2: {"d": NEG_DAYS, "ts": neg_ts, "ts3": NEG_US, "tstz": "-infinity"},
    }
    snapshot_days = {1: SNAPSHOT_POS_DAYS, 2: SNAPSHOT_NEG_DAYS}
    events = {e["value"]["after"]["id"]: e["value"] for e in collected.snapshot()}
    assert sorted(events) == [1, 2, 11, 12]
    for id_, event in events.items():
        assert event["op"] == ("r" if id_ < 10 else "c")
        after = event["after"]
        want = {**expected[id_ % 10], **({"d": snapshot_days[id_]} if id_ < 10 else {})}
        assert {k: after[k] for k in ("d", "ts", "ts3", "tstz")} == want, id_
        if id_ % 10 == 1:
            assert after["d_arr"] == [POS_DAYS, NEG_DAYS] and after["ts_arr"] == [pos_ts, neg_ts]
