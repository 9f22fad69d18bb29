"""The driver's decisions of the transaction-consistent split (``transaction_order.py``): commit
order, what waits, and when a waiting transaction counts as stalled."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.spark.transaction_order import Waiting, plan, stalled, track

TX = "shop.transaction"
A, B = "shop.public.a", "shop.public.b"


def end(txid: str, offset: int, **counts: int) -> dict[str, Any]:
    collections = [{"data_collection": f"public.{t}", "event_count": n} for t, n in counts.items()]
    return {"txid": txid, "topic": TX, "seen": 0, "end_at": (0, offset), "collections": collections, "untagged": None}


def seen(txid: str, topic: str, n: int) -> dict[str, Any]:
    return {"txid": txid, "topic": topic, "seen": n, "end_at": None, "collections": None, "untagged": None}


def decide(*rows: dict[str, Any]) -> Any:
    return plan(rows, TX, lambda name: name.endswith((".a", ".b")))


def test_transactions_apply_in_commit_order_up_to_the_first_incomplete_one() -> None:
    decided = decide(
        end("t2", 5, a=1), seen("t2", A, 1),  # complete, but after t1 in commit order
        end("t1", 3, a=1, b=1), seen("t1", A, 1),
        seen("t3", B, 1),  # no END yet
        end("t0", 1, a=1), seen("t0", A, 1),
        end("t9", 7, other=4),  # counts none of the job's tables
    )  # fmt: skip
    assert decided.held == {"t1", "t2", "t3", "t9"}
    assert decided.held_ends == {"t1", "t2"}
    assert decided.blocker is not None and decided.blocker.txid == "t1"
    assert decided.blocker.missing() == {"public.b": (0, 1)}
    assert decided.overtaken == []  # no later transaction's event on b: its event may be late
    assert decided.ready_events == 1  # t0's
    snapshot = {**seen("", A, 3), "txid": None}  # reads without a transaction apply too
    assert decide(snapshot, end("t1", 3, a=1, b=1), seen("t1", A, 1)).ready_events == 3


def test_later_events_on_a_table_the_blocker_lacks_are_the_stalls_evidence() -> None:
    decided = decide(end("t1", 3, a=1, b=1), seen("t1", A, 1), end("t2", 5, b=1), seen("t2", B, 1))
    assert decided.overtaken == ["public.b"]
    first = track(None, decided, 4, 1000)
    assert first == Waiting("t1", 1, 1, 4, 1000, "public.b 0 of 1")
    second = track(first, decided, 5, 2000)
    assert second == Waiting("t1", 1, 2, 4, 1000, "public.b 0 of 1")
    # The blocker gains an event: it is not stuck, the count starts over.
    gained = decide(end("t1", 3, a=2, b=1), seen("t1", A, 2), end("t2", 5, b=1), seen("t2", B, 1))
    assert track(second, gained, 6, 3000) == Waiting("t1", 2, 1, 6, 3000, "public.b 0 of 1")
    # No evidence: no count.
    assert track(second, decide(end("t1", 3, a=1, b=1), seen("t1", A, 1)), 6, 3000) is None
    error = stalled(second, TX, 61_000)
    assert isinstance(error, ConfigError)
    text = str(error)
    for part in ("source transaction t1 on shop.transaction", "public.b 0 of 1", "for 2 batches", "since batch 4"):
        assert part in text
    assert "1.0 min" in text and "earliest" in text and "consistency=key" in text


def test_a_streamed_change_without_a_transaction_names_the_connector_setting() -> None:
    untagged = {"txid": None, "topic": A, "seen": 1, "end_at": None, "collections": None, "untagged": 17}
    with pytest.raises(ConfigError, match=r"shop\.public\.a \(offset 17\).*provide\.transaction\.metadata"):
        decide(untagged)
    # A BEGIN or a snapshot read has no transaction either, and applies.
    begin = {"txid": None, "topic": TX, "seen": 0, "end_at": None, "collections": None, "untagged": None}
    assert decide(begin, {**untagged, "untagged": None}).held == set()


def test_the_bound_is_a_job_setting() -> None:
    from airflow_cdc.spark.apply import job_from_config, parse_args
    from airflow_cdc.spark.job_config import ApplyConfig, JobConfigError

    flags = ["--topics", A, "--target-url", "postgresql://x/y", "--checkpoint", "/tmp/c"]
    assert parse_args(flags).transaction_stall_batches == 10
    assert parse_args([*flags, "--transaction-stall-batches", "3"]).transaction_stall_batches == 3
    config = ApplyConfig(topics=[A], target_url="postgresql://x/y", checkpoint="/c", transaction_stall_batches=4)
    assert job_from_config(config).transaction_stall_batches == 4
    with pytest.raises(JobConfigError, match="transaction_stall_batches"):
        ApplyConfig(topics=[A], target_url="postgresql://x/y", checkpoint="/c", transaction_stall_batches=0)
