"""The PostgreSQL target's COPY path (staging table, set-based upsert and delete) at its default
threshold, against a real server: which path a group takes, and its semantics on large groups
(the guard, a replay, unavailable columns of NOT NULL columns, TRUNCATE then a key again).

The shared semantics run on both paths in ``test_sql_targets.py`` (its ``postgresql-copy``
target COPYs every group); every PostgreSQL type's round trip too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.spark.frames import UNAVAILABLE_PLACEHOLDER
from airflow_cdc.spark.targets.sql import SqlTargetSettings, TargetError, apply_changes
from tests.integration.spark.test_sql_targets import (
    Target,
    _fresh_catalog,  # noqa: F401 (an autouse fixture)
    delete,
    pg_url,
    pos,
    truncate,
    upsert,
)

pytestmark = pytest.mark.integration

N = 2500  # above the default copy_min_rows
DEFAULT_COPY_MIN = SqlTargetSettings("postgresql://h/db").copy_min_rows


@pytest.fixture
def pg_target(pg_server: Any, pg_database: str) -> Iterator[Target]:
    with pg_server.connect(pg_database) as conn:

        def run(statement: str) -> list[tuple[Any, ...]]:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

        yield Target("postgresql", pg_url(pg_server, pg_database), run, "public")


def _log_statements(target: Target) -> None:
    """Record every statement that writes to t (a statement trigger sees the client's query)."""
    target.execute("create table log (query text)")
    target.execute(
        "create function log_query() returns trigger language plpgsql as "
        "$$ begin insert into log values (current_query()); return null; end $$"
    )
    for event in ("insert", "update", "delete"):
        target.execute(f"create trigger log_{event} after {event} on t for each statement execute function log_query()")


def test_large_groups_go_by_copy_and_small_ones_by_statements(pg_target: Target):
    assert DEFAULT_COPY_MIN is not None and N > DEFAULT_COPY_MIN
    pg_target.execute("create table t (id int primary key, v varchar(20), n int)")
    _log_statements(pg_target)
    large = [upsert("t", i, "c", id=i, v=f"v{i}", n=i) for i in range(N)]
    large += [delete("t", N + i, id=i) for i in range(DEFAULT_COPY_MIN)]  # another segment: the keys repeat
    counts = pg_target.apply(large)
    assert counts == {"upserted": N, "deleted": DEFAULT_COPY_MIN, "skipped_older": 0, "truncated": 0}
    # (an INSERT ... ON CONFLICT DO UPDATE fires the insert and the update triggers)
    queries = {q for (q,) in pg_target.execute("select query from log")}
    assert len(queries) == 2 and all("_cdc_stage_" in q and "VALUES" not in q for q in queries), queries
    pg_target.execute("delete from log")
    pg_target.apply([upsert("t", 10 * N, id=1, v="small", n=1), delete("t", 10 * N, id=2)])
    queries = {q for (q,) in pg_target.execute("select query from log")}
    assert len(queries) == 2 and all("_cdc_stage_" not in q and "VALUES" in q for q in queries), queries
    assert pg_target.execute("select count(*), min(id) from t") == [(N - DEFAULT_COPY_MIN + 1, 1)]


def test_large_groups_keep_the_guard_a_replay_unavailable_columns_and_truncate_order(pg_target: Target):
    pg_target.execute("create table t (id int primary key, v varchar(20) not null, big text, n int)")
    first = [upsert("t", 10 + i, "c", id=i, v=f"a{i}", big=f"big{i}", n=i) for i in range(N)]
    pg_target.apply(first)
    # Newer changes, half of them with `big` unchanged and unavailable (their own group and
    # statement), plus deletes; then the same batch replayed.
    second: list[Any] = []
    for i in range(N):
        if i % 10 == 0:
            second.append(delete("t", 10 * N + i, id=i))
        elif i % 2:
            second.append(
                upsert("t", 10 * N + i, id=i, v=f"b{i}", big=UNAVAILABLE_PLACEHOLDER, n=-i, unavailable=["big"])
            )
        else:
            second.append(upsert("t", 10 * N + i, id=i, v=f"b{i}", big=f"B{i}", n=-i))
    counts = pg_target.apply(second)
    assert counts == {"upserted": N - N // 10, "deleted": N // 10, "skipped_older": 0, "truncated": 0}
    expected = [(i, f"b{i}", f"big{i}" if i % 2 else f"B{i}", -i, pos(10 * N + i)) for i in range(N) if i % 10]
    columns = "id, v, big, n, _cdc_position"
    assert pg_target.rows(columns=columns) == expected
    # A replay: the same positions apply again (not older), to the same rows; nothing to delete.
    counts = pg_target.apply(second)
    assert counts == {"upserted": N - N // 10, "deleted": 0, "skipped_older": 0, "truncated": 0}
    assert pg_target.rows(columns=columns) == expected
    # Older changes than the stored ones change nothing: the first batch again (only the
    # deleted keys come back, there being no tombstone) and deletes older than the rows.
    counts = pg_target.apply(first + [delete("t", 5, id=i) for i in range(N) if i % 10])
    assert counts["upserted"] == N // 10 and counts["skipped_older"] == N - N // 10 and counts["deleted"] == 0
    assert [r for r in pg_target.rows(columns=columns) if r[0] % 10] == expected
    # TRUNCATE then the same keys again, in one call: what follows the TRUNCATE stays.
    after = [upsert("t", 30 * N + i, "c", id=i, v=f"c{i}", big="x", n=i) for i in range(N)]
    counts = pg_target.apply([upsert("t", 20 * N, id=0, v="gone", big="g", n=0), truncate("t", 20 * N + 1), *after])
    assert counts["truncated"] == N and counts["upserted"] == N + 1
    assert pg_target.rows(columns=columns) == [(i, f"c{i}", "x", i, pos(30 * N + i)) for i in range(N)]


def test_a_value_the_target_refuses_in_a_copy_names_the_column(pg_target: Target):
    pg_target.execute("create table t (id int primary key, v varchar(3), n int)")
    changes = [upsert("t", i, "c", id=i, v="ok", n=i) for i in range(N)]
    changes[N // 2] = upsert("t", N // 2, "c", id=N // 2, v="too long", n=0)
    with pytest.raises(Exception, match=r"column v of public\.t .*too long for type character varying\(3\)"):
        pg_target.apply(changes)
    assert pg_target.execute("select count(*) from t") == [(0,)]


def test_two_source_tables_into_one_target_table_in_one_call(pg_target: Target):
    pg_target.execute("create table t (id int primary key, v varchar(20), n int)")
    changes = [upsert("a.t", i, "c", id=i, v="a", n=i) for i in range(N)]
    changes += [upsert("b.t", N + i, id=i, v="b", n=-i) for i in range(N)]
    counts = pg_target.apply(changes, tables={"a.t": "t", "b.t": "t"})
    assert counts["upserted"] == 2 * N
    assert pg_target.rows() == [(i, "b", -i) for i in range(N)]


def test_a_user_who_may_not_create_temporary_tables_is_told_the_grant(pg_server: Any, pg_target: Target):
    database = pg_target.url.rsplit("/", 1)[1]
    pg_target.execute("create table t (id int primary key, v varchar(20), n int, _cdc_position varchar(64))")
    pg_target.execute("drop role if exists no_temp")
    pg_target.execute("create role no_temp login password 'pw'")
    pg_target.execute(f'revoke temporary on database "{database}" from public')
    pg_target.execute("grant select, insert, update, delete on t to no_temp")
    try:
        url = f"postgresql://no_temp:pw@{pg_server.host}:{pg_server.port}/{database}"
        statements = SqlTargetSettings(url, copy_min_rows=None)
        assert apply_changes([upsert("t", 1, "c", id=1, v="a", n=1)], statements)["upserted"] == 1
        with pytest.raises(TargetError, match=r"GRANT TEMPORARY ON DATABASE .*or set copy_min_rows=None"):
            apply_changes([upsert("t", i, "c", id=i, v="a", n=i) for i in range(N)], SqlTargetSettings(url))
    finally:
        pg_target.execute(f'grant temporary on database "{database}" to public')
        pg_target.execute("drop owned by no_temp")
        pg_target.execute("drop role no_temp")
