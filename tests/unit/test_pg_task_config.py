"""What a PostgreSQL task derives from its configuration, without a server: names per database,
the connection string, the table filter with the signal table, value modes."""

from __future__ import annotations

import psycopg

from airflow_cdc.engine.config import Config
from airflow_cdc.engine.connector import TaskContext
from airflow_cdc.engine.sources.postgres.connector import PostgresConnector
from airflow_cdc.engine.sources.postgres.task_config import PostgresTaskConfig
from airflow_cdc.engine.storage import MemoryOffsetStore, OffsetReader

BASE = {"topic.prefix": "shop", "slot.name": "cdc", "database.password": "pw", "database.port": "5433"}


def task_configs(**props: object) -> list[PostgresTaskConfig]:
    connector = PostgresConnector()
    connector.start(Config({**BASE, **props}))
    reader = OffsetReader(MemoryOffsetStore("e"))
    return [
        PostgresTaskConfig.from_context(TaskContext(f"e-{i}", "e", config, reader))
        for i, config in enumerate(connector.task_configs(4))
    ]


def test_one_database_uses_debeziums_names():
    (task,) = task_configs(**{"database.dbname": "orders"})
    assert (task.slot, task.partition) == ("cdc", {"server": "shop"})
    assert task.topic("public", "t") == "shop.public.t"
    params = psycopg.conninfo.conninfo_to_dict(task.conninfo)
    assert params["dbname"] == "orders" and params["port"] == "5433" and params["password"] == "pw"
    assert params["application_name"] == "airflow-cdc-e"


def test_several_databases_name_the_database_in_slot_partition_and_topic():
    first, second = task_configs(**{"database.names": "Orders-EU,billing"})
    assert (first.slot, second.slot) == ("cdc_orders_eu", "cdc_billing")
    assert second.partition == {"server": "shop", "database": "billing"}
    assert second.topic("public", "t") == "shop.billing.public.t"


def test_the_signal_table_is_captured_whatever_the_include_list_says():
    (task,) = task_configs(
        **{"database.dbname": "d", "table.include.list": r"public\.orders", "signal.data.collection": "signals"}
    )
    assert task.signal_table == ("public", "signals")
    table_filter = task.table_filter()
    assert table_filter.table("public", "orders") and table_filter.table("public", "signals")
    assert not table_filter.table("public", "customers")


def test_modes_skipped_operations_and_messages():
    (task,) = task_configs(
        **{
            "database.dbname": "d",
            "decimal.handling.mode": "string",
            "skipped.operations": "none",
            "message.prefix.exclude.list": "audit.*",
        }
    )
    assert task.modes.decimal == "string"
    assert task.skipped == frozenset()
    messages = task.message_filter()
    assert messages.topic == "shop.message"
    assert messages.emitted("orders") and not messages.emitted("audit-log")


def test_debeziums_tls_settings_reach_libpq() -> None:
    tls = {"database.sslmode": "verify-full", "database.sslrootcert": "/ca.pem", "database.sslcert": "/c.crt"}
    (task,) = task_configs(**{"database.dbname": "orders", **tls, "database.sslkey": "/c.key"})
    params = psycopg.conninfo.conninfo_to_dict(task.conninfo)
    assert {k: params.get(k) for k in ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword")} == {
        "sslmode": "verify-full",
        "sslrootcert": "/ca.pem",
        "sslcert": "/c.crt",
        "sslkey": "/c.key",
        "sslpassword": None,
    }
