"""The SQL targets against real servers: upserts, deletes and TRUNCATE under the position guard,
unavailable (TOASTed) columns, clear errors; and every PostgreSQL type the README claims, captured
by the engine (snapshot and stream) in each set of value-handling modes, applied to a PostgreSQL
target and compared with the source row by row; the common MySQL types likewise into MariaDB."""

from __future__ import annotations

import datetime as dt
import json
import pickle
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.sources.postgres import temporal
from airflow_cdc.engine.sources.postgres.catalog import Catalog
from airflow_cdc.engine.sources.postgres.types import SESSION_OPTIONS, ValueModes, converter_for
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.spark.frames import UNAVAILABLE_PLACEHOLDER
from airflow_cdc.spark.targets.sql import (
    SqlTargetSettings,
    TargetSchemaError,
    TargetWriteError,
    apply_changes,
    check_target,
    clear_catalog_cache,
)
from airflow_cdc.spark.values import DecodeError, json_text
from tests.compat import postgres_cases as cases
from tests.integration.pg_support import engine_config

pytestmark = pytest.mark.integration


@dataclass
class Change:
    """A latest-frame row (what a pyspark Row carries)."""

    table: str
    op: str
    key: str | None
    after: dict[str, str | None] | None
    position: str
    unavailable: list[str] = field(default_factory=list)


def pos(n: int) -> str:
    return f"{n:032x}"


def upsert(table: str, position: int, op: str = "u", unavailable: list[str] | None = None, **after: Any) -> Change:
    key = json.dumps({"id": after["id"]})
    return Change(table, op, key, {k: json_text(v) for k, v in after.items()}, pos(position), unavailable or [])


def delete(table: str, position: int, **key: Any) -> Change:
    return Change(table, "d", json.dumps(key), None, pos(position))


def truncate(table: str, position: int) -> Change:
    return Change(table, "t", None, None, pos(position))


@pytest.fixture(autouse=True)
def _fresh_catalog() -> Iterator[None]:
    clear_catalog_cache()
    yield
    clear_catalog_cache()


def pg_url(pg_server: Any, database: str) -> str:
    auth = quote(pg_server.user) + (":" + quote(pg_server.password) if pg_server.password else "")
    return f"postgresql://{auth}@{pg_server.host}:{pg_server.port}/{database}"


def mysql_url(server: Any, database: str) -> str:
    return f"mysql://{quote(server.user)}:{quote(server.password)}@{server.host}:{server.port}/{database}"


class Target:
    """One target database, whichever server: run SQL, read rows, apply changes."""

    def __init__(self, kind: str, url: str, run: Any, schema: str, **defaults: Any) -> None:
        self.kind, self.url, self._run, self.schema = kind, url, run, schema
        self.defaults = defaults  # settings every apply uses unless given

    def execute(self, statement: str) -> list[tuple[Any, ...]]:
        return self._run(statement)

    def rows(self, table: str = "t", columns: str = "id, v, n") -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.execute(f"select {columns} from {table} order by id")]

    def apply(self, changes: list[Change], **settings: Any) -> dict[str, int]:
        return apply_changes(changes, SqlTargetSettings(self.url, **{**self.defaults, **settings}))

    def qualified(self, table: str = "t") -> str:
        return f"{self.schema}.{table}"


@pytest.fixture
def pg_target(pg_server: Any, pg_database: str) -> Iterator[Target]:
    with pg_server.connect(pg_database) as conn:

        def run(statement: str) -> list[tuple[Any, ...]]:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

        yield Target("postgresql", pg_url(pg_server, pg_database), run, "public")


@pytest.fixture
def mariadb_target(mariadb_server: Any, mariadb_database: str) -> Iterator[Target]:
    with mariadb_server.connect(database=mariadb_database) as conn:

        def run(statement: str) -> list[tuple[Any, ...]]:
            with conn.cursor() as cur:
                cur.execute(statement)
                return list(cur.fetchall()) if cur.description else []

        yield Target("mariadb", mysql_url(mariadb_server, mariadb_database), run, mariadb_database)


