"""The MariaDB source's Connect schemas through the engine (ADR 0024, MySQL section): across a
restart, the schema history's file keeps what the schemas need (a streamed statement's type
spelling and comment), so events after a restart carry the schema of their binlog position, as
before it; an incremental or blocking snapshot's rows carry their table's schemas. Debezium's
exact schemas are the oracle's (test_mariadb_schemas_oracle.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_cdc.engine import Engine, JsonSerializer
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.requirements import require_module

from .mysql_support import engine_config
from .pg_support import SIGNAL_TABLE

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration

SCHEMAS = {
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
    "column.propagate.source.type": r".*\.t\..*",
}


class Events:
    """Each table event's key and value, schemas included."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def __call__(self, item: Any) -> None:
        if item.topic.endswith(".t") and item.value:
            self.items.append({"key": json.loads(item.key), "value": json.loads(item.value)})

    def after(self) -> list[tuple[dict[str, Any], dict[str, dict[str, Any]]]]:
        """Each event's row, and its after struct's fields by name."""
        out = []
        for item in self.items:
            envelope = item["value"]["schema"]
            after = next(f for f in envelope["fields"] if f["field"] == "after")
            out.append((item["value"]["payload"]["after"], {f["field"]: f for f in after["fields"]}))
        return out


def _run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def test_a_restart_reads_the_schemas_of_its_resume_point_from_the_history(mariadb_server, mariadb_database, tmp_path):
    conn = mariadb_server.connect(database=mariadb_database)
    _run(conn, "create table t (id int primary key, v varchar(20))", "insert into t values (1, 'a')")
    config = engine_config(
        mariadb_server,
        mariadb_database,
        **SCHEMAS,
        **{"offset.storage": "file", "offset.storage.file.filename": str(tmp_path / "offsets.json")},
    )
    first = Events()
    with EngineRunner(Engine(config, consumer=first, serializer=JsonSerializer.from_config(config))):
        wait_until(lambda: len(first.items) >= 1, 30, "the snapshot")
        _run(conn, "alter table t add column n integer not null default 7 comment 'a number'")
        _run(conn, "insert into t values (2, 'b', 8)")
        wait_until(lambda: len(first.items) >= 2, 30, "the row after the ALTER")
    # Streamed while stopped: read after the restart with the history's definitions.
    _run(conn, "alter table t modify v varchar(200)", "insert into t values (3, 'c', 9)")
    second = Events()
    with EngineRunner(Engine(config, consumer=second, serializer=JsonSerializer.from_config(config))):
        wait_until(lambda: len(second.items) >= 1, 30, "the row after the restart")
    conn.close()

    (snapshot_row, snapshot_fields), (row, fields) = first.after()
    assert snapshot_row == {"id": 1, "v": "a"} and set(snapshot_fields) == {"id", "v"}
    assert row == {"id": 2, "v": "b", "n": 8}
    number = {
        "type": "int32",
        "optional": False,
        "doc": "a number",
        "parameters": {
            "__debezium.source.column.type": "INTEGER",  # as the ALTER spells it
            "__debezium.source.column.comment": "a number",
            "__debezium.source.column.name": "n",
        },
        "default": 7,
        "field": "n",
    }
    assert fields["n"] == number
    ((row, fields),) = second.after()
    assert row == {"id": 3, "v": "c", "n": 9}
    assert fields["n"] == number  # from the history's file
    assert fields["v"]["parameters"]["__debezium.source.column.length"] == "200"
    assert second.items[0]["key"]["schema"]["fields"] == [{"type": "int32", "optional": False, "field": "id"}]


@pytest.mark.parametrize("kind", ["incremental", "blocking"])
def test_signalled_snapshot_rows_carry_the_tables_schemas(mariadb_server, mariadb_database, kind):
    """An incremental or blocking snapshot's rows carry the schemas of the table's definition,
    the same as the streamed rows' (Debezium builds both from one table schema)."""
    conn = mariadb_server.connect(database=mariadb_database)
    _run(
        conn,
        f"create table {SIGNAL_TABLE} (id varchar(42) primary key, type varchar(32) not null, data varchar(2048))",
        "create table t (id int primary key, v varchar(20) default 'x', d decimal(8,2))",
        "insert into t values (1, 'a', 1.5), (2, 'b', null)",
    )
    config = engine_config(
        mariadb_server,
        mariadb_database,
        **SCHEMAS,
        **{"snapshot.mode": "no_data", "signal.data.collection": f"{mariadb_database}.{SIGNAL_TABLE}"},
    )
    events = Events()
    with EngineRunner(Engine(config, consumer=events, serializer=JsonSerializer.from_config(config))):
        _run(conn, "insert into t values (3, 'c', 3)")
        wait_until(lambda: len(events.items) >= 1, 30, "the streamed row")
        data = {"data-collections": [f"{mariadb_database}.t"], "type": kind}
        _run(conn, f"insert into {SIGNAL_TABLE} values ('{kind}-1', 'execute-snapshot', '{json.dumps(data)}')")
        wait_until(lambda: len(events.items) >= 4, 60, "the snapshot's rows")
    conn.close()

    ops = [item["value"]["payload"]["op"] for item in events.items]
    assert ops == ["c", "r", "r", "r"]
    streamed = events.items[0]
    for item in events.items[1:]:
        assert item["value"]["schema"] == streamed["value"]["schema"]
        assert item["key"]["schema"] == streamed["key"]["schema"]
    fields = events.after()[0][1]
    assert fields["v"]["default"] == "x" and fields["d"]["parameters"]["connect.decimal.precision"] == "8"
