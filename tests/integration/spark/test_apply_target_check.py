"""The apply job checks its SQL target on the driver before its stream starts: a target table that
is missing, has no unique key, or that the job's user may not write fails the run before any
record is read (no offsets in the checkpoint), with the fix in the message. Real PostgreSQL and
MariaDB; the last test goes through the real job (a local Spark session)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.spark.apply import ApplyJob, run
from airflow_cdc.spark.preflight import TargetRefused, check_job_target, source_table_of
from airflow_cdc.spark.reading import SourceOptions
from airflow_cdc.spark.targets.sql import TargetPrivilegeError, TargetSchemaError, check_target, clear_catalog_cache
from tests.integration.spark.test_sql_targets import Target, mariadb_target, pg_target  # noqa: F401 (fixtures)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _fresh_catalog() -> Iterator[None]:
    clear_catalog_cache()
    yield
    clear_catalog_cache()


@pytest.fixture(params=["postgresql", "mariadb"])
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue("pg_target" if request.param == "postgresql" else "mariadb_target")


@pytest.fixture
def reader(target: Target, request: pytest.FixtureRequest) -> Iterator[str]:
    """The target's URL for a user that may only read table t (created here)."""
    target.execute("create table t (id int primary key, v varchar(20))")
    user = f"ro_{uuid.uuid4().hex[:8]}"
    if target.kind == "postgresql":
        server = request.getfixturevalue("pg_server")
        if server.external:
            pytest.skip("creates a role: a local server's")
        target.execute(f"create role {user} login")
        target.execute(f"grant select on t to {user}")
        url = f"postgresql://{user}@{server.host}:{server.port}/{target.url.rsplit('/', 1)[1]}"
    else:
        server = request.getfixturevalue("mariadb_server")
        if server.external:
            pytest.skip("creates a user: a local server's")
        target.execute(f"create user '{user}'@'%' identified by 'pw'")
        target.execute(f"grant select on {target.schema}.t to '{user}'@'%'")
        url = f"mysql://{user}:pw@{server.host}:{server.port}/{target.schema}"
    try:
        yield url
    finally:
        if target.kind == "postgresql":
            target.execute(f"drop owned by {user}")
            target.execute(f"drop role {user}")
        else:
            target.execute(f"drop user '{user}'@'%'")


def test_a_table_without_a_unique_key_is_refused_naming_the_fix(target: Target):
    target.execute("create table t (id int, v varchar(20))")
    with pytest.raises(TargetSchemaError, match=r"has no primary key or unique index.*ADD PRIMARY KEY"):
        check_target({"url": target.url}, [target.qualified()])


def test_a_user_that_may_not_write_is_refused_naming_the_grant(target: Target, reader: str):
    # The table has its position column already: the read-only user could not add it.
    target.execute("alter table t add column _cdc_position varchar(64)")
    with pytest.raises(TargetPrivilegeError, match=r"may not SELECT and INSERT on .*t .*GRANT SELECT, INSERT"):
        check_target({"url": reader}, [target.qualified()])


def test_a_writable_table_with_a_key_passes_and_keeps_no_probe(target: Target):
    target.execute("create table t (id int primary key, v varchar(20))")
    check_target({"url": target.url}, [target.qualified()])
    assert target.execute("select count(*) from t") == [(0,)]


def test_topics_name_their_source_tables():
    assert source_table_of("shop.public.orders") == "public.orders"
    assert source_table_of("a.b.inventory.orders") == "inventory.orders"  # a prefix with dots
    assert source_table_of("all_orders") is None  # a routed topic: known once read


def test_the_job_checks_the_tables_its_topics_name(target: Target):
    target.execute("create table t (id int primary key, v varchar(20))")
    target.execute("create table nokey (id int, v varchar(20))")
    check_job_target(target.url, [f"prefix.{target.qualified()}"], {})
    with pytest.raises(TargetRefused, match=r"nokey .*has no primary key or unique index"):
        check_job_target(target.url, [f"prefix.{target.qualified('nokey')}"], {})
    # A topic's name is a guess at its table (a routed topic, bench's "<prefix>.public.items.warm"):
    # one that does not exist is left to the first batch; a table the job is told of must exist.
    check_job_target(target.url, [f"prefix.{target.qualified()}.warm"], {})
    with pytest.raises(TargetRefused, match=r"absent .*does not exist.*CREATE TABLE"):
        check_job_target(target.url, [], {target.qualified("absent"): target.qualified("absent")})


def test_the_job_fails_before_reading_a_record_when_the_target_table_has_no_key(
    tmp_path: Path, request: pytest.FixtureRequest, spark: Any
) -> None:
    """Without the driver's check the job read batch 0 (its offsets in the checkpoint) and failed
    on an executor, the cause deep in a Spark trace."""
    topic = "shop.public.nokey"
    segment = tmp_path / "changelog" / topic / "00000000000000000001.jsonl"
    segment.parent.mkdir(parents=True)
    source = {"schema": "public", "table": "nokey"}
    value = {"before": None, "after": {"id": 1}, "op": "c", "ts_ms": 1, "source": source}
    segment.write_text(json.dumps({"topic": topic, "key": '{"id":1}', "value": json.dumps(value), "seq": 1}) + "\n")
    options = SourceOptions(kind="changelog", changelog_dir=str(tmp_path / "changelog"), topics=(topic,))
    checkpoint = tmp_path / "checkpoint"
    pg = request.getfixturevalue("pg_target")
    pg.execute("create table nokey (id int, v varchar(20))")
    with pytest.raises(TargetRefused, match=r"public\.nokey .*has no primary key or unique index.*ADD PRIMARY KEY"):
        run(spark, ApplyJob(source=options, target_url=pg.url, checkpoint=str(checkpoint)))
    assert not list((checkpoint / "offsets").glob("*")), "the job read records before checking its target"
