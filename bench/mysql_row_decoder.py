"""Row decoding: the engine's decoder against mysql-replication's on the same row events (issue 23).

A throwaway MariaDB (``binlog_row_metadata=FULL``, so that the library's table maps carry what it
needs to decode right) writes ``--rows`` rows, 1000 per transaction, into two tables: ``wide``, of
every family of column types (integers signed and unsigned, decimal, float, double, char, varchar,
text, binary, varbinary, blob, date, datetime(6), timestamp(3), time(3), year, enum, set, bit,
json), and ``plain``, of the common ones. Their row events are recorded once (table map columns
and row bytes), then decoded over and over by each side, in alternating rounds:

- baseline: mysql-replication parses each event from its bytes (the library's own
  ``BinLogPacketWrapper``) and decodes its rows (``event.rows``) with the FULL table map;
- ours: ``row_decoder.compile_table`` with the table map *without* optional metadata (what the
  server's default ``NO_LOG`` writes) and the definitions information_schema gives, then
  ``RowDecoder.decode`` - what the engine does per event.

Both sides' values are compared, row by row, before anything is timed (the library's known
misreadings named in ``tests/unit/binlog_rows.py`` aside); a difference exits 1. The last line is
one JSON object: ``ratio`` = our rows/s / the library's, per table and overall.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine.sources.mysql.binlog import BinlogReader, RowEvent
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet
from airflow_cdc.engine.sources.mysql.row_decoder import compile_table
from airflow_cdc.engine.sources.mysql.schema import read_tables
from airflow_cdc.engine.sources.mysql.server import check_server
from airflow_cdc.engine.sources.mysql.tracking import StartPoint
from airflow_cdc.local.mariadb import MariaDBServer
from tests.unit.binlog_rows import library_column, library_rows, librarys, same

DATABASE = "bench_decode"
TABLES = {
    "wide": """create table wide (
        id int primary key, ti tinyint, tu tinyint unsigned, si smallint, mi mediumint unsigned, i int,
        iu int unsigned, bi bigint, bu bigint unsigned, d decimal(12,2), f float, db double, c char(8),
        v varchar(64), t text, b binary(8), vb varbinary(32), bl blob, dt datetime(6), ts timestamp(3) null,
        tm time(3), y year, da date, e enum('new','paid','gone'), s set('a','b','c'), bt bit(12), j json)""",
    "plain": """create table plain (
        id int primary key, customer varchar(64), amount decimal(10,2), status varchar(16), created datetime(6))""",
}
INSERTS = {
    "wide": "insert into wide select seq, seq % 128, seq % 256, seq % 30000, seq, -seq, seq, seq * 1000000, "
    "seq * 3, seq * 1.25, seq / 7, seq / 3, concat('c', seq % 100), concat('customer-', seq), "
    "repeat('text ', seq % 20), unhex(lpad(hex(seq), 16, '0')), unhex(hex(seq * 7)), repeat(x'ff00', seq % 40), "
    "'2024-05-06 07:08:09.123456', '2024-05-06 07:08:09.5', sec_to_time(cast(seq % 86400 as signed) - 43200), "
    "1901 + seq % 250, "
    "'2024-02-29', elt(1 + seq % 3, 'new', 'paid', 'gone'), elt(1 + seq % 4, '', 'a', 'a,b', 'a,b,c'), seq % 4096, "
    "json_object('k', seq, 'v', concat('x', seq)) from seq_{start}_to_{end}",
    "plain": "insert into plain select seq, concat('customer-', seq), seq * 1.25, 'new', '2024-05-06 07:08:09.123456' "
    "from seq_{start}_to_{end}",
}
_BINLOG_KEYS = (
    "type", "max_length", "length_size", "precision", "decimals", "fsp", "size", "bits", "bytes",
    "name", "unsigned", "character_set_name", "enum_values", "set_values",
)  # fmt: skip
_BARE = ("type", "max_length", "length_size", "precision", "decimals", "fsp", "size", "bits", "bytes")


def record(server: MariaDBServer, rows: int) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Table]]:
    """Each table's write events (table map columns, row bytes), read by the engine's binlog
    reader, and its definition."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL binlog_row_metadata = FULL")
        cur.execute(f"create database {DATABASE} character set utf8mb4")
        info = check_server(conn)
        cur.execute("select @@gtid_binlog_pos")
        start = StartPoint(MariaDbGtidSet.parse(str(cur.fetchone()[0])), "", 0)
    with server.connect(database=DATABASE) as conn, conn.cursor() as cur:
        for name, ddl in TABLES.items():
            cur.execute(ddl)
            for first in range(1, rows + 1, 1000):
                cur.execute(INSERTS[name].format(start=first, end=min(first + 999, rows)))
        cur.execute("create table marker (id int primary key)")
        cur.execute("insert into marker values (1)")
        tables = {key[1]: table for key, table in read_tables(conn, [(DATABASE, t) for t in TABLES]).items()}
    reader = BinlogReader(
        server.connection_params(), server_id=91_001, start=start, server=info, tables=lambda db, _t: db == DATABASE
    )
    events: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    try:
        while True:
            items = [i for i in reader.read(1000, 1.0) if isinstance(i, RowEvent)]
            if any(i.table == "marker" for i in items):
                items = items[: [i.table for i in items].index("marker")]
                done = True
            else:
                done = False
            for item in items:
                binlog = [{k: v for k, v in vars(c).items() if k in _BINLOG_KEYS} for c in item.binlog_columns]
                events[item.table].append({"binlog": binlog, "data": item.data})
            if done:
                break
    finally:
        reader.close()
    return events, tables


