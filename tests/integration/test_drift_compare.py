"""The drift check on real servers: a source table and a target table (as the apply job keeps
it: other declared types, ``_cdc_position``), the target corrupted behind the pipeline's back;
the check names exactly the corrupted keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.drift import Drift, TableSide, compare, delete_extra, settle, snapshot_filter
from airflow_cdc.drift.dialects import MysqlDialect, PostgresDialect
from airflow_cdc.drift.errors import DriftError
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer

pytestmark = [pytest.mark.integration]

ROWS = 20_000
#: update, delete, insert behind the pipeline's back; and a NULL made a value.
CHANGED, DELETED, INSERTED, NULLED = [17, 9_001, 19_999], [2, 15_000], [ROWS + 5, 30_000], [4_242]


def _pg_tables(conn: Any) -> None:
    conn.execute(
        "create table public.orders (id int primary key, status text, amount numeric(10,2), "
        "at timestamptz, day date, paid boolean, blob bytea, note text)"
    )
    conn.execute(
        "insert into public.orders select g, case when g %% 3 = 0 then 'open' else 'done' end, g * 1.25, "
        "timestamptz '2026-01-01 00:00:00+00' + g * interval '1.5 second', date '2026-01-01' + g %% 30, g %% 2 = 0, "
        "decode(md5(g::text), 'hex'), case when g %% 7 = 0 then null else 'n' || g end from generate_series(1, %s) g",
        (ROWS,),
    )
    # The target as the apply job creates it from the captured schema: numeric without scale,
    # the position column, a session in another time zone writing the timestamps.
    conn.execute("create schema replica")
    conn.execute(
        "create table replica.orders (id bigint primary key, status varchar(20), amount numeric, at timestamptz, "
        'day date, paid boolean, blob bytea, note text, _cdc_position varchar(64) collate "C")'
    )
    conn.execute("set timezone = 'Asia/Kolkata'")
    conn.execute("insert into replica.orders select *, lpad('', 32, '0') from public.orders")


def _pg_corrupt(conn: Any) -> None:
    conn.execute("update replica.orders set status = 'tampered' where id = any(%s)", (CHANGED[:2],))
    conn.execute("update replica.orders set amount = amount + 0.01 where id = %s", (CHANGED[2],))
    conn.execute("delete from replica.orders where id = any(%s)", (DELETED,))
    conn.execute("insert into replica.orders (id, status) select unnest(%s::int[]), 'ghost'", (INSERTED,))
    conn.execute("update replica.orders set note = 'was null' where id = %s", (NULLED[0],))


@pytest.fixture
def pg_sides(pg_server: PostgresServer, pg_database: str) -> Iterator[tuple[TableSide, TableSide]]:
    with pg_server.connect(pg_database) as source, pg_server.connect(pg_database) as target:
        _pg_tables(source)
        dialect = PostgresDialect()
        yield TableSide(dialect, source, "public.orders"), TableSide(dialect, target, "replica.orders")


def _assert_exact(drift: Drift) -> None:
    assert drift.missing == DELETED
    assert drift.extra == INSERTED
    assert drift.different == sorted(CHANGED + NULLED)
    assert not drift.truncated
    assert all(any(r.low <= k <= r.high for r in drift.ranges) for k in drift.keys)


def test_postgres_no_difference_reads_each_side_once(pg_sides: tuple[TableSide, TableSide]) -> None:
    source, target = pg_sides
    drift = compare(source, target)
    assert not drift.found, drift.to_json()
    assert (drift.source_rows, drift.target_rows) == (ROWS, ROWS)
    # bounds (an index lookup) and one grouped scan per side.
    assert (source.queries, target.queries) == (2, 2)


def test_postgres_names_exactly_the_keys_corrupted_behind_the_pipeline(pg_sides: tuple[TableSide, TableSide]) -> None:
    source, target = pg_sides
    _pg_corrupt(target.conn)
    drift = compare(source, target)
    _assert_exact(drift)
    assert (drift.source_rows, drift.target_rows) == (ROWS, ROWS)  # -2 deleted +2 inserted
    assert all(r.size <= ROWS // 64 for r in drift.ranges)


def test_the_cap_reports_the_rest_as_ranges(pg_sides: tuple[TableSide, TableSide]) -> None:
    source, target = pg_sides
    _pg_corrupt(target.conn)
    drift = compare(source, target, max_keys=3)
    assert len(drift.keys) == 3
    assert drift.truncated
    assert snapshot_filter(drift, '"id"')  # the truncated ranges still go to a repair


def test_a_change_on_its_way_is_no_drift_once_the_target_passed_the_source_position(
    pg_sides: tuple[TableSide, TableSide],
) -> None:
    source, target = pg_sides
    _pg_corrupt(target.conn)
    drift = compare(source, target)
    source.conn.execute("update public.orders set status = 'moved' where id = 100")  # captured, not applied yet
    drift.different.append(100)

    def apply_job_catches_up(_: float) -> None:
        """The apply job writes the change, and one from after the check's position."""
        position = source.current_position()
        target.conn.execute(
            "update replica.orders set status = 'moved', _cdc_position = %s where id = 100", (f"{0:016x}{position}",)
        )

    settled = settle(source, target, drift, timeout=30, sleep=apply_job_catches_up)
    assert settled.settled
    _assert_exact(settled)


