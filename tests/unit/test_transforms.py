import pytest

from airflow_cdc.engine import ConfigError, Op, SourceRecord, change_envelope, source_info
from airflow_cdc.engine.config import Config
from airflow_cdc.engine.transforms import ExtractNewRecordState, RegexRouter, build_transform_chain


def event(op: str, before=None, after=None, topic="shop.public.orders") -> SourceRecord:
    source = source_info(
        connector="postgresql",
        name="shop",
        ts_ns=1_700_000_000_123_000_000,
        db="shop",
        schema="public",
        table="orders",
        lsn=42,
    )
    value = change_envelope(Op(op), before=before, after=after, source=source, ts_ns=1_700_000_000_456_000_000)
    return SourceRecord(topic, {"id": 1}, value, {"server": "shop"}, {"lsn": 42})


def unwrap(**settings) -> ExtractNewRecordState:
    return ExtractNewRecordState(Config(settings))


def test_regex_router_renames_whole_matches_with_java_group_references():
    router = RegexRouter(Config({"regex": r"shop\.public\.(.*)", "replacement": "orders_$1"}))
    assert router.apply(event("c", after={"id": 1})).topic == "orders_orders"
    other = event("c", after={"id": 1}, topic="shop.audit.log")
    assert router.apply(other) is other


def test_unwrap_emits_the_row_after_the_change():
    assert unwrap().apply(event("u", before={"id": 1, "v": 1}, after={"id": 1, "v": 2})).value == {"id": 1, "v": 2}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("drop", "dropped"),
        ("tombstone", None),
        ("delete-to-tombstone", None),
        ("rewrite", {"id": 1, "v": 1, "__deleted": "true"}),
        ("rewrite-with-tombstone", {"id": 1, "v": 1, "__deleted": "true"}),
    ],
)
def test_unwrap_handles_deletes_like_debezium(mode, expected):
    out = unwrap(**{"delete.tombstone.handling.mode": mode}).apply(event("d", before={"id": 1, "v": 1}))
    if expected == "dropped":
        assert out is None
    else:
        assert out is not None and out.value == expected


@pytest.mark.parametrize(("mode", "kept"), [("tombstone", False), ("rewrite", False), ("rewrite-with-tombstone", True)])
def test_unwrap_keeps_tombstones_only_in_rewrite_with_tombstone(mode, kept):
    tombstone = SourceRecord("t", {"id": 1}, None, {}, {})
    out = unwrap(**{"delete.tombstone.handling.mode": mode}).apply(tombstone)
    assert (out is tombstone) if kept else (out is None)


def test_unwrap_rewrite_marks_live_rows_not_deleted_and_adds_fields():
    transform = unwrap(**{"delete.tombstone.handling.mode": "rewrite", "add.fields": "op,table,lsn,source.ts_ms"})
    out = transform.apply(event("c", after={"id": 1}))
    assert out is not None
    assert out.value == {
        "id": 1,
        "__deleted": "false",
        "__op": "c",
        "__table": "orders",
        "__lsn": 42,
        "__source_ts_ms": 1_700_000_000_123,
    }


def test_unwrap_adds_headers():
    out = unwrap(**{"add.headers": "op,db"}).apply(event("c", after={"id": 1}))
    assert out is not None and out.headers == (("__op", b'"c"'), ("__db", b'"shop"'))


def test_chain_from_config_with_a_negated_predicate():
    chain = build_transform_chain(
        {
            "transforms": "keepOrders,unwrap",
            "transforms.keepOrders.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.keepOrders.predicate": "isOrders",
            "transforms.keepOrders.negate": "true",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "predicates": "isOrders",
            "predicates.isOrders.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.isOrders.pattern": r".*\.orders",
        }
    )
    out = chain.apply(event("c", after={"id": 1}))
    assert out is not None and out.value == {"id": 1}
    assert chain.apply(event("c", after={"id": 1}, topic="shop.public.users")) is None


def test_chain_config_problems_are_all_reported():
    with pytest.raises(ConfigError) as error:
        build_transform_chain(
            {
                "transforms": "a,b,c,d",
                "transforms.b.type": "Nope",
                "transforms.c.type": "RegexRouter",
                "transforms.d.type": "Filter",
                "transforms.d.predicate": "missing",
                "transforms.e.type": "unused",
            }
        )
    assert {p.key for p in error.value.problems} == {
        "transforms.a.type",
        "transforms.b.type",
        "transforms.c.regex",
        "transforms.c.replacement",
        "transforms.d.predicate",
    }


def test_bad_regex_is_a_config_problem():
    with pytest.raises(ConfigError, match="does not compile"):
        build_transform_chain(
            {
                "transforms": "r",
                "transforms.r.type": "RegexRouter",
                "transforms.r.regex": "(",
                "transforms.r.replacement": "x",
            }
        )
