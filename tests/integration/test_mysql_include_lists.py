"""A MariaDB include list that matches nothing refuses to start, naming what there is (it used to
capture nothing without a word); an entry that matches nothing beside others is a warning."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pymysqlreplication")

from airflow_cdc.engine import ConfigError, Engine, EngineFailedError, JsonSerializer
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .mysql_support import Collector, engine_config

pytestmark = pytest.mark.integration


@pytest.fixture
def shop(mariadb_server: Any, mariadb_database: str) -> str:
    """The test database, with tables orders and customers."""
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute("create table orders (id int primary key)")
        cur.execute("create table customers (id int primary key)")
        cur.execute("insert into orders values (1)")
    return mariadb_database


def refusal(config: dict[str, Any]) -> ConfigError:
    """The error the engine stopped with; a TimeoutError if it ran on (capturing nothing)."""
    runner = EngineRunner(Engine({**config, "errors.max.retries": 0}, consumer=lambda record: None)).start()
    try:
        runner.join(30)
    finally:
        runner.stop()
    assert isinstance(runner.error, EngineFailedError), repr(runner.error)
    error = runner.error.__cause__  # a failed start is raised as it is
    assert isinstance(error, ConfigError), repr(runner.error)
    return error


def test_a_table_include_list_that_matches_no_table_is_an_error_naming_the_tables(
    mariadb_server: Any, shop: str
) -> None:
    error = refusal(engine_config(mariadb_server, shop, **{"table.include.list": f"`{shop}`.`orders`"}))
    (problem,) = error.problems
    assert problem.key == "table.include.list"
    assert (
        problem.message
        == f"matches no table of the captured databases, whose tables are: {shop}.customers, {shop}.orders"
    )
    assert "(shop.orders, not `shop`.`orders`)" in problem.fix


def test_a_table_of_a_database_not_captured_matches_nothing(mariadb_server: Any, shop: str) -> None:
    other = mariadb_server.create_database()
    try:
        with mariadb_server.connect(database=other) as conn, conn.cursor() as cur:
            cur.execute("create table elsewhere (id int primary key)")
        error = refusal(engine_config(mariadb_server, shop, **{"table.include.list": f"{other}\\.elsewhere"}))
    finally:
        mariadb_server.drop_database(other)
    (problem,) = error.problems
    assert problem.key == "table.include.list" and f"{shop}.orders" in problem.message
    assert f"{other}.elsewhere" not in problem.message  # its database is not in database.include.list


def test_a_database_include_list_that_matches_no_database_is_an_error_naming_the_databases(
    mariadb_server: Any, shop: str
) -> None:
    error = refusal(engine_config(mariadb_server, "no_such_database"))
    (problem,) = error.problems
    assert problem.key == "database.include.list"
    assert problem.message.startswith("matches no database of the server, whose databases are: ")
    assert shop in problem.message and "mysql" not in problem.message.split(": ", 1)[1].split(", ")


def test_an_entry_that_matches_nothing_beside_others_is_a_warning(
    mariadb_server: Any, shop: str, caplog: pytest.LogCaptureFixture
) -> None:
    collected = Collector()
    config = engine_config(mariadb_server, shop, **{"table.include.list": f"{shop}\\.orders,{shop}\\.ordres"})
    with EngineRunner(Engine(config, consumer=collected, serializer=JsonSerializer())):
        wait_until(lambda: collected.changes(), 30, "the snapshot row of orders")
    assert any(f"'{shop}\\\\.ordres' matches no table" in r.getMessage() for r in caplog.records)
