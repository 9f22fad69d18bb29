"""CdcSignalHook without an instance (the API replayed): the engine's own signal checks come
first, each channel needs what the instance runs with, and says how to get it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from airflow_cdc.backends.api import ApiBackend
from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.signals import SignalError
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.hooks.signal import CdcSignalHook, enabled_channels

RUNNING_CONFIG: dict[str, Any] = {"name": "shop", "topic.prefix": "shop", "signal.enabled.channels": "source,api"}


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The requests the hook's engine client sends to a replayed instance."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        bodies: dict[str, Any] = {
            "/status": {"name": "shop", "state": "POLLING_TASKS", "phase": "streaming"},
            "/connectors/shop": {"name": "shop", "config": RUNNING_CONFIG},
            "/signals": {"id": json.loads(request.content or b"{}").get("id") or "generated"},
        }
        return httpx.Response(202 if request.method == "POST" else 200, json=bodies[request.url.path])

    monkeypatch.setenv("AIRFLOW_CONN_CDC_UNIT", json.dumps({"conn_type": "cdc_engine", "host": "http://engine:1"}))
    transport = httpx.MockTransport(answer)
    monkeypatch.setattr(
        CdcEngineHook,
        "get_backend",
        lambda self: ApiBackend(
            lambda: EngineClient("http://engine:1", transport=transport), expected=None, conn_id="c"
        ),
    )
    return requests


def test_the_api_channel_sends_debeziums_shape_and_returns_the_id(sent: list[httpx.Request]) -> None:
    hook = CdcSignalHook("cdc_unit")
    assert hook.send("execute-snapshot", {"data-collections": ["public.t"]}, signal_id="snap-1") == "snap-1"
    assert json.loads(sent[0].content) == {
        "type": "execute-snapshot",
        "data": {"data-collections": ["public.t"]},
        "id": "snap-1",
    }


def test_a_malformed_signal_fails_before_anything_is_sent(sent: list[httpx.Request]) -> None:
    with pytest.raises(SignalError, match="needs a non-empty 'data-collections' list"):
        CdcSignalHook("cdc_unit").send("execute-snapshot", {})
    with pytest.raises(SignalError, match="unknown signal type"):
        CdcSignalHook("cdc_unit").send("explode", channel="source")
    assert sent == []


@pytest.mark.parametrize(
    ("channel", "hook_kwargs", "says", "fix"),
    [
        ("kafka", {}, "does not listen on the kafka channel", "add kafka to the instance's signal.enabled.channels"),
        ("source", {}, "has no signal table", "set signal.data.collection"),
        ("smoke", {}, "is not a signal channel", "use api, source or kafka"),
    ],
)
def test_a_channel_the_instance_cannot_hear_names_the_fix(
    sent: list[httpx.Request], channel: str, hook_kwargs: dict[str, Any], says: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        CdcSignalHook("cdc_unit", **hook_kwargs).send("log", {"message": "hi"}, channel=channel)
    assert says in refused.value.problems[0].message and fix in refused.value.problems[0].fix


def test_the_source_channel_needs_a_source_connection_and_data_that_fits(
    sent: list[httpx.Request], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(RUNNING_CONFIG, "signal.data.collection", "public.debezium_signal")
    with pytest.raises(ConfigError, match="source_conn_id"):
        CdcSignalHook("cdc_unit").send("log", {"message": "hi"}, channel="source")
    monkeypatch.setenv("AIRFLOW_CONN_PG_UNIT", json.dumps({"conn_type": "postgres", "host": "db", "password": "pw"}))
    with pytest.raises(ConfigError, match="holds 2048"):
        CdcSignalHook("cdc_unit", source_conn_id="pg_unit").send("log", {"message": "x" * 3000}, channel="source")
    monkeypatch.setitem(RUNNING_CONFIG, "signal.data.collection", "public.signal; drop table x")
    with pytest.raises(ConfigError, match="is not a plain table name"):
        CdcSignalHook("cdc_unit", source_conn_id="pg_unit").send("log", {"message": "x"}, channel="source")


def test_enabled_channels_default_to_the_engines() -> None:
    assert enabled_channels({}) == ("source", "api")
    assert enabled_channels({"signal.enabled.channels": ["api", "kafka"]}) == ("api", "kafka")
    assert enabled_channels({"signal.enabled.channels": "source, kafka"}) == ("source", "kafka")


class _Recorder:
    """A DB-API connection that records what the signal hook does with it."""

    def __init__(self, kwargs: dict[str, Any], seen: list[Any]) -> None:
        seen.append(("connect", kwargs))
        self.seen = seen

    def __enter__(self) -> _Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.seen.append(("closed",))

    def cursor(self) -> _Recorder:
        return self

    def execute(self, statement: str, params: tuple[Any, ...]) -> None:
        self.seen.append(("execute", statement, params))


@pytest.mark.parametrize(
    ("collection", "include_list", "database", "table"),
    [
        ("shop.debezium_signal", "shop", "shop", "debezium_signal"),  # MySQL's database.table
        ("ops.debezium_signal", "shop,inventory", "ops", "debezium_signal"),  # another database than the captured
        ("debezium_signal", "shop", "shop", "debezium_signal"),  # the connection's database
        ("debezium_signal", "shop,inventory", None, "debezium_signal"),  # several: none chosen
    ],
)
def test_the_source_channel_writes_mysqls_signal_table_with_pymysql(
    sent: list[httpx.Request],
    monkeypatch: pytest.MonkeyPatch,
    collection: str,
    include_list: str,
    database: str | None,
    table: str,
) -> None:
    import pymysql

    seen: list[Any] = []
    monkeypatch.setattr(pymysql, "connect", lambda **kwargs: _Recorder(kwargs, seen))
    monkeypatch.setitem(RUNNING_CONFIG, "signal.data.collection", collection)
    monkeypatch.setitem(RUNNING_CONFIG, "database.include.list", include_list)
    monkeypatch.setenv(
        "AIRFLOW_CONN_MY_UNIT",
        json.dumps(
            {"conn_type": "mysql", "host": "db", "port": 3307, "login": "cdc", "password": "pw", "schema": include_list}
        ),
    )
    hook = CdcSignalHook("cdc_unit", source_conn_id="my_unit")
    data = {"data-collections": ["shop.orders"], "type": "incremental"}
    assert hook.send("execute-snapshot", data, channel="source", signal_id="snap-my") == "snap-my"
    [connected, executed, closed] = seen
    assert connected[1] == {
        "host": "db",
        "port": 3307,
        "user": "cdc",
        "password": b"pw",  # UTF-8: PyMySQL would encode a str as latin-1 (mysql_client.py)
        "database": database,
        "connect_timeout": 10,
        "autocommit": True,
    }
    assert executed == (
        "execute",
        f"insert into {table} (id, type, data) values (%s, %s, %s)",
        ("snap-my", "execute-snapshot", json.dumps(data, separators=(",", ":"))),
    )
    assert closed == ("closed",)


def test_the_source_channel_of_postgres_keeps_schema_dot_table(
    sent: list[httpx.Request], monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    seen: list[Any] = []
    monkeypatch.setattr(psycopg, "connect", lambda **kwargs: _Recorder(kwargs, seen))
    monkeypatch.setitem(RUNNING_CONFIG, "signal.data.collection", "public.debezium_signal")
    monkeypatch.setitem(RUNNING_CONFIG, "database.dbname", "shop-db")
    monkeypatch.setenv(
        "AIRFLOW_CONN_PG_UNIT", json.dumps({"conn_type": "postgres", "host": "db", "password": "pw", "schema": "x"})
    )
    CdcSignalHook("cdc_unit", source_conn_id="pg_unit").send("log", {"message": "hi"}, channel="source")
    assert seen[0][1]["dbname"] == "shop-db"
    assert seen[1][1].startswith("insert into public.debezium_signal ")
