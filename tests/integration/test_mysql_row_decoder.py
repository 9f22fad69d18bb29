"""The fast row decoder against mysql-replication itself, on a real MariaDB binlog: for every row
event of a table of every type it decodes, edge values included, it must yield exactly the
library's values (and the binlog adapter must take its path); for a table it must leave to the
library (a text column) or an event it must leave (a zero date), it must say so (None)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pymysqlreplication")

from pymysqlreplication import BinLogStreamReader, row_event

from airflow_cdc.engine.sources.mysql import binlog
from airflow_cdc.engine.sources.mysql.row_decoder import EventRows

pytestmark = pytest.mark.integration

WIDE = """create table wide (
    id int primary key, t tinyint, tu tinyint unsigned, s smallint, su smallint unsigned,
    m mediumint, mu mediumint unsigned, i int, iu int unsigned, b bigint, bu bigint unsigned,
    f float, d double, y year, d1 decimal(10,2), d2 decimal(65,30), d3 decimal(2,2), d4 decimal(19,0),
    d5 decimal(20,10), c char(10), v varchar(20), long_v varchar(300), l1 varchar(10) character set latin1,
    dt date, dt0 datetime, dt3 datetime(3), dt6 datetime(6), ts0 timestamp null, ts1 timestamp(1) null,
    ts4 timestamp(4) null, ts6 timestamp(6) null
)"""
ROWS = [
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808, "
    "18446744073709551615, -1.5, 2.2250738585072014e-308, 2155, -12345678.91, "
    "-12345678901234567890123456789012345.123456789012345678901234567891, -0.99, -9999999999999999999, "
    "-0.0000000001, 'abc', 'héllo ✓ 😀', repeat('x', 300), concat('a', x'81', 'é'), '2024-02-29', "
    "'1000-01-01 00:00:00', '2024-05-06 07:08:09.123', '9999-12-31 23:59:59.999999', '1970-01-01 00:00:01', "
    "'2038-01-19 03:14:07.9', '2001-02-03 04:05:06.0001', '2024-05-06 07:08:09.000001')",
    "(2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0, 3.4e38, -1e308, 1901, 0, 0, 0, 0, "
    "0, '', '', '', '', '0001-01-01', '2024-01-01 00:00:00', '2024-01-01 00:00:00.000', "
    "'2024-01-01 00:00:00.000000', '2024-01-01 00:00:00', '2024-01-01 00:00:00.0', '2024-01-01 00:00:00.0000', "
    "'2024-01-01 00:00:00.000000')",
    "(3" + ", null" * 30 + ")",
    "(4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.1, 0.1, 2000, 12345678.91, 1.5, 0.5, 1, 1234567890.0123456789, "
    "'z', 'z', 'z', 'z', '2024-12-31', '2024-12-31 23:59:59', '2024-12-31 23:59:59.999', "
    "'2024-12-31 23:59:59.5', '2024-12-31 23:59:59', '2024-12-31 23:59:59.1', '2024-12-31 23:59:59.0999', "
    "'2024-12-31 23:59:59.999999')",
]


def run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def row_events(server: Any, gtids: str, last_table: str) -> list[Any]:
    """Every row event from ``gtids`` up to and including the first on ``last_table``, decoded
    by neither side yet."""
    binlog._library()  # the library as the adapter sets it up (its latin1 codec)
    reader = BinLogStreamReader(
        connection_settings=server.connection_params(charset="utf8mb4"),
        server_id=4343,
        blocking=True,
        is_mariadb=True,
        auto_position=gtids,
        slave_heartbeat=0.5,
        only_events=[
            row_event.TableMapEvent,
            row_event.WriteRowsEvent,
            row_event.UpdateRowsEvent,
            row_event.DeleteRowsEvent,
        ],
    )
    events = []
    try:
        for event in reader:
            if isinstance(event, row_event.TableMapEvent):
                continue
            events.append(event)
            if event.table == last_table:
                return events
    finally:
        reader.close()
    raise AssertionError("the binlog ended before the last table's event")


def library_rows(event: Any) -> list[tuple[tuple[Any, ...], ...]]:
    if isinstance(event, row_event.UpdateRowsEvent):
        return [(tuple(r["before_values"].values()), tuple(r["after_values"].values())) for r in event.rows]
    return [(tuple(r["values"].values()),) for r in event.rows]


def test_the_fast_decoder_yields_the_librarys_values_and_leaves_it_the_rest(
    mariadb_server: Any, mariadb_database: str
) -> None:
    conn = mariadb_server.connect(database=mariadb_database, init_command="SET sql_mode='', time_zone='+00:00'")
    with conn.cursor() as cur:
        cur.execute("select @@gtid_binlog_pos")
        gtids = cur.fetchone()[0]
    run(
        conn,
        WIDE,
        "create table texts (id int primary key, body text)",
        "create table dates (id int primary key, d date, dt datetime)",
        "create table marker (id int primary key)",
        f"insert into wide values {', '.join(ROWS)}",
        "update wide set v = concat(v, '!'), d1 = -d1, ts6 = '2030-01-01 00:00:00.5' where id in (1, 2, 4)",
        "delete from wide where id in (1, 3)",
        "insert into texts values (1, 'a text column: the library decodes the event')",
        "insert into dates values (1, '0000-00-00', '0000-00-00 00:00:00'), (2, '2024-01-01', '2024-01-01 00:00:00')",
        "insert into marker values (1)",
    )
    events = row_events(mariadb_server, gtids, "marker")
    fast = EventRows(row_event)
    by_table: dict[str, list[Any]] = {}
    for event in events:
        if event.schema == mariadb_database:
            by_table.setdefault(event.table, []).append(event)

    wide_rows = 0
    for event in by_table["wide"]:
        decoded = fast.rows(event)
        assert decoded is not None, f"the fast decoder left a {type(event).__name__} of wide to the library"
        names, rows = decoded
        assert rows == library_rows(event)
        assert names == tuple(c.name for c in event.columns)
        wide_rows += len(rows)
    assert wide_rows == 4 + 3 + 2
    assert all(fast.rows(event) is None for event in by_table["texts"])
    assert [fast.rows(event) for event in by_table["dates"]] == [None]  # a zero date in the event
    assert library_rows(by_table["dates"][0])[0] == ((1, None, None),)  # the library's reason-carrying Nones
