"""A lane's transaction that the target refuses for a reason that passes - a deadlock with
another writer - is applied again (``apply_changes_retrying``, ``flush.max.retries``), on a real
PostgreSQL: the deadlock is made, not simulated, and the rows end as the changes say."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pymysql
import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.targets.sql import SqlTargetSettings, apply_changes_retrying
from airflow_cdc.spark.targets.sql.mysql import MYSQL
from airflow_cdc.spark.targets.sql.postgres import POSTGRES
from tests.integration.spark.test_sql_targets import (
    Target,
    _fresh_catalog,  # noqa: F401 (an autouse fixture)
    pg_target,  # noqa: F401 (a fixture)
    upsert,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue("pg_target")


def _deadlocked_apply(pg_server: Any, database: str, target: Target, max_retries: int) -> dict[str, Any]:
    """Applies upserts of id 2 then id 1 (statements, one per row, in that order) while another
    session holds id 1 and, once the apply waits for it, asks for id 2: a deadlock. The other
    session's ``deadlock_timeout`` is long, so the apply's session finds it and is rolled back."""
    target.execute('create table t (id int primary key, v text, _cdc_position varchar(64) collate "C")')
    target.execute("insert into t values (1, 'old', null), (2, 'old', null)")
    t = target.qualified()
    changes = [upsert(t, 10, id=2, v="new"), upsert(t, 11, id=1, v="new")]
    settings = SqlTargetSettings(target.url, copy_min_rows=None, batch_size=1, max_retries=max_retries, retry_delay_s=0)
    out: dict[str, Any] = {}

    def apply() -> None:
        try:
            out["counts"] = apply_changes_retrying(lambda: iter(changes), settings)
        except Exception as exc:  # the test reads it
            out["error"] = exc

    with pg_server.connect(database, autocommit=False) as other:
        other.execute("set deadlock_timeout = '20s'")
        other.execute("select 1 from t where id = 1 for update")  # a transaction holding id 1
        holder = other.info.backend_pid
        applier = threading.Thread(target=apply)
        applier.start()

        def waiting() -> bool:
            with pg_server.connect(database, autocommit=True) as probe:
                found = probe.execute(
                    "select count(*) from pg_stat_activity where datname = current_database() "
                    "and wait_event_type = 'Lock' and pid <> %s",
                    (holder,),
                ).fetchone()
            return bool(found and found[0])

        wait_until(lambda: waiting() or "error" in out, 30, "the apply waiting for id 1")
        assert "error" not in out, out["error"]
        other.execute("update t set v = 'other' where id = 2")  # waits for the apply: a deadlock
        other.commit()
        applier.join(60)
    assert not applier.is_alive()
    return out


def test_a_deadlocked_lane_is_applied_again(pg_server: Any, pg_database: str, target: Target) -> None:
    out = _deadlocked_apply(pg_server, pg_database, target, max_retries=2)
    assert "error" not in out, out.get("error")
    assert out["counts"]["upserted"] == 2
    # The other session's update went in when the apply was rolled back; the retry came after.
    assert target.rows(columns="id, v") == [(1, "new"), (2, "new")]


def test_without_retries_the_deadlock_fails_the_lane(pg_server: Any, pg_database: str, target: Target) -> None:
    out = _deadlocked_apply(pg_server, pg_database, target, max_retries=0)
    assert isinstance(out.get("error"), psycopg.errors.DeadlockDetected)
    assert target.rows(columns="id, v") == [(1, "old"), (2, "other")]


def test_which_refusals_pass() -> None:
    assert MYSQL.transient(pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"))
    assert MYSQL.transient(pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"))
    assert not MYSQL.transient(pymysql.err.OperationalError(1045, "Access denied"))
    assert not MYSQL.transient(ValueError("1213"))
    assert POSTGRES.transient(psycopg.errors.SerializationFailure())
    assert not POSTGRES.transient(psycopg.errors.UniqueViolation())
