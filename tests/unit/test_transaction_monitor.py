"""The transaction monitor (provide.transaction.metadata): Debezium's values, field order, offsets
and the Java HashMap order of ``data_collections``, checked against a real JVM."""

from __future__ import annotations

import random
import shutil
import subprocess
import textwrap
from pathlib import Path

import orjson
import pytest

from airflow_cdc.engine.transaction_monitor import TransactionMonitor

PARTITION = {"server": "inv"}


def _monitor() -> TransactionMonitor:
    return TransactionMonitor("inv.transaction", PARTITION)


def test_begin_event_end_values_in_debeziums_field_order() -> None:
    monitor = _monitor()
    assert monitor.begin("571")
    begin = monitor.begin_record("571:100", 1700000000123, {"lsn": 100})
    assert begin.topic == "inv.transaction"
    assert orjson.dumps(begin.key) == b'{"id":"571:100"}'
    assert orjson.dumps(begin.value) == (
        b'{"status":"BEGIN","id":"571:100","event_count":null,"data_collections":null,"ts_ms":1700000000123}'
    )
    assert monitor.event("s1.a", "571:101") == {"id": "571:101", "total_order": 1, "data_collection_order": 1}
    block = orjson.dumps(monitor.event("s2.a", "571:102"))
    assert block == b'{"id":"571:102","total_order":2,"data_collection_order":1}'
    assert monitor.event("s1.a", "571:103") == {"id": "571:103", "total_order": 3, "data_collection_order": 2}
    end = monitor.end_record("571:104", 1700000000123, {"lsn": 104})
    assert orjson.dumps(end.value) == (
        b'{"status":"END","id":"571:104","event_count":3,"data_collections":[{"data_collection":"s1.a",'
        b'"event_count":2},{"data_collection":"s2.a","event_count":1}],"ts_ms":1700000000123}'
    )
    monitor.end()
    assert not monitor.in_progress and monitor.stored({"lsn": 105}) == {"lsn": 105}


def test_offsets_carry_the_transaction_and_a_restart_continues_its_numbering() -> None:
    monitor = _monitor()
    monitor.begin("7")
    monitor.event("public.a", "7")
    monitor.event("public.b", "7")
    monitor.event("public.a", "7")
    stored = monitor.stored({"lsn": 9})
    # Debezium's keys (TransactionContext.store).
    assert stored == {
        "lsn": 9,
        "transaction_id": "7",
        "transaction_data_collection_order_public.a": 2,
        "transaction_data_collection_order_public.b": 1,
    }
    restarted = _monitor()
    restarted.load(orjson.loads(orjson.dumps(stored)))  # as an offsets file stores it
    assert restarted.in_progress
    assert not restarted.begin("7")  # the replayed start: no second BEGIN, counters kept
    assert restarted.event("public.b", "7") == {"id": "7", "total_order": 4, "data_collection_order": 2}
    # Another transaction starts afresh.
    assert restarted.begin("8")
    assert restarted.event("public.b", "8") == {"id": "8", "total_order": 1, "data_collection_order": 1}


_JAVA = """
import java.util.*;
public class HashOrder {
    // One transaction per line; one map reused with clear(), counted with put(), as Debezium's
    // TransactionContext does (merge() would insert at a bucket's head: another order).
    public static void main(String[] args) {
        Map<String, Long> counts = new HashMap<>();
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            counts.clear();
            for (String k : in.nextLine().trim().split(" ")) counts.put(k, counts.getOrDefault(k, 0L) + 1);
            StringBuilder out = new StringBuilder();
            for (Map.Entry<String, Long> e : counts.entrySet())
                out.append(e.getKey()).append('=').append(e.getValue()).append(' ');
            System.out.println(out.toString().trim());
        }
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JVM (the Connect worker's) to compare with")
def test_data_collections_in_the_order_of_javas_hashmap(tmp_path: Path) -> None:
    rng = random.Random(27)
    names = [f"{rng.choice(['public', 's1', 'inventory', 'db_ü'])}.t{rng.randrange(10_000)}" for _ in range(200)]
    # Small transactions, then one of 40 tables (the map grows), then small ones again: the
    # capacity a transaction left is kept by clear(), which changes the later orders.
    sizes = [2, 3, 5, 8, 13, 40, 3, 4, 12, 13, 2]
    transactions = [[rng.choice(names) for _ in range(size * 2)] for size in sizes]
    source = tmp_path / "HashOrder.java"
    source.write_text(textwrap.dedent(_JAVA))
    text = "\n".join(" ".join(t) for t in transactions) + "\n"
    java = subprocess.run(["java", str(source)], input=text, capture_output=True, text=True, timeout=120, check=True)
    expected = java.stdout.splitlines()
    monitor = _monitor()
    ours = []
    for number, transaction in enumerate(transactions):
        monitor.begin(str(number))
        for name in transaction:
            monitor.event(name, str(number))
        end = monitor.end_record(str(number), 0, {})
        ours.append(" ".join(f"{c['data_collection']}={c['event_count']}" for c in end.value["data_collections"]))
        monitor.end()
    assert ours == expected