@pytest.fixture
def pg_copy_target(pg_target: Target) -> Target:
    """PostgreSQL with every group, however small, going by COPY into a staging table."""
    return Target("postgresql", pg_target.url, pg_target._run, pg_target.schema, copy_min_rows=1)


@pytest.fixture
def pg_statement_target(pg_target: Target) -> Target:
    """PostgreSQL with multi-row statements only (no COPY)."""
    return Target("postgresql", pg_target.url, pg_target._run, pg_target.schema, copy_min_rows=None)


@pytest.fixture(params=["postgresql", "postgresql-copy", "mariadb"])
def target(request: pytest.FixtureRequest) -> Target:
    fixture = {"postgresql": "pg_statement_target", "postgresql-copy": "pg_copy_target"}
    return request.getfixturevalue(fixture.get(request.param, "mariadb_target"))


# --- changes, guard, unavailable columns -----------------------------------------------------------


def test_upserts_deletes_and_truncate_apply_in_order(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    t = target.qualified()
    counts = target.apply([upsert(t, 1, "r", id=1, v="a", n=1), upsert(t, 2, "c", id=2, v="b", n=2)])
    assert target.rows() == [(1, "a", 1), (2, "b", 2)]
    assert counts["upserted"] == 2
    counts = target.apply([upsert(t, 3, id=1, v="a2", n=None), delete(t, 4, id=2), upsert(t, 5, "c", id=3, v="c", n=3)])
    assert target.rows() == [(1, "a2", None), (3, "c", 3)]
    assert counts["deleted"] == 1
    # TRUNCATE removes what is older than it; what follows it in the same call stays.
    counts = target.apply([truncate(t, 6), upsert(t, 7, "c", id=4, v="d", n=4)])
    assert target.rows() == [(4, "d", 4)]
    assert counts["truncated"] == 2
    assert target.execute("select _cdc_position from t") == [(pos(7),)]


def test_an_older_change_is_a_no_op_and_a_replay_leaves_the_same_table(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    t = target.qualified()
    batch = [upsert(t, 10, "c", id=1, v="new", n=1), upsert(t, 11, "c", id=2, v="x", n=2), delete(t, 12, id=2)]
    target.apply(batch)
    before = target.rows()
    assert before == [(1, "new", 1)]
    for _ in range(2):  # a replayed batch, twice
        target.apply(batch)
        assert target.rows() == before
    counts = target.apply([upsert(t, 5, id=1, v="older", n=0), delete(t, 9, id=1), truncate(t, 3)])
    assert target.rows() == before
    assert counts["deleted"] == 0 and counts["truncated"] == 0
    if target.kind == "postgresql":
        assert counts["skipped_older"] == 1 and counts["upserted"] == 0
    counts = target.apply([upsert(t, 10, id=1, v="same position again", n=1)])  # not older: applies
    assert target.rows() == [(1, "same position again", 1)]


def test_unavailable_columns_keep_the_targets_value(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), big text, n int default 7)")
    t = target.qualified()
    target.apply([upsert(t, 1, "c", id=1, v="a", big="x" * 3000, n=1)])
    target.apply(
        [
            upsert(t, 2, id=1, v="b", big=UNAVAILABLE_PLACEHOLDER, n=2, unavailable=["big"]),
            upsert(
                t,
                3,
                "c",
                id=2,
                v="new",
                big=UNAVAILABLE_PLACEHOLDER,
                n=UNAVAILABLE_PLACEHOLDER,
                unavailable=["big", "n"],
            ),
        ]
    )
    assert target.rows(columns="id, v, big, n") == [(1, "b", "x" * 3000, 2), (2, "new", None, 7)]


def test_a_key_seen_twice_in_one_call_applies_in_order(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    t = target.qualified()
    target.apply(
        [
            upsert(t, 1, "c", id=1, v="a", n=1),
            upsert(t, 2, id=1, v="b", n=2),
            delete(t, 3, id=1),
            upsert(t, 4, "c", id=1, v="c", n=4),
        ]
    )
    assert target.rows() == [(1, "c", 4)]


def test_several_tables_batches_and_a_table_map(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    target.execute("create table renamed (a int, b varchar(10), v varchar(20), primary key (a, b))")
    t = target.qualified()
    changes = []
    for i in range(1, 2501):
        changes.append(upsert(t, i, "c", id=i, v=f"v{i}", n=i))
        key = {"a": i % 7, "b": str(i)}
        changes.append(
            Change("src.pairs", "c", json.dumps(key), {**{k: str(v) for k, v in key.items()}, "v": "x"}, pos(i))
        )
    changes += [delete(t, 5000 + i, id=i) for i in range(1, 1001)]
    changes.append(Change("src.pairs", "d", json.dumps({"a": 3, "b": "3"}), None, pos(9000)))
    counts = target.apply(changes, tables={"src.pairs": target.qualified("renamed")}, batch_size=300)
    assert counts["upserted"] == 5000 and counts["deleted"] == 1001
    assert target.execute("select count(*), min(id), max(id) from t") == [(1500, 1001, 2500)]
    assert target.execute("select count(*) from renamed") == [(2499,)]


def test_key_columns_of_other_types(pg_target: Target):
    pg_target.execute(
        "create table k (u uuid, d date, n numeric(6,2), v text, primary key (u, d, n)); "
        "create table b (k bytea primary key, v text)"
    )
    key = {"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "d": 19782, "n": "MDk="}  # 123.45
    row = Change("public.k", "c", json.dumps(key), {**{k: json_text(v) for k, v in key.items()}, "v": "x"}, pos(1))
    bkey = {"k": "AP8="}
    brow = Change("public.b", "c", json.dumps(bkey), {"k": "AP8=", "v": "y"}, pos(1))
    pg_target.apply([row, brow])
    assert pg_target.execute("select u::text, d::text, n::text, v from k") == [
        ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "2024-02-29", "123.45", "x")
    ]
    pg_target.apply(
        [
            Change("public.k", "d", json.dumps(key), None, pos(2)),
            Change("public.b", "d", json.dumps(bkey), None, pos(2)),
        ]
    )
    assert pg_target.execute("select count(*) from k") == [(0,)]
    assert pg_target.execute("select count(*) from b") == [(0,)]


# --- errors ------------------------------------------------------------------------------------------


def test_a_missing_table_names_the_table_and_how_to_create_it(target: Target):
    with pytest.raises(TargetSchemaError) as caught:
        target.apply([upsert(target.qualified("absent"), 1, "c", id=1, v="a")])
    message = str(caught.value)
    assert f"Target table {target.qualified('absent')}" in message and "does not exist" in message
    assert "CREATE TABLE" in message and "_cdc_position" in message and "varchar(64)" in message
    assert "settings.tables" in message


def test_a_missing_key_constraint_names_the_sql_to_add_it(target: Target):
    target.execute("create table t (id int, v varchar(20), n int)")
    with pytest.raises(TargetSchemaError) as caught:
        target.apply([upsert(target.qualified(), 1, "c", id=1, v="a", n=1)])
    assert "has no primary key or unique index on exactly (id)" in str(caught.value)
    assert "ADD PRIMARY KEY" in str(caught.value)
    target.execute("create unique index t_id on t (id)")  # a unique index will do
    target.apply([upsert(target.qualified(), 1, "c", id=1, v="a", n=1)])
    assert target.rows() == [(1, "a", 1)]


def test_a_missing_column_names_the_sql_to_add_it(target: Target):
    target.execute("create table t (id int primary key, v varchar(20))")
    with pytest.raises(TargetSchemaError, match=r"lacks the column\(s\) n .*ADD COLUMN .n. <the source's type>"):
        target.apply([upsert(target.qualified(), 1, "c", id=1, v="a", n=1)])
    target.execute("alter table t add column n int")  # read again once the table has changed
    target.apply([upsert(target.qualified(), 1, "c", id=1, v="a", n=1)])
    assert target.rows() == [(1, "a", 1)]


def test_without_add_position_column_a_missing_position_column_is_an_error(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    with pytest.raises(
        TargetSchemaError, match=r"has no _cdc_position column.*ALTER TABLE .* ADD COLUMN IF NOT EXISTS"
    ):
        target.apply([upsert(target.qualified(), 1, "c", id=1, v="a", n=1)], add_position_column=False)
    target.apply([upsert(target.qualified(), 1, "c", id=1, v="a", n=1)])  # the default adds it
    assert target.rows(columns="id, _cdc_position") == [(1, pos(1))]


def test_an_undecodable_value_names_the_column_and_the_setting_and_nothing_is_written(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), d decimal(6,2))")
    t = target.qualified()
    good = Change(t, "c", '{"id":1}', {"id": "1", "v": "a", "d": "MDk="}, pos(1))
    bad = Change(t, "c", '{"id":2}', {"id": "2", "v": "b", "d": "12.50"}, pos(2))  # decimal.handling.mode=string's
    with pytest.raises(DecodeError) as caught:
        target.apply([good, bad])
    assert "column d of" in str(caught.value) and "'12.50'" in str(caught.value)
    assert "Set decimal.handling.mode the same as the connector's" in str(caught.value)
    assert target.rows(columns="id") == []  # one transaction: the good row went too
    target.apply([good])
    target.apply([bad], modes={"decimal.handling.mode": "string"})
    rows = [(i, Decimal(d)) for i, d in target.rows(columns="id, d")]
    assert rows == [(1, Decimal("123.45")), (2, Decimal("12.50"))]


def test_check_target_adds_the_position_column_and_names_missing_tables(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    settings = SqlTargetSettings(target.url)
    check_target(settings, [target.qualified()])
    assert target.rows(columns="id, _cdc_position") == []  # the column is there
    with pytest.raises(TargetSchemaError, match="does not exist"):
        check_target(settings, [target.qualified("absent")])


def test_a_value_the_target_refuses_names_the_column(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    # PostgreSQL gets an integer's text as it is; MariaDB's decoder reads it (and would refuse
    # this one itself), so it gets a string too long for its column instead.
    bad = {"n": "not a number"} if target.kind == "postgresql" else {"v": "x" * 21}
    with pytest.raises(TargetWriteError) as caught:
        target.apply([upsert(target.qualified(), 1, "c", **{"id": 1, "v": "a", "n": 1, **bad})])
    message = str(caught.value)
    assert "refused a value" in message and "must match the source column's" in message
    assert ("column n of" in message) if target.kind == "postgresql" else ("'v'" in message)


def test_a_change_without_a_key_is_refused(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), n int)")
    with pytest.raises(TargetSchemaError, match="has no key: Debezium emits a null key"):
        target.apply([Change(target.qualified(), "c", None, {"id": "1"}, pos(1))])


# --- every PostgreSQL type, captured by the engine ------------------------------------------------------

VARIANTS = {
    "defaults": {},
    "string-hex-micro": {
        "decimal.handling.mode": "string",
        "binary.handling.mode": "hex",
        "time.precision.mode": "adaptive_time_microseconds",
        "interval.handling.mode": "string",
    },
    "double-urlsafe-connect": {
        "decimal.handling.mode": "double",
        "binary.handling.mode": "base64-url-safe",
        "time.precision.mode": "connect",
    },
    "unknown-map-base64": {
        "include.unknown.datatypes": "true",
        "hstore.handling.mode": "map",
        "binary.handling.mode": "base64",
        "interval.handling.mode": "string",
    },
}

#: Where Debezium's value loses something, so that the target cannot equal the source; there
#: the target must still encode back to the event's value (checked for every column).
ALWAYS_LOSSY = {
    ("temporal", "ttz"): "timetz: the offset (UTC)",
    ("temporal", "ttz3"): "timetz: the offset (UTC)",
    ("temporal_more", "ttz0"): "timetz: the offset (UTC)",
    ("arrays_more", "attz"): "timetz: the offset (UTC)",
    ("bits", "vb"): "varbit: leading zeros ('' is '0')",
    ("geometric_more", "po"): "polygon: a repeated first point is dropped",
    ("arrays_more", "ab3"): "bit(n)[]: null in Debezium",
    ("arrays_more", "ab1"): "bit(n)[]: null in Debezium",
    ("arrays", "anv"): "numeric[] holding NaN: null in Debezium",
    ("arrays_more", "anvi"): "numeric[] holding Infinity: null in Debezium",
}
LOSSY_BY_MODE = {
    ("decimal.handling.mode", "precise"): {
        ("numbers", "nv"): "NaN is null",
        ("numbers_more", "nvi"): "infinities are null",
        ("numbers_more", "nv"): "VariableScaleDecimal strips trailing zeros (1.500 is 1.5)",
        ("arrays_more", "anv"): "VariableScaleDecimal strips trailing zeros",
    },
    ("decimal.handling.mode", "double"): {
        ("numbers", "n38"): "38 digits as a double",
        ("numbers_more", "nv"): "1.500 as a double is 1.5",
        ("arrays_more", "anv"): "2.50 as a double is 2.5",
    },
    ("interval.handling.mode", "numeric"): {
        ("temporal", "iv"): "months as 30.4375 days",
        ("temporal", "iv_ym"): "months as 30.4375 days",
        ("temporal_more", "iv"): "months as 30.4375 days",
    },
    ("time.precision.mode", "connect"): {
        ("temporal", "t"): "milliseconds",
        ("temporal", "ts"): "milliseconds",
    },
}


#: A snapshot's infinite dates are other numbers than the stream's (the engine emits Debezium's
#: both); the target, re-read as the stream reads, gives the stream's.
SNAPSHOT_INFINITIES = {
    temporal.SNAPSHOT_POSITIVE_INFINITY_DAYS: temporal.POSITIVE_INFINITY_DAYS,
    temporal.SNAPSHOT_NEGATIVE_INFINITY_DAYS: temporal.NEGATIVE_INFINITY_DAYS,
}


def lossy(variant: dict[str, str]) -> dict[tuple[str, str], str]:
    defaults = {"decimal.handling.mode": "precise", "interval.handling.mode": "numeric"}
    found = dict(ALWAYS_LOSSY)
    for (key, mode), columns in LOSSY_BY_MODE.items():
        if {**defaults, **variant}.get(key) == mode:
            found.update(columns)
    return found


class Collector:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        with self.lock:
            self.events.append({"key": json.loads(item.key) if item.key else None, "value": json.loads(item.value)})

    def tables(self) -> set[str]:
        with self.lock:
            return {e["value"]["source"]["table"] for e in self.events if e["value"]}


@contextmanager
def database(pg_server: Any, *extensions: str) -> Iterator[str]:
    name = pg_server.create_database()
    try:
        with pg_server.connect(name) as conn:
            for extension in extensions:
                conn.execute(f"create extension if not exists {extension}")
        yield name
    finally:
        pg_server.drop_database(name)


def capture(pg_server: Any, source: str, settings: dict[str, str], stream: list[str]) -> list[dict[str, Any]]:
    """The engine's events of the source: its snapshot, then ``stream``'s statements."""
    name = f"sql_target_{uuid.uuid4().hex[:8]}"
    config = engine_config(pg_server, source, **settings, **{"name": name, "slot.name": name, "publication.name": name})
    collected = Collector()
    with EngineRunner(Engine(config, consumer=collected, serializer=JsonSerializer())):
        with pg_server.connect(source) as conn:
            for statement in stream:
                conn.execute(statement)
            conn.execute(cases.MARKER)
        wait_until(lambda: "oracle_marker" in collected.tables(), 120, "the marker's event")
    return [e for e in collected.events if e["value"] and e["value"]["op"] in ("r", "c", "u", "d")]


def latest_rows(events: list[dict[str, Any]]) -> list[Change]:
    changes = []
    for index, event in enumerate(events, start=1):
        value = event["value"]
        after = value["after"]
        changes.append(
            Change(
                f"{value['source']['schema']}.{value['source']['table']}",
                value["op"],
                json.dumps(event["key"], separators=(",", ":")),
                None if after is None else {c: json_text(v) for c, v in after.items()},
                pos(index),
            )
        )
    return changes


def text_rows(conn: psycopg.Connection[Any], table: str, columns: list[str]) -> dict[int, dict[str, str | None]]:
    """Each row's values as the server prints them (the engine's session settings)."""
    select = ", ".join(f'"{c}"' for c in columns)
    cursor = conn.execute(f'select id, {select} from "{table}"', binary=False)
    result, rows = cursor.pgresult, {}
    assert result is not None
    for i in range(result.ntuples):
        values = [result.get_value(i, j) for j in range(result.nfields)]
        texts = [None if v is None else bytes(v).decode() for v in values]
        rows[int(texts[0])] = dict(zip(columns, texts[1:], strict=True))  # type: ignore[arg-type]
    return rows


def encoders(conn: psycopg.Connection[Any], table: str, modes: ValueModes) -> dict[str, Any]:
    catalog = Catalog(conn)
    found = conn.execute(
        "select attname, atttypid::int, atttypmod from pg_attribute where attrelid = %s::regclass and attnum > 0",
        (table,),
    ).fetchall()
    return {name: converter_for(oid, typmod, modes, catalog.type) for name, oid, typmod in found}


def engine_value_modes(settings: dict[str, str]) -> ValueModes:
    names = {
        "decimal.handling.mode": "decimal",
        "binary.handling.mode": "binary",
        "time.precision.mode": "time_precision",
        "interval.handling.mode": "interval",
        "hstore.handling.mode": "hstore",
    }
    return ValueModes(
        include_unknown=settings.get("include.unknown.datatypes") == "true",
        **{names[k]: v for k, v in settings.items() if k in names},
    )


@pytest.mark.slow
@pytest.mark.parametrize("copy_min_rows", [None, 1], ids=["statements", "copy"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_postgresql_type_survives_capture_decode_and_apply(pg_server: Any, variant: str, copy_min_rows: Any):
    settings = VARIANTS[variant]
    stream = [s for t in cases.TYPED_TABLES for s in cases.insert_rows(t, 11)]
    with database(pg_server, *cases.EXTENSIONS) as source, database(pg_server, *cases.EXTENSIONS) as target:
        with pg_server.connect(source) as conn:
            conn.execute(cases.SCHEMA)
            for table in cases.TYPED_TABLES:
                for statement in cases.insert_rows(table, 1):
                    conn.execute(statement)
        events = capture(pg_server, source, settings, stream)
        with pg_server.connect(target) as conn:
            conn.execute(cases.SCHEMA)
        typed = [c for c in latest_rows(events) if c.table.split(".")[1] in cases.TYPED_TABLES]
        assert {c.op for c in typed} == {"r", "c"} and len(typed) == 2 * sum(
            len(cases.ROWS[t]) for t in cases.TYPED_TABLES
        )
        counts = apply_changes(
            typed,
            SqlTargetSettings(pg_url(pg_server, target), modes=settings, batch_size=4, copy_min_rows=copy_min_rows),
        )
        assert counts["upserted"] == len(typed)
        problems, compared = compare(pg_server, source, target, events, settings)
    assert not problems, "\n".join(problems)
    assert len(compared) >= 130 and ("texts", "hs") in compared and ("geometric", "po") in compared
    assert (("unknowns", "xi") in compared) == (settings.get("include.unknown.datatypes") == "true")


def compare(pg_server: Any, source: str, target: str, events: list[dict[str, Any]], settings: dict[str, str]):
    """Every captured column: the target encodes back to the event's value, and equals the
    source unless Debezium's value loses something (``lossy``)."""
    allowed, problems, compared = lossy(settings), [], set()
    modes = engine_value_modes(settings)
    session = {"options": SESSION_OPTIONS}
    with (
        psycopg.connect(pg_server.dsn(source, **session), autocommit=True) as src,
        psycopg.connect(pg_server.dsn(target, **session), autocommit=True) as tgt,
    ):
        for table in cases.TYPED_TABLES:
            afters = {e["key"]["id"]: e["value"]["after"] for e in events if e["value"]["source"]["table"] == table}
            columns = sorted({c for after in afters.values() for c in after} - {"id"})
            if not columns:
                continue  # every column left out (types Debezium has no schema for)
            source_rows, target_rows = text_rows(src, table, columns), text_rows(tgt, table, columns)
            encode = encoders(tgt, table, modes)
            compared.update((table, c) for c in columns)
            for row_id, after in afters.items():
                for column in columns:
                    wrote = target_rows[row_id][column]
                    again = None if wrote is None else encode[column](wrote)
                    event = after[column]
                    if isinstance(event, int):
                        event = SNAPSHOT_INFINITIES.get(event, event)
                    if again != event:
                        problems.append(f"{table}.{column} #{row_id}: event {after[column]!r}, target {wrote!r}")
                    had = source_rows[row_id][column]
                    if had != wrote and (table, column) not in allowed:
                        problems.append(f"{table}.{column} #{row_id}: source {had!r}, target {wrote!r}")
    return problems, compared


# --- MySQL types, from a PostgreSQL source captured by the engine ----------------------------------------

MIX_SOURCE = """
create table mix (
    id int primary key, i2 smallint, i8 bigint, n numeric(12,3), nv numeric, f4 real, f8 double precision,
    vc varchar(20), t text, b boolean, d date, tm time, tm3 time(3), ts timestamp, ts3 timestamp(3),
    tz timestamptz, by bytea, jb jsonb, u uuid, bi bit(1)
)
"""
MIX_TARGET = """
create table mix (
    id int primary key, i2 smallint, i8 bigint, n decimal(12,3), nv decimal(38,14), f4 float, f8 double,
    vc varchar(20), t text, b tinyint(1), d date, tm time(6), tm3 time(3), ts datetime(6), ts3 datetime(3),
    tz timestamp(6) null, `by` blob, jb json, u char(36), bi bit(1)
)
"""
MIX_ROWS = [
    "(1, -32768, 9223372036854775807, 12345.678, 3.14159265358979, 1.5, 2.25, 'varchar ü', 'text ✓', true,"
    " '2024-02-29', '13:37:03.123456', '13:37:03.123', '2024-02-29 13:37:03.123456', '2024-02-29 13:37:03.124',"
    " '2024-02-29 13:37:03.5+02', '\\x00ff10', '{\"a\": [1, 2.5]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', B'1')",
    "(2, 0, -9223372036854775808, -0.001, -0.0000000001, -1e-10, 1e300, '', '', false,"
    " '0001-01-01', '00:00:00', '23:59:59.999', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999',"
    " '1970-01-01 00:00:01+00', '\\x', '[]', '00000000-0000-0000-0000-000000000000', B'0')",
    "(3" + ", null" * 19 + ")",
]


def _normal(value: Any) -> Any:
    """PostgreSQL's and MariaDB's Python values of the same thing, made comparable."""
    if isinstance(value, dt.timedelta):
        return (dt.datetime.min + value).time()
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, float):
        return round(value, 6) if abs(value) < 1e6 else value
    return value


def _mariadb_value(column: str, value: Any) -> Any:
    if value is None:
        return None
    if column == "b":
        return bool(value)
    if column == "bi":
        return value == b"\x01"
    if column == "jb":
        return json.loads(value)
    if column == "nv":
        return Decimal(value).normalize()
    return _normal(value)


def _pg_value(column: str, value: Any) -> Any:
    if value is None:
        return None
    if column == "bi":
        return value == "1"
    if column == "nv":
        return Decimal(value).normalize()
    return _normal(value)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["defaults", "string-hex-micro"])
def test_mysql_types_survive_capture_decode_and_apply(pg_server: Any, mariadb_target: Target, variant: str):
    settings = VARIANTS[variant]
    with database(pg_server) as source:
        with pg_server.connect(source) as conn:
            conn.execute(MIX_SOURCE + "; create table oracle_marker (id int primary key)")
            conn.execute("insert into mix values " + MIX_ROWS[0])
        events = capture(pg_server, source, settings, ["insert into mix values " + r for r in MIX_ROWS[1:]])
        with pg_server.connect(source) as conn:
            expected = conn.execute("select * from mix order by id")
            names = [c.name for c in expected.description or []]
            source_rows = [{n: _pg_value(n, v) for n, v in zip(names, row, strict=True)} for row in expected]
    mariadb_target.execute(MIX_TARGET)
    changes = [c for c in latest_rows(events) if c.table == "public.mix"]
    mariadb_target.apply(changes, tables={"public.mix": "mix"}, modes=settings)
    got = mariadb_target.rows("mix", ", ".join(f"`{n}`" for n in names))
    target_rows = [{n: _mariadb_value(n, v) for n, v in zip(names, row, strict=True)} for row in got]
    assert len(target_rows) == len(source_rows)
    differences = [
        f"#{want['id']}.{n}: source {want[n]!r}, target {have[n]!r}"
        for want, have in zip(source_rows, target_rows, strict=True)
        for n in names
        if want[n] != have[n]
    ]
    assert differences == []


# --- on Spark's executors -----------------------------------------------------------------------------


def test_settings_pickle_and_never_show_the_password():
    settings = SqlTargetSettings("postgresql://user:s3cret@host:5432/db", modes={"decimal.handling.mode": "string"})
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert "s3cret" not in repr(settings) and "user:***@host" in repr(settings)


def test_rows_as_pyspark_rows_and_mappings(pg_target: Target):
    from pyspark.sql import Row

    pg_target.execute("create table t (id int primary key, v varchar(20), n int)")
    rows = [
        Row(
            table="public.t",
            op="c",
            key='{"id":1}',
            after={"id": "1", "v": "a", "n": "1"},
            unavailable=[],
            position=pos(1),
        ),
        Row(
            table="public.t",
            op="c",
            key='{"id":2}',
            after={"id": "2", "v": "b", "n": "2"},
            unavailable=None,
            position=pos(2),
        ),
    ]
    pg_target.apply(rows)
    mapping = {
        "table": "public.t",
        "op": "d",
        "key": '{"id":1}',
        "after": None,
        "unavailable": None,
        "position": pos(3),
    }
    pg_target.apply([mapping])
    assert pg_target.rows() == [(2, "b", 2)]


@pytest.mark.slow
def test_apply_changes_in_foreach_partition(spark: Any, pg_target: Target):
    from airflow_cdc.spark.frames import LATEST_SCHEMA

    pg_target.execute("create table t (id int primary key, v varchar(20), n int)")
    data = [
        ("public.t", "c", json.dumps({"id": i}), {"id": str(i), "v": f"v{i}", "n": str(i)}, [], pos(i))
        for i in range(1, 101)
    ]
    frame = spark.createDataFrame(data, LATEST_SCHEMA).repartition(3)  # type: ignore[attr-defined]
    settings = SqlTargetSettings(pg_target.url, batch_size=16)
    counts = frame.rdd.mapPartitions(lambda rows: [apply_changes(rows, settings)]).collect()
    assert sum(c["upserted"] for c in counts) == 100
    assert pg_target.execute("select count(*), sum(n) from t") == [(100, 5050)]
