"""CdcSparkApplyOperator checks its target before Spark starts: a wrong password, a missing
database or table fail the task in a second, not retried, the cause as the first line; a target
that does not answer fails retriably. Real PostgreSQL and MariaDB servers that ask for passwords.

Without the check, a wrong password surfaced only once Spark had started and a batch reached the
target (75 s on the test machine), in the middle of a retriable "the Spark job failed" and 60 lines
of driver log.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pymysql
import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.ports import free_port
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.operators.spark import CdcSparkApplyOperator, connection_url
from tests.integration.airflow.apply_support import (  # noqa: F401 (pg_target: a fixture)
    TABLE,
    apply_operator,
    one_change,
    pg_target,
    set_connection,
)

pytestmark = pytest.mark.integration

#: Well under Spark's start-up alone; the check itself takes milliseconds.
PROMPT = 5.0


def failure_of(operator: CdcSparkApplyOperator) -> tuple[AirflowException, float]:
    started = time.monotonic()
    with pytest.raises(AirflowException) as failure:
        operator.execute({})
    return failure.value, time.monotonic() - started


def first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0]


def assert_no_spark(operator: CdcSparkApplyOperator, checkpoint: Path) -> None:
    assert operator._follower is None  # spark-submit was never launched
    assert not checkpoint.exists() and not checkpoint.with_name(checkpoint.name + ".lock").exists()


def test_a_wrong_postgres_password_fails_at_once_with_the_cause_first_and_no_spark(
    pg_target: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "checkpoint"
    operator = apply_operator(one_change(tmp_path / "changelog"), checkpoint, target_conn_id="replica_wrong_pw")
    failure, seconds = failure_of(operator)
    assert isinstance(failure, AirflowFailException)  # a retry would fail the same
    assert (
        first_line(failure)
        == f"target connection 'replica_wrong_pw': password authentication failed for user \"{pg_target}\""
    )
    assert seconds < PROMPT, seconds
    assert_no_spark(operator, checkpoint)


def test_a_missing_database_or_target_table_fails_at_once_as_the_job_would(
    pg_target: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "checkpoint"
    no_db = apply_operator(tmp_path / "changelog", checkpoint, target_conn_id="replica_no_db")
    failure, seconds = failure_of(no_db)
    assert isinstance(failure, AirflowFailException) and seconds < PROMPT
    assert first_line(failure).startswith("target connection 'replica_no_db': database ")
    assert first_line(failure).endswith('_absent" does not exist')

    # The job's own rule under the 'exception' schema change policy: the target table must
    # exist (the job creates none); the error is the job's.
    missing = apply_operator(
        tmp_path / "changelog",
        checkpoint,
        target_conn_id="replica",
        tables=[TABLE, "public.gone"],
        schema_change_policy="exception",
    )
    failure, seconds = failure_of(missing)
    assert isinstance(failure, AirflowFailException) and seconds < PROMPT
    assert first_line(failure).startswith(
        "target connection 'replica': Target table public.gone (for source table public.gone) does not exist."
    )
    assert_no_spark(missing, checkpoint)
    # Under the default ('lenient') the job creates a missing table from the changes' schemas:
    # the check leaves it to the job (the existing ones are still checked).
    lenient = apply_operator(
        tmp_path / "changelog", checkpoint, target_conn_id="replica", tables=[TABLE, "public.gone"]
    )
    lenient.preflight(connection_url("replica"))


def test_existing_target_tables_pass_and_get_the_position_column_the_job_would_add(
    pg_server: PostgresServer,
    pg_database: str,
    pg_target: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    operator = apply_operator(
        tmp_path / "changelog", tmp_path / "checkpoint", target_conn_id="replica", table_map={TABLE: "public.orders"}
    )
    operator.preflight(connection_url("replica"))
    with psycopg.connect(pg_server.dsn(pg_database)) as conn:
        columns = [r[0] for r in conn.execute("select attname from pg_attribute where attrelid = 'orders'::regclass")]
    assert "_cdc_position" in columns


def test_a_target_that_does_not_answer_fails_retriably_with_the_cause_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()
    set_connection(monkeypatch, "down", conn_type="postgres", host="127.0.0.1", port=port, login="u", password="p")
    checkpoint = tmp_path / "checkpoint"
    operator = apply_operator(one_change(tmp_path / "changelog"), checkpoint, target_conn_id="down")
    failure, seconds = failure_of(operator)
    assert not isinstance(failure, AirflowFailException)  # the server may come back: retried
    assert first_line(failure) == (
        f"target connection 'down': connection to server at \"127.0.0.1\", port {port} failed: Connection refused"
    )
    assert seconds < PROMPT
    assert_no_spark(operator, checkpoint)


@pytest.fixture
def maria_user(mariadb_server: MariaDBServer, mariadb_database: str) -> Iterator[tuple[str, str]]:
    """``(user, password)`` of a user the server asks a password of (an external server's own)."""
    with mariadb_server.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"create table `{mariadb_database}`.orders (id int primary key, status varchar(20))")
    if mariadb_server.external:
        yield mariadb_server.user, mariadb_server.password
        return
    user = f"pre_{uuid.uuid4().hex[:8]}"
    with mariadb_server.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"create user '{user}'@'%' identified by 'right-pw'")
        cursor.execute(f"grant all on `{mariadb_database}`.* to '{user}'@'%'")
    with pytest.raises(pymysql.OperationalError):  # the password is really asked for
        pymysql.connect(host=mariadb_server.host, port=mariadb_server.port, user=user, password="").close()
    try:
        yield user, "right-pw"
    finally:
        with mariadb_server.connect() as conn, conn.cursor() as cursor:
            cursor.execute(f"drop user if exists '{user}'@'%'")