def library_side(events: list[dict[str, Any]]) -> tuple[float, list[dict[str, Any]]]:
    started, out = time.perf_counter(), []
    for event in events:
        out.extend(library_rows(event["full"], event["data"]))
    return time.perf_counter() - started, out


def our_side(events: list[dict[str, Any]], table: Table) -> tuple[float, list[Any]]:
    started, out = time.perf_counter(), []
    for event in events:
        out.extend(compile_table(event["bare"], table).decode(event["data"], 1))
    return time.perf_counter() - started, out


def check(table: Table, ours: list[Any], theirs: list[dict[str, Any]]) -> list[str]:
    problems = []
    if len(ours) != len(theirs):
        return [f"{table.name}: {len(ours)} rows decoded here, {len(theirs)} by the library"]
    for mine, their in zip(ours, theirs, strict=True):
        values, reasons = their["values"], their["none_sources"]
        for column, value in zip(table.columns, mine[0], strict=True):
            expected = librarys(column, values[column.name], reasons.get(column.name))
            if not same(value, expected):
                problems.append(f"{table.name}.{column.name}: {value!r} here, {expected!r} by the library")
                break
        if len(problems) > 5:
            break
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="rows per table")
    parser.add_argument("--quick", action="store_true", help="20k rows per table")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = 20_000 if args.quick else args.rows
    server = MariaDBServer()
    server.start()
    try:
        events, tables = record(server, rows)
    finally:
        server.close()
    result: dict[str, Any] = {"benchmark": "mysql_row_decoder", "rows_per_table": rows, "problems": []}
    ours_total = theirs_total = 0.0
    for name, table_events in events.items():
        for event in table_events:
            event["full"] = [library_column(**b) for b in event["binlog"]]
            event["bare"] = [SimpleNamespace(**{k: v for k, v in b.items() if k in _BARE}) for b in event["binlog"]]
        table = tables[name]
        _, theirs = library_side(table_events)
        _, ours = our_side(table_events, table)
        result["problems"] += check(table, ours, theirs)
        mine, library = [], []
        for _ in range(args.rounds):  # alternating: machine noise hits both alike
            library.append(library_side(table_events)[0])
            mine.append(our_side(table_events, table)[0])
        ours_s, theirs_s = statistics.median(mine), statistics.median(library)
        ours_total, theirs_total = ours_total + ours_s, theirs_total + theirs_s
        result[name] = {
            "rows_per_s": round(len(ours) / ours_s),
            "baseline_rows_per_s": round(len(theirs) / theirs_s),
            "ratio": round(theirs_s / ours_s, 2),
            "columns": len(table.columns),
        }
        print(
            f"{name} ({len(table.columns)} columns, {len(ours)} rows): ours {len(ours) / ours_s:,.0f} rows/s, "
            f"mysql-replication {len(theirs) / theirs_s:,.0f} rows/s (medians of {args.rounds})",
            file=sys.stderr,
        )
    result["ratio"] = round(theirs_total / ours_total, 2)
    result["baseline"] = "mysql-replication decoding the same row events with full row metadata"
    print(json.dumps(result))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
