"""The source role a DBA hands out: LOGIN REPLICATION and SELECT, not a superuser, owning no
table. It cannot create a publication (FOR ALL TABLES needs a superuser, FOR TABLE the tables'
owner): the engine says which statement to have run, and with the publication made by the owner
it streams and snapshots incrementally. A publication that leaves a captured table out is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.engine import Engine, EngineFailedError
from airflow_cdc.engine.sources.postgres.catalog import SourceSetupError
from airflow_cdc.engine.testing import EngineRunner, wait_until
from tests.integration.pg_support import create_load_table, source_image
from tests.integration.test_incremental_snapshot import (
    SIGNAL_DDL,
    Collector,
    completed,
    config,
    replay,
    send,
)


@pytest.fixture
def replication_role(pg_server: Any, pg_database: str) -> Iterator[str]:
    """The README's role: LOGIN REPLICATION, SELECT on the captured tables, and INSERT and DELETE on
    the signal table (the incremental snapshot's watermarks are rows there, as Debezium's are)."""
    role = f"cdc_{pg_database}"
    with pg_server.connect(pg_database, autocommit=True) as conn:
        conn.execute(SIGNAL_DDL)
        create_load_table(conn, 300)
        conn.execute(f"create role {role} login replication")
        conn.execute(f"grant select on all tables in schema public to {role}")
        conn.execute(f"grant insert, delete on debezium_signal to {role}")
    try:
        yield role
    finally:
        with pg_server.connect(pg_database, autocommit=True) as conn:
            conn.execute(f"drop owned by {role}")
        with pg_server.connect(autocommit=True) as conn:
            conn.execute(f"drop role {role}")


def role_config(pg_server: Any, pg_database: str, role: str, **extra: Any) -> dict[str, Any]:
    return config(pg_server, pg_database, **{"database.user": role, "errors.max.retries": 0, **extra})


def failure_of(cfg: dict[str, Any]) -> str:
    with pytest.raises(EngineFailedError) as failed:
        Engine(cfg, consumer=lambda r: None).run()
    assert isinstance(failed.value.__cause__, SourceSetupError), failed.value.__cause__
    return str(failed.value.__cause__)


@pytest.mark.parametrize("mode", ["all_tables", "filtered"])
def test_a_role_that_may_not_create_the_publication_is_given_the_statement(
    pg_server: Any, pg_database: str, replication_role: str, mode: str
) -> None:
    cfg = role_config(pg_server, pg_database, replication_role, **{"publication.autocreate.mode": mode})
    message = failure_of(cfg)
    assert f"role '{replication_role}' may not create publication 'pub_{pg_database}'" in message
    assert f'CREATE PUBLICATION "pub_{pg_database}" FOR TABLE "public"."debezium_signal", "public"."t"' in message
    assert "publication.autocreate.mode: filtered" in message


def test_with_the_owners_publication_the_role_streams_and_snapshots(
    pg_server: Any, pg_database: str, replication_role: str
) -> None:
    dsn = pg_server.dsn(pg_database)
    with pg_server.connect(pg_database, autocommit=True) as conn:
        conn.execute(f"create publication pub_{pg_database} for table t, debezium_signal")
    collected = Collector()
    engine = Engine(role_config(pg_server, pg_database, replication_role), consumer=collected)
    with EngineRunner(engine):
        signal_id = send(dsn, "execute-snapshot", {"data-collections": ["public.t"], "type": "incremental"})
        with pg_server.connect(pg_database, autocommit=True) as conn:
            conn.execute("update t set v = 'after' where id <= 10")
        wait_until(lambda: completed(engine, signal_id), 60, "the incremental snapshot")
        with pg_server.connect(pg_database) as conn:
            expected = source_image(conn)
        wait_until(lambda: replay(collected) == expected, 30, "the replica to equal the source")


def test_a_publication_that_leaves_a_captured_table_out_is_refused(
    pg_server: Any, pg_database: str, replication_role: str
) -> None:
    with pg_server.connect(pg_database, autocommit=True) as conn:
        conn.execute(f"create publication pub_{pg_database} for table debezium_signal")
    message = failure_of(role_config(pg_server, pg_database, replication_role))
    assert f"publication 'pub_{pg_database}' does not include public.t" in message
    assert f'ALTER PUBLICATION "pub_{pg_database}" ADD TABLE "public"."t"' in message
