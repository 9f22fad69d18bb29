"""Kafka sink throughput against raw producers, for both client libraries (issues 4 and 11).

Every side sends the very same pre-serialized Debezium records (keys and envelopes as JSON) to the
Apache Kafka broker the tests use, each to a fresh topic of PARTITIONS partitions, with the
sink's producer settings (``acks=all``, idempotence, ``linger.ms=5``), and waits until the broker
acknowledged the last record:

- ``raw``: a bare kafka-python ``send`` loop and one ``flush``;
- ``sink``: our sink with kafka-python (``sink.kafka.client=kafka-python``);
- ``raw_confluent``: a bare confluent-kafka ``produce`` loop (no delivery callbacks) and one
  ``flush``, with the librdkafka configuration the sink builds;
- ``sink_confluent``: our sink with confluent-kafka (``sink.kafka.client=confluent``);
- ``raw_confluent_reports``: ``raw_confluent`` with a delivery callback that counts. Not a
  baseline: it shows what per-record delivery reports cost any confluent-kafka producer.

The sinks get the records in engine-sized batches through ``handle_batch`` with a real offset
tracker: a record counts once its acknowledgement marked it and the tracker's done prefix covers
it - the cost of never committing an unacknowledged offset. The confluent sides send
CONFLUENT_SCALE times as many records, CONFLUENT_REPEATS times a round (they are that much
faster; shorter runs are mostly noise). An untimed first round warms the broker's JIT. The sides
of a group run back to back, taking turns to go first (the broker slows down as it fills up, and
the machine's load moves); ``ratio`` (sink / raw), ``confluent_ratio`` (sink_confluent /
raw_confluent) and ``confluent_reports_ratio`` (sink_confluent / raw_confluent_reports) are
medians of per-group ratios. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from airflow_cdc.engine import JsonSerializer
from airflow_cdc.engine.offsets import OffsetTracker
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.sinks.kafka_confluent import producer_config
from airflow_cdc.engine.sinks.kafka_python import producer_settings
from airflow_cdc.engine.sources.synthetic import make_record
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.kafka import KafkaBroker

BATCH = 2048
PARTITIONS = 3
SIDES = ("raw", "sink", "raw_confluent", "sink_confluent", "raw_confluent_reports")
CONFLUENT_SCALE = 4
CONFLUENT_REPEATS = 3


def build(count: int, topic: str) -> list[SerializedRecord]:
    serializer = JsonSerializer()
    partition = {"server": "bench", "task": 0}
    records = [make_record("bench", ["inventory.customers"], 10_000, 0, partition, n) for n in range(count)]
    return [serializer.serialize(r.replace(topic=topic)) for r in records]


def create_topic(bootstrap: str, topic: str) -> None:
    """Every side writes to a topic of PARTITIONS partitions (broker auto-creation differs)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()


def settings(bootstrap: str, client: str) -> dict[str, str]:
    return {"sink.kafka.producer.bootstrap.servers": bootstrap, "sink.kafka.client": client}


def raw(bootstrap: str, records: list[SerializedRecord]) -> float:
    producer = KafkaProducer(**producer_settings(settings(bootstrap, "kafka-python")))
    producer.send(records[0].topic, key=records[0].key, value=records[0].value).get(30)  # metadata, connection
    started = time.perf_counter()
    for record in records:
        producer.send(record.topic, key=record.key, value=record.value)
    producer.flush()
    elapsed = time.perf_counter() - started
    producer.close()
    return elapsed


def raw_confluent(bootstrap: str, records: list[SerializedRecord], *, reports: bool = False) -> float:
    """``reports``: with a delivery callback that counts - what any producer that must know what
    was delivered pays (confluent-kafka builds a Message object for each report)."""
    producer = Producer(producer_config(settings(bootstrap, "confluent")))
    first = records[0]
    producer.produce(first.topic, first.value, first.key)
    producer.flush(30)  # metadata, connection, producer id
    delivered = [0]

    def count(error: object, message: object) -> None:
        delivered[0] += 1

    started = time.perf_counter()
    produce = producer.produce
    if reports:
        for record in records:
            while True:
                try:
                    produce(record.topic, record.value, record.key, -1, count)
                    break
                except BufferError:  # the local queue is full
                    producer.poll(0.01)
    else:  # the baseline: not even a branch per record more
        for record in records:
            while True:
                try:
                    produce(record.topic, record.value, record.key)
                    break
                except BufferError:
                    producer.poll(0.01)
    producer.flush()
    elapsed = time.perf_counter() - started
    producer.close()
    assert delivered[0] == (len(records) if reports else 0)
    return elapsed


