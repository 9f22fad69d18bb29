"""The row decoder on a real MariaDB binlog, under both ``binlog_row_metadata`` settings: the rows
of tables of every type (the value oracle's, and a binary key beside simple columns), read by the
engine's binlog reader and decoded with the definitions the schema history holds, are the values
mysql-replication gives for the same statements written with ``binlog_row_metadata=FULL`` - with
the server's default (``NO_LOG``) as with ``FULL``.

(Before the decoder took its definitions from the history: with ``NO_LOG`` unsigned maxima came as
-1, ENUM and SET values as None, and a binary value that is not UTF-8 stopped the stream.)
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.engine.sources.mysql.binlog import BinlogReader, RowEvent
from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet
from airflow_cdc.engine.sources.mysql.row_decoder import compile_table
from airflow_cdc.engine.sources.mysql.schema import read_tables
from airflow_cdc.engine.sources.mysql.server import check_server
from airflow_cdc.engine.sources.mysql.tracking import StartPoint
from tests.compat import mariadb_cases as cases
from tests.compat.record_row_events import SHAPES
from tests.requirements import require_module
from tests.unit.binlog_rows import librarys, same

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration
TABLES = (*cases.TABLES, "bin_key", "uuid_key")


def _write(server: Any, database: str, metadata: str) -> str:
    """The statements, written with ``metadata``; the GTID position before them."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
        cur.execute("select @@gtid_binlog_pos")
        start = str(cur.fetchone()[0])
    session = server.connect(database=database, init_command="SET sql_mode='', time_zone='+00:00'")
    with session, session.cursor() as cur:
        for statement in (*cases.SCHEMA, *SHAPES[:2], *cases.SNAPSHOT, *SHAPES[2:], *cases.STREAM[1], *cases.STREAM[2]):
            cur.execute(statement)
        cur.execute(cases.MARKER)
    return start


def _library_values(server: Any, database: str, start: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """mysql-replication's rows of every row event from ``start`` (written with FULL)."""
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    reader = server.binlog_reader(
        server_id=4848,
        auto_position=start,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[database],
        blocking=False,
    )
    out = []
    try:
        for event in reader:
            if event.table == "oracle_marker":
                break
            out.append((event.table, list(event.rows)))
    finally:
        reader.close()
    return out


def _our_values(server: Any, database: str, start: str) -> list[tuple[str, list[Any]]]:
    with server.connect() as conn:
        info = check_server(conn)
        tables = read_tables(conn, [(database, t) for t in TABLES])
    reader = BinlogReader(
        server.connection_params(),
        server_id=4849,
        start=StartPoint(MariaDbGtidSet.parse(start), "", 0),
        server=info,
        tables=lambda schema, _table: schema == database,
    )
    out: list[tuple[str, list[Any]]] = []
    try:
        while not out or out[-1][0] != "oracle_marker":
            for item in reader.read(500, 1.0):
                if isinstance(item, RowEvent):
                    table = tables.get((database, item.table))
                    rows = item.changes(compile_table(item.binlog_columns, table)) if table else []
                    out.append((item.table, rows))
    finally:
        reader.close()
    return out[:-1]


@pytest.fixture
def metadata_restored(mariadb_server: Any) -> Any:
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_row_metadata")
        before = cur.fetchone()[0]
    yield
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SET GLOBAL binlog_row_metadata = {before}")


@pytest.mark.parametrize("metadata", ["NO_LOG", "FULL"])
def test_a_real_binlog_decodes_as_the_library_reads_it_with_full_metadata(
    mariadb_server: Any, metadata: str, metadata_restored: Any
) -> None:
    expected_db, ours_db = mariadb_server.create_database(), mariadb_server.create_database()
    try:
        expected = _library_values(mariadb_server, expected_db, _write(mariadb_server, expected_db, "FULL"))
        ours = _our_values(mariadb_server, ours_db, _write(mariadb_server, ours_db, metadata))
        with mariadb_server.connect() as conn:
            columns = {key[1]: t.columns for key, t in read_tables(conn, [(ours_db, t) for t in TABLES]).items()}
    finally:
        mariadb_server.drop_database(expected_db)
        mariadb_server.drop_database(ours_db)
    assert [table for table, _ in ours] == [table for table, _ in expected]
    compared = 0
    for (table, rows), (_, library_rows) in zip(ours, expected, strict=True):
        assert len(rows) == len(library_rows), table
        for change, library_row in zip(rows, library_rows, strict=True):
            sides = (("before", "before_"), ("after", "after_")) if change.op == "u" else (
                (("after", ""),) if change.op == "c" else (("before", ""),)
            )  # fmt: skip
            for side, key in sides:
                values, reasons = library_row[f"{key}values"], library_row[f"{key}none_sources"]
                for column, value in zip(columns[table], getattr(change, side), strict=True):
                    wanted = librarys(column, values[column.name], reasons.get(column.name))
                    assert same(value, wanted), (table, column.name, value, wanted)
                    compared += 1
    assert compared > 300
