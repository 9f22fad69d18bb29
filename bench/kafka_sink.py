"""Kafka sink throughput against a raw kafka-python producer (issue 4).

Both sides send the very same pre-serialized Debezium records (keys and envelopes as JSON) to
the Kafka-protocol broker the tests use, with ``acks=all`` and the same producer settings, and
wait until the broker acknowledged the last one. The raw side is a bare ``send`` loop and one
``flush``. The sink side gets the records in engine-sized batches through ``handle_batch`` with a
real offset tracker: a record counts once its acknowledgement marked it and the tracker's done
prefix covers it - the cost of never committing an unacknowledged offset. Rounds alternate
which side goes first;
the ratio is the median of the rounds' ratios. The last line is one JSON object with the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from airflow_cdc.engine import JsonSerializer
from airflow_cdc.engine.offsets import OffsetTracker
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.sinks import KafkaSink
from airflow_cdc.engine.sinks.kafka import PRODUCER_DEFAULTS
from airflow_cdc.engine.sources.synthetic import make_record
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.kafka import KafkaBroker

BATCH = 2048
PARTITIONS = 3


def build(count: int, topic: str) -> list[SerializedRecord]:
    serializer = JsonSerializer()
    partition = {"server": "bench", "task": 0}
    records = [make_record("bench", ["inventory.customers"], 10_000, 0, partition, n) for n in range(count)]
    return [serializer.serialize(r.replace(topic=topic)) for r in records]


def create_topic(bootstrap: str, topic: str) -> None:
    """Both sides write to a topic of PARTITIONS partitions (broker auto-creation differs)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()


def raw(bootstrap: str, records: list[SerializedRecord]) -> float:
    create_topic(bootstrap, records[0].topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_DEFAULTS)
    producer.send(records[0].topic, key=records[0].key, value=records[0].value).get(30)  # metadata, connection
    started = time.perf_counter()
    for record in records:
        producer.send(record.topic, key=record.key, value=record.value)
    producer.flush()
    elapsed = time.perf_counter() - started
    producer.close()
    return elapsed


def sink(bootstrap: str, records: list[SerializedRecord]) -> float:
    create_topic(bootstrap, records[0].topic)
    with KafkaSink({"sink.kafka.producer.bootstrap.servers": bootstrap}) as kafka:
        warm = OffsetTracker()
        kafka.handle_batch(records[:1], RecordCommitter(warm.track([r.record for r in records[:1]]), records[:1], [0]))
        wait_until(lambda: warm.committed_seq == 1, 30, "warm-up acknowledged")
        tracker = OffsetTracker()
        started = time.perf_counter()
        for start in range(0, len(records), BATCH):
            batch = records[start : start + BATCH]
            handle = tracker.track([r.record for r in batch])
            kafka.handle_batch(batch, RecordCommitter(handle, batch, range(len(batch))))
        wait_until(lambda: tracker.committed_seq == len(records), 300, "every record acknowledged", interval=0.001)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50k records, 3 rounds (default 300k, 5 rounds)")
    args = parser.parse_args()
    count, rounds = (50_000, 3) if args.quick else (300_000, 5)
    with KafkaBroker.from_env() as broker:
        raw_s, sink_s = [], []
        for round_ in range(rounds):
            # Alternate who goes first: the broker slows down as it fills up.
            for side in ("raw", "sink") if round_ % 2 == 0 else ("sink", "raw"):
                records = build(count, f"bench_{side}_{round_}")
                if side == "raw":
                    raw_s.append(raw(broker.bootstrap_servers, records))
                else:
                    sink_s.append(sink(broker.bootstrap_servers, records))
            print(f"round {round_}: raw {count / raw_s[-1]:,.0f}/s, sink {count / sink_s[-1]:,.0f}/s", flush=True)
    raw_rate, sink_rate = count / statistics.median(raw_s), count / statistics.median(sink_s)
    # Per-round ratios: both sides of a round ran under the same machine load.
    ratio = statistics.median(r / s for r, s in zip(raw_s, sink_s, strict=True))
    size = sum(len(r.value or b"") for r in records) / count
    print(f"raw producer: {raw_rate:,.0f} records/s; sink: {sink_rate:,.0f} records/s ({size:.0f}-byte values)")
    print(
        json.dumps(
            {
                "benchmark": "kafka_sink",
                "records": count,
                "events_per_s": round(sink_rate),
                "baseline_events_per_s": round(raw_rate),
                "baseline": "raw kafka-python producer, acks=all",
                "ratio": round(ratio, 3),
                "value_bytes": round(size),
            }
        )
    )


if __name__ == "__main__":
    main()