def through_sink(client: str) -> Callable[[str, list[SerializedRecord]], float]:
    def run(bootstrap: str, records: list[SerializedRecord]) -> float:
        with KafkaSink(settings(bootstrap, client)) as kafka:
            warm = OffsetTracker()
            first = records[:1]
            kafka.handle_batch(first, RecordCommitter(warm.track([r.record for r in first]), first, [0]))
            wait_until(lambda: warm.committed_seq == 1, 30, "warm-up acknowledged")
            tracker = OffsetTracker()
            started = time.perf_counter()
            for start in range(0, len(records), BATCH):
                batch = records[start : start + BATCH]
                handle = tracker.track([r.record for r in batch])
                kafka.handle_batch(batch, RecordCommitter(handle, batch, range(len(batch))))
            wait_until(lambda: tracker.committed_seq == len(records), 300, "every record acknowledged", interval=0.001)
            return time.perf_counter() - started

    return run


RUNS: dict[str, Callable[[str, list[SerializedRecord]], float]] = {
    "raw": raw,
    "sink": through_sink("kafka-python"),
    "raw_confluent": raw_confluent,
    "sink_confluent": through_sink("confluent"),
    "raw_confluent_reports": lambda bootstrap, records: raw_confluent(bootstrap, records, reports=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50k records, 4 rounds (default 300k, 6 rounds)")
    args = parser.parse_args()
    count, rounds = (50_000, 4) if args.quick else (300_000, 6)
    counts = {side: count * (CONFLUENT_SCALE if "confluent" in side else 1) for side in SIDES}
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    with KafkaBroker.from_env() as broker:
        for side in SIDES:  # warm-up, untimed
            records = build(count // 10, f"bench_warm_{side}")
            create_topic(broker.bootstrap_servers, records[0].topic)
            RUNS[side](broker.bootstrap_servers, records)
        for round_ in range(rounds):
            # The sides of a group run back to back (the machine's load moves), taking turns to go
            # first; the confluent group is cheap, so it runs several times a round.
            for group, repeats in ((SIDES[:2], 1), (SIDES[2:], CONFLUENT_REPEATS)):
                for repeat in range(repeats):
                    turn = (round_ * repeats + repeat) % len(group)
                    for side in group[turn:] + group[:turn]:
                        records = build(counts[side], f"bench_{side}_{round_}_{repeat}")
                        create_topic(broker.bootstrap_servers, records[0].topic)
                        seconds[side].append(RUNS[side](broker.bootstrap_servers, records))
            rates = ", ".join(f"{side} {counts[side] / seconds[side][-1]:,.0f}/s" for side in SIDES)
            print(f"round {round_}: {rates}", flush=True)
    rate = {side: counts[side] / statistics.median(seconds[side]) for side in SIDES}
    # Per-group ratios: the sides of a group ran under the same machine load.
    ratio = statistics.median(r / s for r, s in zip(seconds["raw"], seconds["sink"], strict=True))
    confluent_ratio = statistics.median(
        r / s for r, s in zip(seconds["raw_confluent"], seconds["sink_confluent"], strict=True)
    )
    reports_ratio = statistics.median(
        r / s for r, s in zip(seconds["raw_confluent_reports"], seconds["sink_confluent"], strict=True)
    )
    size = sum(len(r.value or b"") for r in records) / len(records)
    print(
        f"kafka-python: raw {rate['raw']:,.0f}/s, sink {rate['sink']:,.0f}/s; confluent: raw "
        f"{rate['raw_confluent']:,.0f}/s, sink {rate['sink_confluent']:,.0f}/s, raw with delivery reports "
        f"{rate['raw_confluent_reports']:,.0f}/s ({size:.0f}-byte values)"
    )
    print(
        json.dumps(
            {
                "benchmark": "kafka_sink",
                "records": count,
                "rounds": rounds,
                "events_per_s": round(rate["sink"]),
                "baseline_events_per_s": round(rate["raw"]),
                "baseline": "raw kafka-python producer, acks=all",
                "ratio": round(ratio, 3),
                "confluent_records": counts["sink_confluent"],
                "confluent_groups": len(seconds["sink_confluent"]),
                "confluent_events_per_s": round(rate["sink_confluent"]),
                "confluent_baseline_events_per_s": round(rate["raw_confluent"]),
                "confluent_baseline": "raw confluent-kafka producer, the sink's librdkafka settings",
                "confluent_ratio": round(confluent_ratio, 3),
                "confluent_reports_baseline_events_per_s": round(rate["raw_confluent_reports"]),
                "confluent_reports_ratio": round(reports_ratio, 3),
                "value_bytes": round(size),
            }
        )
    )


if __name__ == "__main__":
    main()
