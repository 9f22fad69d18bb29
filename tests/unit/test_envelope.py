"""The change-event envelope's one definition (engine/envelope.py) and the sources' hot paths
that build their events with it: Debezium's fields, in Debezium's order, op as a plain str
(whole events are compared with Debezium's in tests/compat)."""

from __future__ import annotations

import orjson
import pytest

from airflow_cdc.engine.envelope import (
    SOURCE_HEAD,
    Op,
    change_envelope,
    change_value,
    message_value,
    source_builder,
    source_info,
)
from airflow_cdc.engine.sources.mysql import changes as mysql_changes
from airflow_cdc.engine.sources.mysql.binlog import EventSource, RowChange
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.types import MySqlColumn
from airflow_cdc.engine.sources.mysql.types import ValueModes as MySqlModes
from airflow_cdc.engine.sources.postgres import changes as pg_changes
from airflow_cdc.engine.sources.postgres import pgoutput
from airflow_cdc.engine.sources.postgres.types import ValueModes as PgModes

ENVELOPE = ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]
HEAD = ["version", "connector", "name", "ts_ms", "snapshot", "db", "sequence", "ts_us", "ts_ns"]
PG_SOURCE = [*HEAD, "schema", "table", "txId", "lsn", "xmin", "origin", "origin_lsn"]
MYSQL_SOURCE = [*HEAD, "table", "server_id", "gtid", "file", "pos", "row", "thread", "query"]
NS = 1_700_000_000_123_456_789


