"""Asset URIs of captured tables, the events a capture or a snapshot emits, lineage without the
openlineage provider."""

from __future__ import annotations

import importlib.util

import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_cdc.assets import (
    collection_of_topic,
    emit_table_events,
    operator_lineage,
    parse_table_uri,
    sink_dataset,
    snapshot_rows,
    table_asset,
    table_uri,
)
from airflow_cdc.engine.notifications import INCREMENTAL, Notification


def test_the_uri_scheme() -> None:
    assert table_uri("shop", "public.orders") == "cdc://shop/public.orders"
    assert table_asset("shop", "shop.public.orders").uri == "cdc://shop/shop.public.orders"  # database.names
    assert table_uri("shop", "public.Ordres Été") == "cdc://shop/public.Ordres%20%C3%89t%C3%A9"
    assert parse_table_uri(table_uri("shop", "public.Ordres Été")) == ("shop", "public.Ordres Été")
    assert parse_table_uri("s3://bucket/key") is None and parse_table_uri("cdc://shop") is None
    with pytest.raises(ValueError, match=r"topic\.prefix"):
        table_uri("", "public.orders")


def test_topics_that_carry_a_tables_rows() -> None:
    config = {"signal.data.collection": "public.debezium_signal"}
    assert collection_of_topic("shop.public.orders", "shop", config) == "public.orders"
    assert collection_of_topic("shop.inventory.orders", "shop") == "inventory.orders"  # MySQL: database.table
    for other in (
        "shop.transaction",
        "__debezium-heartbeat.shop",
        "other.public.orders",
        "shop.public.debezium_signal",
    ):
        assert collection_of_topic(other, "shop", config) is None


def test_an_alias_gets_an_event_per_table_that_moved_and_a_listed_asset_its_rows() -> None:
    events = OutletEventAccessors()
    alias, customers, elsewhere = AssetAlias("shop-tables"), table_asset("shop", "public.customers"), Asset("s3://b/k")
    extra = {"offsets": [{"partition": {"server": "shop"}, "offset": {"lsn": 5}}]}
    moved = emit_table_events(
        {"outlet_events": events}, [alias, customers, elsewhere], "shop", {"public.orders": 3, "public.items": 0}, extra
    )
    assert moved == ["cdc://shop/public.orders"]
    assert [(e.dest_asset_key.uri, e.extra) for e in events[alias].asset_alias_events] == [
        ("cdc://shop/public.orders", {"rows": 3, **extra})
    ]
    assert events[customers].extra == {"rows": 0, **extra}
    assert events[elsewhere].extra == {}


def test_rows_of_a_completed_snapshot_from_its_notifications() -> None:
    def scan(signal_id: str, table: str, rows: int) -> Notification:
        data = {"scanned_collection": table, "total_rows_scanned": str(rows), "status": "SUCCEEDED"}
        return Notification(INCREMENTAL, "TABLE_SCAN_COMPLETED", data, id=signal_id)

    seen = [scan("s1", "public.orders", 20), scan("s2", "public.orders", 7), scan("s1", "public.customers", 5)]
    seen.append(Notification(INCREMENTAL, "COMPLETED", {}, id="s1"))
    assert snapshot_rows(seen, "s1") == {"public.orders": 20, "public.customers": 5}


def test_lineage_without_the_openlineage_provider_is_none() -> None:
    assert importlib.util.find_spec("airflow.providers.openlineage") is None  # an optional extra
    assert operator_lineage([("postgres://db:5432", "shop.public.orders")], []) is None
    assert operator_lineage([], []) is None
    assert sink_dataset({"sink.type": "kafka", "sink.kafka.producer.bootstrap.servers": "k1:9092,k2:9092"}, "t") == (
        "kafka://k1:9092",
        "t",
    )
    assert sink_dataset({"sink.changelog.dir": "/var/cdc/changelog"}, "t") == ("file", "/var/cdc/changelog/t")
    assert sink_dataset({"sink.type": "null"}, "t") is None


def test_lineage_with_the_openlineage_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shapes the provider documents: ``OperatorLineage(inputs, outputs)`` of
    ``Dataset(namespace, name)`` (stand-ins here: the provider is an optional extra)."""
    import sys
    import types
    from dataclasses import dataclass, field

    @dataclass
    class Dataset:
        namespace: str
        name: str

    @dataclass
    class OperatorLineage:
        inputs: list[Dataset] = field(default_factory=list)
        outputs: list[Dataset] = field(default_factory=list)

    for name, attribute, value in (
        ("airflow.providers.openlineage.extractors", "OperatorLineage", OperatorLineage),
        ("openlineage.client.event_v2", "Dataset", Dataset),
    ):
        module = types.ModuleType(name)
        setattr(module, attribute, value)
        monkeypatch.setitem(sys.modules, name, module)
    lineage = operator_lineage(
        [("postgres://db:5432", "shop.public.orders")], [("kafka://k:9092", "shop.public.orders")]
    )
    assert lineage == OperatorLineage(
        [Dataset("postgres://db:5432", "shop.public.orders")], [Dataset("kafka://k:9092", "shop.public.orders")]
    )
