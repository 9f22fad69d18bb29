"""The transaction-consistent mode's split of a batch (ADR 0023) on small frames: which records
apply now and which wait for the rest of their source transaction."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.spark.frames import RAW_SCHEMA
from airflow_cdc.spark.transactions import Tables, transaction_topic, with_transaction_topic

pytestmark = pytest.mark.slow

TX = "shop.transaction"
A, B = "shop.public.a", "shop.public.b"
TABLES = Tables(TX, (A, B))


def event(table: str, key: int, txid: str | None, order: int = 1, op: str = "u") -> str:
    tx = None if txid is None else {"id": txid, "total_order": order, "data_collection_order": order}
    source = {"db": "shop", "schema": "public", "table": table.rsplit(".", 1)[1], "lsn": 10 + key, "snapshot": "false"}
    return json.dumps({"before": None, "after": {"id": key}, "source": source, "op": op, "transaction": tx})


def end(txid: str, **counts: int) -> str:
    collections = [{"data_collection": f"shop.public.{t}", "event_count": n} for t, n in counts.items()]
    total = sum(counts.values())
    return json.dumps({"status": "END", "id": txid, "event_count": total, "data_collections": collections})


def split_of(spark: Any, records: list[tuple[str, int, str]], tables: Tables = TABLES) -> tuple[set[Any], set[Any]]:
    """(ready, held) as sets of (topic, offset)."""
    from airflow_cdc.spark.transactions import split, tag

    rows = [(topic, 0, offset, json.dumps({"id": offset}), value) for topic, offset, value in records]
    cut = split(tag(spark.createDataFrame(rows, RAW_SCHEMA), tables), tables)
    return {(r.topic, r.offset) for r in cut.ready.collect()}, {(r[0], r[2]) for r in cut.held}


def test_complete_transactions_apply_and_the_rest_waits(spark: Any) -> None:
    ready, held = split_of(
        spark,
        [
            (A, 0, event(A, 1, None, op="r")),  # a snapshot read: no transaction, applies
            (A, 1, event(A, 1, "t1", 1)),
            (B, 1, event(B, 2, "t1", 2)),
            (TX, 1, end("t1", a=1, b=1)),
            (A, 2, event(A, 3, "t2", 1)),  # t2's b event has not arrived
            (TX, 2, end("t2", a=1, b=1)),
            (B, 3, event(B, 4, "t3", 1)),  # t3's END has not arrived
        ],
    )
    assert ready == {(A, 0), (A, 1), (B, 1)}
    assert held == {(A, 2), (TX, 2), (B, 3)}


def test_a_complete_transaction_after_an_incomplete_one_waits_too(spark: Any) -> None:
    ready, held = split_of(
        spark,
        [
            (A, 1, event(A, 1, "t1", 1)),
            (TX, 1, end("t1", a=1, b=1)),
            (A, 2, event(A, 2, "t2", 1)),
            (TX, 2, end("t2", a=1)),
        ],
    )
    assert ready == set()
    assert held == {(A, 1), (TX, 1), (A, 2), (TX, 2)}


def test_only_the_jobs_tables_count_and_a_resent_event_counts_once(spark: Any) -> None:
    ready, held = split_of(
        spark,
        [
            (A, 1, event(A, 1, "t1", 1)),
            (TX, 1, end("t1", a=1, other=3)),  # shop.public.other is not read by this job
            (A, 2, event(A, 2, "t2", 1)),
            (A, 3, event(A, 2, "t2", 1)),  # the same event again (at-least-once delivery)
            (TX, 2, end("t2", a=2)),
        ],
    )
    assert ready == {(A, 1)}
    assert held == {(A, 2), (A, 3), (TX, 2)}


def test_postgresql_ids_match_by_their_xid(spark: Any) -> None:
    """Debezium's PostgreSQL connector (3.7) writes ``<xid>:<LSN>`` with each record's own LSN."""
    ready, held = split_of(
        spark,
        [
            (A, 1, event(A, 1, "730:100", 1)),
            (B, 1, event(B, 2, "730:104", 2)),
            (TX, 1, end("730:120", a=1, b=1)),
            (A, 2, event(A, 3, "731:130", 1)),
            (TX, 2, end("731:150", a=1, b=1)),
        ],
    )
    assert ready == {(A, 1), (B, 1)}
    assert held == {(A, 2), (TX, 2)}


def test_any_transaction_id_filters_as_itself(spark: Any) -> None:
    """The held ids go to Spark as one SQL IN list: quotes and backslashes stay literal."""
    odd = "gtid'1\\x:2"
    ready, held = split_of(
        spark,
        [
            (A, 1, event(A, 1, "t1", 1)),
            (TX, 1, end("t1", a=1)),
            (A, 2, event(A, 2, odd, 1)),
            (TX, 2, end(odd, a=1, b=1)),
        ],
    )
    assert ready == {(A, 1)}
    assert held == {(A, 2), (TX, 2)}


def test_a_change_without_a_transaction_block_names_the_connector_setting(spark: Any) -> None:
    with pytest.raises(ConfigError, match=r"provide\.transaction\.metadata"):
        split_of(spark, [(A, 1, event(A, 1, None, op="u"))])


def test_the_transaction_topic_is_found_and_subscribed() -> None:
    assert transaction_topic((A, B), None) == TX
    assert transaction_topic((A,), "custom.tx") == "custom.tx"
    with pytest.raises(ConfigError, match="transaction_topic"):
        transaction_topic(("plain",), None)
    assert Tables(TX, (A,)).counts("db.public.a") and not Tables(TX, (A,)).counts("public.b")
    assert Tables(TX, (), r"shop\.public\..*").counts("public.b")

    from airflow_cdc.spark.apply import ApplyJob
    from airflow_cdc.spark.reading import SourceOptions

    job = ApplyJob(source=SourceOptions(topics=(A,)), target_url="postgresql://x", checkpoint="c")
    # Kafka: by pattern, as the transaction topic exists only from the first streamed transaction.
    subscribed = with_transaction_topic(job)
    assert (subscribed.topics, subscribed.topic_pattern) == ((), re.escape(A) + "|" + re.escape(TX))
    job.source = SourceOptions(kind="changelog", changelog_dir="d", topics=(A,))
    assert with_transaction_topic(job).topics == (A, TX)
    job.source, job.transaction_topic = SourceOptions(topic_pattern=r"shop\.public\..*"), TX  # a pattern names none
    assert with_transaction_topic(job).topic_pattern == r"(?:shop\.public\..*)|shop\.transaction"


def test_a_lake_target_keeps_its_held_records_and_batch_id_and_says_it_is_not_atomic(
    spark: Any, tmp_path: Any, capsys: Any
) -> None:
    from airflow_cdc.spark.frames import LATEST_SCHEMA
    from airflow_cdc.spark.targets.lake_consistent import ConsistentLakeTarget
    from airflow_cdc.spark.transaction_order import Waiting
    from airflow_cdc.spark.transactions import Stored

    target = ConsistentLakeTarget(f"delta:{tmp_path}", {}, {}, TX)
    assert "commit one after another" in capsys.readouterr().err
    assert target.load("q1") == Stored(None, [])
    held = [(A, 0, 7, '{"id": 1}', event(A, 1, "t9"))]
    waiting = Waiting("t9", 1, 2, 1, 1000, "public.b 0 of 1")
    target.apply_batch(spark.createDataFrame([], LATEST_SCHEMA), 3, held, "q1", waiting)
    assert target.load("q1") == Stored(3, held, waiting)
    assert target.load("q2") == Stored(None, [])
    # A new query on the same topic is told of q1's state, with what removes it.
    ConsistentLakeTarget(f"delta:{tmp_path}", {}, {}, TX).report_orphans("q2")
    assert f"rm {tmp_path}/_cdc_pending/q1.json" in capsys.readouterr().err
