"""The binlog adapter on a real MariaDB: every operation as plain row changes with positions,
DDL, resuming exactly after a position (inside a transaction too), MariaDB resumed by GTID
(never replayed from the first binlog), reconnects, purged binlogs and the server checks.

Every reader starts at a position taken at the test's start: the session server's binlog holds
other tests' transactions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.sources.mysql.binlog import (
    BinlogPurgedError,
    BinlogReader,
    Position,
    RowChange,
    RowEvent,
    SchemaChange,
)
from airflow_cdc.engine.sources.mysql.ddl import Table
from airflow_cdc.engine.sources.mysql.ddl import apply as apply_ddl
from airflow_cdc.engine.sources.mysql.positions import MariaDbGtidSet
from airflow_cdc.engine.sources.mysql.row_decoder import compile_table
from airflow_cdc.engine.sources.mysql.server import (
    ServerSetupError,
    check_available,
    check_server,
    current_position,
)
from airflow_cdc.engine.sources.mysql.tracking import StartPoint
from airflow_cdc.engine.testing import wait_until
from tests.requirements import require_module

require_module("pymysqlreplication", extra="mysql")

pytestmark = pytest.mark.integration
SERVER_ID = 4242


#: The table every test reads; its rows are decoded with this definition and the DDL read after it.
DEFINITION = "create table t (id int primary key, v varchar(20), n int)"


@pytest.fixture
def db(mariadb_server: Any, mariadb_database: str) -> Any:
    conn = mariadb_server.connect(database=mariadb_database)
    with conn.cursor() as cur:
        cur.execute(DEFINITION)
    yield conn
    conn.close()


def run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def reader_at(server: Any, database: str, start: StartPoint) -> BinlogReader:
    with server.connect() as conn:
        info = check_server(conn)
    return BinlogReader(
        server.connection_params(),
        server_id=SERVER_ID,
        start=start,
        server=info,
        tables=lambda schema, table: schema == database,
    )


def now(server: Any) -> StartPoint:
    with server.connect() as conn:
        return current_position(conn, check_server(conn))


def read_until(reader: BinlogReader, done: Callable[[list[Any]], bool], timeout: float = 20) -> list[Any]:
    items: list[Any] = []

    def more() -> bool:
        items.extend(reader.read(100, 0.2))
        return done(items)

    wait_until(more, timeout, "binlog items", interval=0)
    return items


def commits(n: int) -> Callable[[list[Any]], bool]:
    return lambda items: sum(isinstance(i, Position) and i.kind == "commit" for i in items) >= n


def changes_of(items: list[Any]) -> list[RowChange]:
    """The row events' rows, decoded as the connector decodes them: with the definition of
    ``t`` as the DDL read before each event left it."""
    tables: dict[tuple[str, str], Table] = {}
    out: list[RowChange] = []
    for item in items:
        if isinstance(item, RowEvent):
            key = (item.database, item.table)
            if key not in tables:
                found = apply_ddl(DEFINITION, item.database, {})
                tables.update(found.tables)  # type: ignore[union-attr]
            out.extend(item.changes(compile_table(item.binlog_columns, tables[key])))
        elif isinstance(item, SchemaChange):
            changed = apply_ddl(item.ddl, item.database, tables)
            tables.update(getattr(changed, "tables", {}))
    return out


def rows(items: list[Any]) -> list[tuple[str, Any, Any]]:
    return [(c.op, c.before, c.after) for c in changes_of(items)]


def test_every_operation_arrives_as_row_changes_with_advancing_gtid_offsets(mariadb_server, mariadb_database, db):
    start = now(mariadb_server)
    run(db, "insert into t values (1, 'a', 10), (2, 'b', 20)")
    run(db, "update t set v = 'B' where id = 2")
    run(db, "delete from t where id = 1")
    run(db, "update t set id = 3 where id = 2")
    reader = reader_at(mariadb_server, mariadb_database, start)
    try:
        items = read_until(reader, commits(4))
    finally:
        reader.close()
    assert rows(items) == [
        ("c", None, (1, "a", 10)),
        ("c", None, (2, "b", 20)),
        ("u", (2, "b", 20), (2, "B", 20)),
        ("d", (1, "a", 10), None),
        ("u", (2, "B", 20), (3, "B", 20)),
    ]
    changes = changes_of(items)
    assert {(c.database, c.table, c.columns) for c in changes} == {(mariadb_database, "t", ("id", "v", "n"))}
    first, second = changes[0], changes[1]
    # Inside the two-row insert: event 1 (the table map) done, then one row, then both.
    assert (first.offset.get("event"), first.offset["row"]) == (1, 1)
    assert (second.offset.get("event"), second.offset["row"]) == (1, 2)
    assert first.offset["gtids"] == str(start.gtids)
    assert first.source.gtid is not None and first.source.server_id == mariadb_server.server_id
    commit_offsets = [i.offset for i in items if isinstance(i, Position) and i.kind == "commit"]
    sequences = [MariaDbGtidSet.parse(o["gtids"]).domains[0][1] for o in commit_offsets]
    assert sequences == list(range(sequences[0], sequences[0] + 4))
    assert all("event" not in o and "row" not in o for o in commit_offsets)


def test_a_resume_inside_a_transaction_delivers_exactly_the_rest(mariadb_server, mariadb_database, db):
    start = now(mariadb_server)
    run(db, "begin", "insert into t values (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)", "update t set n = 0", "commit")
    run(db, "insert into t values (4, 'd', 4)")
    reader = reader_at(mariadb_server, mariadb_database, start)
    try:
        items = read_until(reader, commits(2))
    finally:
        reader.close()
    changes = changes_of(items)
    assert len(changes) == 7
    for cut in range(len(changes)):
        resumed = reader_at(mariadb_server, mariadb_database, StartPoint.from_offset(changes[cut].offset))
        try:
            # The first six changes are the first transaction's: it is read again, then the second.
            again = read_until(resumed, commits(2 if cut < 6 else 1))
        finally:
            resumed.close()
        expected = [(c.op, c.before, c.after) for c in changes[cut + 1 :]]
        assert rows(again) == expected, f"resumed after change {cut}"


def test_mariadb_resumes_by_gtid_never_from_the_first_binlog(mariadb_server, mariadb_database, db):
    """mysql-replication 1.0.x with is_mariadb=True ignores log_file/log_pos and reads from the
    first binlog: this test fails if a resume replays what came before the position."""
    run(db, "insert into t values (1, 'before', 0)")
    run(db, "flush binary logs")  # the position lies in a later binlog than the earlier change
    start = now(mariadb_server)
    run(db, "insert into t values (2, 'after', 0)")
    for point in (start, StartPoint(None, start.file, start.pos)):  # by GTID, and by file/pos alone
        reader = reader_at(mariadb_server, mariadb_database, point)
        try:
            items = read_until(reader, lambda items: any(isinstance(i, RowEvent) for i in items))
        finally:
            reader.close()
        assert rows(items)[0] == ("c", None, (2, "after", 0)), point


def test_ddl_arrives_in_order_as_a_schema_change_with_its_own_position(mariadb_server, mariadb_database, db):
    start = now(mariadb_server)
    run(db, "insert into t values (1, 'a', 1)", "alter table t add column w int", "insert into t values (2, 'b', 2, 7)")
    reader = reader_at(mariadb_server, mariadb_database, start)
    try:
        items = read_until(reader, commits(2) and (lambda items: len(rows(items)) >= 2))
    finally:
        reader.close()
    kinds = [type(i).__name__ for i in items if not isinstance(i, Position)]
    assert kinds == ["RowEvent", "SchemaChange", "RowEvent"]
    ddl = next(i for i in items if isinstance(i, SchemaChange))
    assert ddl.database == mariadb_database and "add column w" in ddl.ddl
    assert ddl.offset["gtids"] != start.gtids and "event" not in ddl.offset
    assert rows(items)[1] == ("c", None, (2, "b", 2, 7))


def test_a_killed_stream_fails_retriably_and_the_next_read_goes_on_without_repeats(
    mariadb_server, mariadb_database, db
):
    start = now(mariadb_server)
    run(db, "insert into t values (1, 'a', 1)")
    reader = reader_at(mariadb_server, mariadb_database, start)
    try:
        first = read_until(reader, commits(1))
        with mariadb_server.connect() as admin, admin.cursor() as cur:
            cur.execute("select id from information_schema.processlist where command like 'Binlog Dump%'")
            for (thread,) in cur.fetchall():
                cur.execute(f"kill {thread}")
        run(db, "insert into t values (2, 'b', 2)")
        # Items read before the loss are handed over; the read after them fails.
        before_failure: list[Any] = []
        with pytest.raises(RetriableError):
            wait_until(lambda: before_failure.extend(reader.read(100, 0.2)), 20, "the lost stream noticed", interval=0)
        rest = read_until(reader, lambda items: bool(rows(items)))
    finally:
        reader.close()
    assert rows(first) + rows(before_failure) + rows(rest) == [("c", None, (1, "a", 1)), ("c", None, (2, "b", 2))]


def test_a_position_in_purged_binlogs_is_an_error_naming_the_new_snapshot(mariadb_server, mariadb_database, db):
    old = now(mariadb_server)
    run(db, "insert into t values (1, 'a', 1)", "flush binary logs")
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute("show master status")
        newest = cur.fetchone()[0]

        def purged() -> bool:
            # MariaDB keeps a binlog until InnoDB's checkpoint has passed it: purge until it went.
            cur.execute(f"purge binary logs to '{newest}'")
            cur.execute("show binary logs")
            return old.file not in {row[0] for row in cur.fetchall()}

        wait_until(purged, 20, "old binlogs purged", interval=0.05)
        with pytest.raises(BinlogPurgedError, match="new snapshot"):
            check_available(conn, check_server(conn), old)
        with pytest.raises(BinlogPurgedError, match="new snapshot"):
            check_available(conn, check_server(conn), StartPoint(None, old.file, old.pos))
        check_available(conn, check_server(conn), current_position(conn, check_server(conn)))


def test_a_user_without_replication_privileges_is_told_what_to_grant(mariadb_server, mariadb_database):
    user = f"u_{mariadb_database[-8:]}"
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create user '{user}'@'%' identified by 'pw'")
        cur.execute(f"grant select on `{mariadb_database}`.* to '{user}'@'%'")
    try:
        with mariadb_server.connect(user=user, password="pw") as conn, pytest.raises(ServerSetupError) as error:
            check_server(conn)
        assert "REPLICATION SLAVE" in str(error.value) and "BINLOG MONITOR" in str(error.value)
        assert "GRANT" in str(error.value)
    finally:
        with mariadb_server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"drop user '{user}'@'%'")