def test_a_wrong_mariadb_password_or_database_fails_at_once_with_the_cause_first(
    mariadb_server: MariaDBServer,
    mariadb_database: str,
    maria_user: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    user, password = maria_user
    fields = {"conn_type": "mysql", "host": mariadb_server.host, "port": mariadb_server.port, "login": user}
    set_connection(monkeypatch, "maria_wrong_pw", **fields, password=f"not-{password}", schema=mariadb_database)
    set_connection(monkeypatch, "maria", **fields, password=password, schema=mariadb_database)
    checkpoint = tmp_path / "checkpoint"
    operator = apply_operator(one_change(tmp_path / "changelog"), checkpoint, target_conn_id="maria_wrong_pw")
    failure, seconds = failure_of(operator)
    assert isinstance(failure, AirflowFailException) and seconds < PROMPT
    assert first_line(failure).startswith(f"target connection 'maria_wrong_pw': Access denied for user '{user}'@")
    assert_no_spark(operator, checkpoint)

    # The right password passes; the target table is the job's (db.table, as MariaDB's events name it).
    ok = apply_operator(
        tmp_path / "changelog", checkpoint, target_conn_id="maria", tables=[f"{mariadb_database}.orders"]
    )
    ok.preflight(connection_url("maria"))
    missing = apply_operator(
        tmp_path / "changelog",
        checkpoint,
        target_conn_id="maria",
        tables=["other.orders"],
        schema_change_policy="exception",
    )
    failure, seconds = failure_of(missing)
    assert isinstance(failure, AirflowFailException) and seconds < PROMPT
    assert first_line(failure).startswith("target connection 'maria': Target table other.orders")


def test_a_lake_target_whose_root_cannot_be_a_directory_fails_at_once(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    checkpoint = tmp_path / "checkpoint"
    operator = apply_operator(tmp_path / "changelog", checkpoint, target_url=f"delta:{tmp_path}/file/lake")
    failure, seconds = failure_of(operator)
    assert isinstance(failure, AirflowFailException) and seconds < PROMPT
    assert first_line(failure) == (
        f"target 'delta:{tmp_path}/file/lake': {tmp_path}/file is not a directory, "
        f"so {tmp_path}/file/lake cannot be one"
    )
    assert_no_spark(operator, checkpoint)
    # On a cluster the executors write the lake, not this machine: its view of the path is not checked.
    master = f"spark://127.0.0.1:{free_port()}"
    on_cluster = apply_operator(
        tmp_path / "changelog", checkpoint, target_url=f"delta:{tmp_path}/file/lake", master=master
    )
    with pytest.raises(AirflowException, match=f"no Spark master answers at {master}"):
        on_cluster.execute({})
    # A root that does not exist yet under a writable directory passes.
    apply_operator(tmp_path / "changelog", checkpoint, target_url=f"parquet:{tmp_path}/new/lake").preflight(
        f"parquet:{tmp_path}/new/lake"
    )