def test_a_change_value_has_debeziums_fields_in_order() -> None:
    value = change_value("u", {"id": 1}, {"id": 2}, {"db": "d"}, None, NS)
    assert list(value) == ENVELOPE
    assert (value["op"], value["ts_ms"], value["ts_us"], value["ts_ns"]) == ("u", NS // 10**6, NS // 10**3, NS)
    assert change_envelope(Op.UPDATE, before={"id": 1}, after={"id": 2}, source={"db": "d"}, ts_ns=NS) == value
    assert type(change_envelope(Op.UPDATE, before=None, after=None, source={}, ts_ns=NS)["op"]) is str


def test_a_compiled_source_block_is_source_infos_block() -> None:
    fields = ("schema", "table", "txId", "lsn", "xmin", "origin", "origin_lsn")
    built = source_builder("postgresql", fields)("srv", NS, "false", "db", '["1","2"]', "s", "t", 7, 2, None, "o", 1)
    info = source_info(
        connector="postgresql",
        name="srv",
        ts_ns=NS,
        db="db",
        sequence='["1","2"]',
        schema="s",
        table="t",
        txId=7,
        lsn=2,
        xmin=None,
        origin="o",
        origin_lsn=1,
    )
    assert list(SOURCE_HEAD) == HEAD
    assert orjson.dumps(built) == orjson.dumps(info)  # same keys, same order, same values
    assert list(built) == PG_SOURCE
    assert (built["ts_ms"], built["ts_us"]) == (NS // 10**6, NS // 10**3)
    assert source_builder("postgresql", fields) is source_builder("postgresql", fields)  # compiled once


def test_field_names_are_only_keys_and_a_head_field_named_again_takes_the_later_value_in_place() -> None:
    odd = ("a b", "'): import os #", "ts_ms")
    block = source_builder("c", odd)("n", NS, "true", "d", None, 1, 2, 3)
    assert list(block) == [*HEAD, "a b", "'): import os #"]
    assert (block["a b"], block["'): import os #"], block["ts_ms"]) == (1, 2, 3)
    assert source_info(connector="c", name="n", ts_ns=NS, db="d", ts_ms=3, **{"a b": 1}) == {
        **source_info(connector="c", name="n", ts_ns=NS, db="d"),
        "ts_ms": 3,
        "a b": 1,
    }


def test_a_message_value_is_debeziums_message_event() -> None:
    value = message_value({"db": "d"}, "app", "AP8=", NS)
    assert value == {
        "op": "m",
        "ts_ms": NS // 10**6,
        "source": {"db": "d"},
        "transaction": None,
        "message": {"prefix": "app", "content": "AP8="},
    }
    assert type(value["op"]) is str


def _pg_builder(skipped: frozenset[str] = frozenset()) -> pg_changes.ChangeBuilder:
    builder = pg_changes.ChangeBuilder(
        server="srv",
        database="db",
        partition={"server": "srv"},
        topic=lambda schema, table: f"srv.{schema}.{table}",
        catalog=None,  # type: ignore[arg-type]  # the table is planned below, not read from a server
        modes=PgModes(),
        filters=None,  # type: ignore[arg-type]
        tombstones=True,
        skipped=skipped,
        resume=None,
    )
    columns = [pg_changes.ColumnPlan("id", 0, int, None, "int4"), pg_changes.ColumnPlan("v", 1, str, None, "text")]
    builder.tables[1] = pg_changes.TableSchema("public", "t", "srv.public.t", columns, ["id"])
    return builder


def test_postgres_stream_events_are_built_with_the_envelope() -> None:
    builder = _pg_builder()
    builder.handle(pgoutput.Begin(100, 1_700_000_000_000_001, 77), 90)
    (insert,) = builder.handle(pgoutput.Insert(1, (b"1", b"a")), 101)
    delete, tombstone, create = builder.handle(pgoutput.Update(1, (b"2", b"b"), (b"1", None), True), 102)
    message = builder.handle(pgoutput.Message(True, 103, "app", b"\x00"), 103)[0]
    for record, op in ((insert, "c"), (delete, "d"), (create, "c")):
        assert list(record.value) == ENVELOPE
        assert list(record.value["source"]) == PG_SOURCE
        assert type(record.value["op"]) is str and record.value["op"] == op
    assert tombstone.value is None
    assert insert.value["source"] == {
        **insert.value["source"],
        "connector": "postgresql",
        "ts_ns": 1_700_000_000_000_001_000,
        "sequence": '[null,"101"]',
        "schema": "public",
        "table": "t",
        "txId": 77,
        "lsn": 101,
    }
    assert list(message.value) == ["op", "ts_ms", "source", "transaction", "message"]
    assert list(message.value["source"]) == PG_SOURCE
    assert (message.value["source"]["schema"], message.value["source"]["txId"]) == ("", 77)
    # Skipped operations are plain str codes too: the hot path compares them as such.
    skipping = _pg_builder(frozenset({"c"}))
    skipping.handle(pgoutput.Begin(100, 1, 78), 90)
    assert skipping.handle(pgoutput.Insert(1, (b"1", b"a")), 101) == []


@pytest.mark.parametrize("where", [EventSource("bin.000001", 400, "0-1-7", 1, 1_700_000_000, thread=42), None])
def test_mysql_events_are_built_with_the_envelope(where: EventSource | None) -> None:
    builder = mysql_changes.ChangeBuilder(
        connector="mariadb",
        server="srv",
        partition={"server": "srv"},
        tombstones=True,
        skipped=frozenset(),
        extra_offset=dict,
    )
    table = Table("db", "t", (MySqlColumn("id", "int", "int(11)", nullable=False),), ("id",))
    rows = mysql_changes.plan(table, "srv.db.t", MySqlModes(), snapshot=where is None)
    if where is None:
        record = builder.snapshot_record(rows, (1,), {"file": "bin.000002", "pos": 4}, "true")
        assert record is not None
        expected = {"snapshot": "true", "server_id": 0, "gtid": None, "file": "bin.000002", "pos": 4, "thread": None}
    else:
        change = RowChange("db", "t", "c", None, (1,), ("id",), 3, {"file": where.file, "pos": where.pos}, where)
        (record,) = builder.changes(rows, change)
        expected = {"snapshot": "false", "ts_ns": 1_700_000_000 * 10**9, "server_id": 1, "gtid": "0-1-7", "row": 3}
    assert list(record.value) == ENVELOPE
    assert type(record.value["op"]) is str
    source = record.value["source"]
    assert list(source) == MYSQL_SOURCE
    assert source == {**source, "connector": "mariadb", "db": "db", "table": "t", "query": None, **expected}
