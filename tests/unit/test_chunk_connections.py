"""The incremental snapshot's reader connections: which MySQL errors mean the connection is lost
(the window is read again on a new one) rather than the query refused (the table fails), and
the names PostgreSQL's readers carry in pg_stat_activity. The reconnections themselves, on real
servers: tests/integration/test_snapshot_reader_loss.py."""

from __future__ import annotations

import pymysql
import pytest
from psycopg.conninfo import make_conninfo

from airflow_cdc.engine.errors import RetriableError
from airflow_cdc.engine.snapshots.chunks import TableReadError
from airflow_cdc.engine.sources.mysql.chunk_connection import connection_lost, engine_errors
from airflow_cdc.engine.sources.postgres.chunk_connections import WINDOW_PURPOSE, application_name


def raising(exc: BaseException) -> None:
    @engine_errors
    def read() -> None:
        raise exc

    read()


@pytest.mark.parametrize(
    "exc",
    [
        pymysql.OperationalError(2013, "Lost connection to MySQL server during query"),  # KILL <id>
        pymysql.OperationalError(1927, "Connection was killed"),  # MariaDB's last word before it
        pymysql.OperationalError(1053, "Server shutdown in progress"),  # MySQL's
        pymysql.InterfaceError(0, ""),  # the connection was closed after that
        pymysql.InternalError("Packet sequence number wrong - got 1 expected 2"),  # cut half-way
        ConnectionResetError(104, "Connection reset by peer"),
    ],
)
def test_a_lost_connection_is_retried_on_a_new_one(exc: BaseException) -> None:
    assert connection_lost(exc)
    with pytest.raises(RetriableError, match="went away"):
        raising(exc)


def test_an_interrupted_read_is_read_again_on_the_same_connection() -> None:
    exc = pymysql.OperationalError(1317, "Query execution was interrupted")  # KILL QUERY <id>
    assert not connection_lost(exc)
    with pytest.raises(RetriableError, match="interrupted"):
        raising(exc)


@pytest.mark.parametrize(
    "exc",
    [
        pymysql.ProgrammingError(1064, "You have an error in your SQL syntax"),
        pymysql.OperationalError(1142, "SELECT command denied to user"),
        pymysql.ProgrammingError(1146, "Table 'shop.t' doesn't exist"),
    ],
)
def test_a_refused_query_fails_the_table(exc: BaseException) -> None:
    assert not connection_lost(exc)
    with pytest.raises(TableReadError):
        raising(exc)


@pytest.mark.parametrize("engine", ["e", "x" * 80, "ünïcödé-" * 8])
def test_the_postgres_window_reader_is_named_for_pg_stat_activity(engine: str) -> None:
    name = application_name(make_conninfo(host="h", application_name=f"airflow-cdc-{engine}"), WINDOW_PURPOSE)
    assert name.endswith(" incremental snapshot") and name.startswith("airflow-cdc-")
    assert len(name.encode()) <= 63  # what the server keeps: the purpose is never cut off
