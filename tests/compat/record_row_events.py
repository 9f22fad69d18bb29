"""Records real row events for ``tests/unit/test_mysql_row_decoder.py``: the value oracle's tables
of every type (``mariadb_cases``) plus the shapes that stopped the stream (a binary key beside
simple columns), written by a real MariaDB with ``binlog_row_metadata=FULL``, each event as its
table map's columns (as mysql-replication reads them: type, metadata, optional metadata), the
definitions information_schema gives, and the row bytes.

    .venv/bin/python -m tests.compat.record_row_events   # a throwaway MariaDB, or CDC_TEST_MYSQL_URL

Run it again when ``mariadb_cases`` gains types; the file is checked in.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from airflow_cdc.engine.sources.mysql.binlog import _rest_of_event
from airflow_cdc.engine.sources.mysql.schema import read_tables
from airflow_cdc.local.mariadb import MariaDBServer
from tests.compat import mariadb_cases as cases

OUT = Path(__file__).parents[1] / "unit" / "data" / "mariadb_row_events.json"
DATABASE = "recorded"
SHAPES = (
    "create table bin_key (id binary(4) primary key, note varchar(10))",
    "create table uuid_key (id binary(16) primary key, n int, v varchar(20), d decimal(10,2))",
    "insert into bin_key values (x'00ff8000', 'n1'), (x'61620000', 'n2'), (x'ffffffff', '')",
    "insert into uuid_key values (unhex('123e4567e89b12d3a456426614174000'), 1, 'a', 1.5),"
    " (unhex('ff00000000000000000000000000ff00'), null, null, null)",
    "update bin_key set id = x'00000000' where id = x'00ff8000'",
    "delete from uuid_key where n is null",
)
_METADATA = (
    "type", "max_length", "length_size", "precision", "decimals", "fsp", "size", "bits", "bytes",
    "name", "unsigned", "character_set_name", "enum_values", "set_values",
)  # fmt: skip


def record(server: Any) -> list[dict[str, Any]]:
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_row_metadata")
        metadata = cur.fetchone()[0]
        cur.execute("SET GLOBAL binlog_row_metadata = FULL")  # the library's values need it
        cur.execute(f"drop database if exists {DATABASE}")
        cur.execute(f"create database {DATABASE} character set utf8mb4")
        cur.execute("select @@gtid_binlog_pos")
        start = cur.fetchone()[0]
    session = server.connect(database=DATABASE, init_command="SET sql_mode='', time_zone='+00:00'")
    with session, session.cursor() as cur:
        for statement in (*cases.SCHEMA, *SHAPES[:2], *cases.SNAPSHOT, *SHAPES[2:], *cases.STREAM[1], *cases.STREAM[2]):
            cur.execute(statement)
        cur.execute(cases.MARKER)
        tables = read_tables(session, [(DATABASE, t) for t in (*cases.TABLES, "bin_key", "uuid_key")])
    reader = server.binlog_reader(
        server_id=4747,
        auto_position=start,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[DATABASE],
        blocking=False,
    )
    ops = {WriteRowsEvent: "c", UpdateRowsEvent: "u", DeleteRowsEvent: "d"}
    events, counts = [], {}
    try:
        for event in reader:
            if event.table == "oracle_marker":
                break
            table = tables[(DATABASE, event.table)]
            data = _rest_of_event(event)
            assert data is not None
            index = counts[event.table] = counts.get(event.table, 0) + 1
            events.append(
                {
                    "table": event.table,
                    "op": ops[type(event)],
                    "index": index,
                    "binlog": [{k: v for k, v in vars(c).items() if k in _METADATA} for c in event.columns],
                    "columns": [asdict(c) for c in table.columns],
                    "data": base64.b64encode(data).decode(),
                }
            )
    finally:
        reader.close()
        server.drop_database(DATABASE)
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
    return events


def main() -> None:
    server = MariaDBServer.from_env()
    server.start()
    try:
        events = record(server)
    finally:
        server.close()
    OUT.write_text("[\n" + ",\n".join(json.dumps(e, ensure_ascii=False) for e in events) + "\n]\n")
    print(f"{len(events)} row events -> {OUT}")


if __name__ == "__main__":
    main()
