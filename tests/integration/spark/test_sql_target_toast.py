"""Unchanged TOASTed values (the columns a change lists in ``unavailable``) into a target whose
column is NOT NULL: a key the target has keeps its value (PostgreSQL's INSERT ... ON CONFLICT
checked NOT NULL on the row it would insert before finding the conflict, and failed the batch -
the chaos suite's defect 5); a key it does not have cannot get the value invented, and is refused
naming the fix. Real PostgreSQL (statements and COPY) and MariaDB."""

from __future__ import annotations

import pytest

from airflow_cdc.spark.frames import UNAVAILABLE_PLACEHOLDER
from airflow_cdc.spark.targets.sql import TargetWriteError
from tests.integration.spark.test_sql_targets import (
    Target,
    _fresh_catalog,  # noqa: F401 (an autouse fixture)
    mariadb_target,  # noqa: F401 (a fixture)
    pg_copy_target,  # noqa: F401 (a fixture)
    pg_statement_target,  # noqa: F401 (a fixture)
    pg_target,  # noqa: F401 (a fixture)
    upsert,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["postgresql", "postgresql-copy", "mariadb"])
def target(request: pytest.FixtureRequest) -> Target:
    fixture = {"postgresql": "pg_statement_target", "postgresql-copy": "pg_copy_target"}
    return request.getfixturevalue(fixture.get(request.param, "mariadb_target"))


def test_an_unchanged_toasted_not_null_column_keeps_the_targets_value(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), big text not null)")
    t = target.qualified()
    target.apply([upsert(t, 1, "c", id=1, v="a", big="x" * 3000), upsert(t, 2, "c", id=2, v="b", big="y" * 3000)])
    counts = target.apply(
        [
            upsert(t, 3, id=1, v="a2", big=UNAVAILABLE_PLACEHOLDER, unavailable=["big"]),
            upsert(t, 1, id=2, v="older", big=UNAVAILABLE_PLACEHOLDER, unavailable=["big"]),  # the guard refuses it
        ]
    )
    assert target.rows(columns="id, v, big") == [(1, "a2", "x" * 3000), (2, "b", "y" * 3000)]
    if target.kind == "postgresql":
        assert (counts["upserted"], counts["skipped_older"]) == (1, 1)


def test_a_new_key_without_its_unchanged_toasted_value_is_refused_naming_the_fix(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), big text not null)")
    t = target.qualified()
    with pytest.raises(TargetWriteError, match=r"leaves column big out.*REPLICA IDENTITY FULL"):
        target.apply([upsert(t, 1, "c", id=1, v="a", big=UNAVAILABLE_PLACEHOLDER, unavailable=["big"])])
    assert target.rows(columns="id, v, big") == []


def test_a_new_key_without_its_unchanged_toasted_value_takes_the_columns_default(target: Target):
    target.execute("create table t (id int primary key, v varchar(20), big varchar(20) not null default 'none')")
    t = target.qualified()
    target.apply([upsert(t, 1, "c", id=1, v="a", big=UNAVAILABLE_PLACEHOLDER, unavailable=["big"])])
    assert target.rows(columns="id, v, big") == [(1, "a", "none")]
