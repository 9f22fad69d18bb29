"""A connection's extra is a JSON object, for source connections and engine connections alike:
anything else is refused naming the connection and the fix, never read as no extras."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.hooks.engine_connection import KAFKA_CONNECT, engine_connection
from airflow_cdc.hooks.source_config import connection_extras, source_config


@pytest.mark.parametrize("extra", ['["sslmode", "require"]', '"sslmode=require"', "42"])
@pytest.mark.parametrize(
    "read",
    [
        lambda extra: source_config("pg_shop", conn_type="postgres", host="db", extra=extra),
        lambda extra: engine_connection("pg_shop", host="http://engine:8080", extra=extra),
        lambda extra: engine_connection("pg_shop", conn_type=KAFKA_CONNECT, host="http://connect:8083", extra=extra),
    ],
    ids=["source", "engine", "kafka_connect"],
)
def test_an_extra_that_is_not_an_object_is_refused_naming_the_connection(read: Any, extra: str) -> None:
    with pytest.raises(ConfigError) as refused:
        read(extra)
    [problem] = refused.value.problems
    assert problem.key == "pg_shop.extra" and problem.message.startswith("is not a JSON object")
    assert "write the extras as a JSON object" in problem.fix


def test_an_extra_that_is_not_json_says_so() -> None:
    with pytest.raises(ConfigError) as refused:
        connection_extras("{sslmode: require}", "pg_shop")
    assert [(p.key, p.message) for p in refused.value.problems] == [("pg_shop.extra", "is not JSON")]


def test_objects_and_nothing_are_read_as_they_are() -> None:
    assert connection_extras('{"sslmode": "require"}', "c") == {"sslmode": "require"}
    assert connection_extras({"timeout": 5}, "c") == {"timeout": 5}
    assert connection_extras("", "c") == connection_extras(None, "c") == {}
