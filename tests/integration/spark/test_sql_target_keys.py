"""Upserts match the change's key only, on both SQL targets: a target table with a second unique
index must not have one key's change land on another key's row (MySQL's ON DUPLICATE KEY UPDATE
matches any unique key)."""

from __future__ import annotations

import pytest

from tests.integration.spark.test_sql_targets import (
    Target,
    _fresh_catalog,  # noqa: F401 (an autouse fixture)
    mariadb_target,  # noqa: F401 (a fixture)
    pg_target,  # noqa: F401 (a fixture)
    upsert,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["postgresql", "mariadb"])
def keyed_target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue(f"{'pg' if request.param == 'postgresql' else 'mariadb'}_target")


def test_a_change_never_updates_the_row_of_another_key_under_a_second_unique_index(keyed_target: Target):
    target = keyed_target
    target.execute("create table t (id int primary key, email varchar(20) not null unique, v varchar(20))")
    t = target.qualified()
    target.apply([upsert(t, 1, "c", id=1, email="x@", v="one")])
    # Key 2 takes the email key 1 still holds here (its change to another email is in another
    # partition, not applied yet): refused as a duplicate, never written over key 1's row.
    with pytest.raises(Exception, match=r"(?i)duplicate"):
        target.apply([upsert(t, 5, "c", id=2, email="x@", v="two")])
    assert target.rows(columns="id, email, v") == [(1, "x@", "one")]
    # Once key 1 has moved on, key 2's change applies; both by their own key.
    target.apply([upsert(t, 4, id=1, email="y@", v="one")])
    counts = target.apply([upsert(t, 5, "c", id=2, email="x@", v="two"), upsert(t, 6, id=1, email="z@", v="1")])
    assert counts["upserted"] == 2
    assert target.rows(columns="id, email, v") == [(1, "z@", "1"), (2, "x@", "two")]
    # The guard still holds: an older change of key 1 changes nothing.
    target.apply([upsert(t, 3, id=1, email="old@", v="old")])
    assert target.rows(columns="id, email, v") == [(1, "z@", "1"), (2, "x@", "two")]