def test_settle_without_progress_reports_unsettled_after_the_timeout(pg_sides: tuple[TableSide, TableSide]) -> None:
    source, target = pg_sides
    _pg_corrupt(target.conn)
    drift = settle(source, target, compare(source, target), timeout=0.3, interval=0.1)
    assert not drift.settled
    _assert_exact(drift)


def test_extra_rows_are_deleted_unless_the_apply_wrote_them_after(pg_sides: tuple[TableSide, TableSide]) -> None:
    source, target = pg_sides
    _pg_corrupt(target.conn)
    # A key the apply job wrote after the check's position (the source has it by then): kept.
    target.conn.execute("insert into replica.orders (id, _cdc_position) values (40000, repeat('f', 32))")
    drift = compare(source, target)
    assert drift.extra == [*INSERTED, 40000]
    assert delete_extra(source, target, drift.extra) == INSERTED
    assert compare(source, target).extra == [40000]
    text = snapshot_filter(drift, '"id"')
    assert text == '"id" in (2, 17, 4242, 9001, 15000, 19999)'
    assert source.conn.execute(f"select count(*) from public.orders where {text}").fetchone()[0] == 6


# -- MariaDB ---------------------------------------------------------------------------------------
@pytest.fixture
def maria_sides(mariadb_server: MariaDBServer, mariadb_database: str) -> Iterator[tuple[TableSide, TableSide]]:
    replica = f"{mariadb_database}_replica"
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"create database `{replica}`")
    url = f"{mariadb_server.url}/{mariadb_database}"
    source_conn, target_conn = MysqlDialect().connect(url), MysqlDialect().connect(url)
    try:
        with source_conn.cursor() as cur:
            cur.execute(
                f"create table `{mariadb_database}`.orders (id int primary key, status varchar(20), "
                "amount decimal(10,2), at datetime(3), ts timestamp(6) null, blob_ varbinary(32), note text)"
            )
            cur.execute(
                f"insert into `{mariadb_database}`.orders select seq, if(seq % 3 = 0, 'open', 'done'), seq * 1.25, "
                "timestamp '2026-01-01 00:00:00' + interval seq * 1500 microsecond, "
                "timestamp '2026-01-01 00:00:00' + interval seq second, unhex(md5(seq)), "
                f"if(seq % 7 = 0, null, concat('n', seq)) from seq_1_to_{ROWS}"
            )
            cur.execute(
                f"create table `{replica}`.orders (id bigint primary key, status varchar(40), amount decimal(20,4), "
                "at datetime(6), ts timestamp(6) null, blob_ varbinary(32), note text, _cdc_position varchar(64))"
            )
            cur.execute(f"insert into `{replica}`.orders select *, repeat('0', 32) from `{mariadb_database}`.orders")
        yield (
            TableSide(MysqlDialect(), source_conn, f"{mariadb_database}.orders"),
            TableSide(MysqlDialect(), target_conn, f"{replica}.orders"),
        )
    finally:
        source_conn.close()
        target_conn.close()
        with mariadb_server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"drop database if exists `{replica}`")


def test_mariadb_names_exactly_the_keys_corrupted_behind_the_pipeline(
    maria_sides: tuple[TableSide, TableSide],
) -> None:
    source, target = maria_sides
    assert not compare(source, target).found
    table = target.dialect.table(target.table)
    with target.conn.cursor() as cur:
        cur.execute(f"update {table} set status = 'tampered' where id in (%s, %s)", CHANGED[:2])
        cur.execute(f"update {table} set amount = amount + 0.01 where id = %s", (CHANGED[2],))
        cur.execute(f"delete from {table} where id in (%s, %s)", DELETED)
        cur.execute(f"insert into {table} (id, status) values (%s, 'ghost'), (%s, 'ghost')", INSERTED)
        cur.execute(f"update {table} set note = 'was null' where id = %s", NULLED)
    drift = compare(source, target)
    _assert_exact(drift)
    assert delete_extra(source, target, drift.extra) == INSERTED


@pytest.mark.parametrize(
    ("ddl", "said"),
    [
        ("create table public.lines (order_id int, line int, v text, primary key (order_id, line))",
         "public.lines has a composite primary key (order_id, line)"),
        ("create table public.lines (code text primary key, v text)", "public.lines's key code is text"),
        ("create table public.lines (id int, v text)", "public.lines has no primary key"),
    ],
)  # fmt: skip
def test_a_table_the_check_cannot_range_over_is_refused_naming_its_key_and_what_to_do(
    pg_server: PostgresServer, pg_database: str, ddl: str, said: str
) -> None:
    with pg_server.connect(pg_database) as conn:
        conn.execute(ddl)
        conn.execute("create table public.lines_replica (like public.lines)")
        dialect = PostgresDialect()
        with pytest.raises(DriftError) as refused:
            compare(TableSide(dialect, conn, "public.lines"), TableSide(dialect, conn, "public.lines_replica"))
    assert str(refused.value).startswith(said), refused.value
    assert "single integer key column" in str(refused.value) and "execute-snapshot" in str(refused.value)
