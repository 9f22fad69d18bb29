"""Engine micro-benchmark (seed 000): synthetic records -> transform -> JSON -> consumer.

Baseline, measured in the same run over the very same records: a plain single-threaded loop
doing the same transform and serialization into the same consumer. The engine's source replays
pre-built records, so both sides do identical work and the ratio isolates the engine's cost
(threads, chunking, offset tracking, commits).

Scenarios:
* ordered   - record.processing.order=ORDERED, discarding consumer (target ratio >= 0.8)
* batch     - a batch handler, discarding (same baseline); the handler gets the whole batch, so
              max.batch.size decides how much is alive at once (also run with 256)
* io        - an I/O-bound consumer: a 1 ms blocking call per 10 records; UNORDERED with 4
              threads against the single-threaded loop (target >= 3x)
* io_light  - the issue's example, 1 ms per 100 records: here CPU dominates, reported as-is

The last line is one JSON object: events, events_per_s, baseline_events_per_s, ratio (ORDERED),
plus every scenario's figures.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine import Config, Engine, JsonSerializer, SourceConnector, SourceRecord, SourceTask, TaskContext
from airflow_cdc.engine.sources.synthetic import make_record
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.engine.transforms import RegexRouter

TABLES = ["inventory.customers", "inventory.orders"]
POLL_S = 0.001
ROUTE = {"regex": r"bench\.inventory\.(.*)", "replacement": "cdc.$1"}


def build_records(count: int) -> list[SourceRecord]:
    partition = {"server": "bench", "task": 0}
    records = [make_record("bench", TABLES, 10_000, 0, partition, seq) for seq in range(count)]
    # The pre-built pool is a benchmark artifact (a real source holds a batch, not a million
    # records): keep the garbage collector from walking it again and again, for both sides.
    gc.collect()
    gc.freeze()
    return records


class ReplayConnector(SourceConnector):
    """Serves pre-built records in max.batch.size slices: the synthetic source minus generation."""

    def __init__(self, records: list[SourceRecord], batch: int) -> None:
        self.records, self.batch = records, batch

    def task_class(self) -> type[SourceTask]:
        connector = self

        class ReplayTask(SourceTask):
            def start(self, context: TaskContext) -> None:
                self.position = 0

            def poll(self) -> list[SourceRecord]:
                start, self.position = self.position, self.position + connector.batch
                if start >= len(connector.records):
                    threading.Event().wait(0.01)
                    return []
                return connector.records[start : self.position]

            def stop(self) -> None:
                pass

        return ReplayTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return [self.config]


def io_consumer(every: int) -> Callable[[Any], None]:
    ticks = itertools.count(1)

    def consume(item: Any) -> None:
        if next(ticks) % every == 0:
            time.sleep(0.001)  # the blocking call (a network round trip, an fsync)

    return consume


def discard(item: Any) -> None:
    pass


def baseline(records: list[SourceRecord], io_every: int = 0) -> float:
    """Events/s of a plain loop: transform + serialize + consume, one thread."""
    router, serializer = RegexRouter(Config(ROUTE)), JsonSerializer()
    consume = io_consumer(io_every) if io_every else discard
    started = time.perf_counter()
    for record in records:
        consume(serializer.serialize(router.apply(record)))
    return len(records) / (time.perf_counter() - started)


def engine_rate(records: list[SourceRecord], *, mode: str, threads: int, io_every: int = 0, batch: int = 2048) -> float:
    """Events/s from engine start until every record is delivered and marked done (the offset
    tracker's prefix covers them all), so the consumers need no counting of their own."""
    settings = {
        "name": "bench",
        "offset.storage": "memory",
        "offset.flush.interval.ms": 1000,
        "record.processing.threads": threads,
        "record.processing.order": "UNORDERED" if mode == "unordered" else "ORDERED",
        "transforms": "route",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": ROUTE["regex"],
        "transforms.route.replacement": ROUTE["replacement"],
    }

    class Discard:
        def handle_batch(self, batch: list[Any], committer: Any) -> None:
            committer.mark_all_processed()

    consumers: dict[str, Any]
    if mode == "batch":
        consumers = {"batch_handler": Discard()}
    else:
        consumers = {"consumer": io_consumer(io_every) if io_every else discard}
    engine = Engine(settings, connector=ReplayConnector(records, batch), serializer=JsonSerializer(), **consumers)
    runner = threading.Thread(target=engine.run)
    started = time.perf_counter()
    runner.start()
    wait_until(
        lambda: engine.tasks and engine.tasks[0].tracker.committed_seq >= len(records),
        600,
        "every record delivered",
        interval=0.001,
    )
    elapsed = time.perf_counter() - started
    engine.close(30)
    runner.join(30)
    return len(records) / elapsed


def median_of(repeats: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k events, 3 repeats (under a minute)")
    parser.add_argument("--events", type=int, help="override the number of events")
    args = parser.parse_args()
    events = args.events or (100_000 if args.quick else 1_000_000)
    io_events = events // 10 if args.quick else events // 20
    repeats = 5
    records = build_records(events)
    io_records = records[:io_events]
    from airflow_cdc.engine.config import available_cores

    cores = available_cores()
    base = median_of(repeats, lambda: baseline(records))
    ordered = median_of(repeats, lambda: engine_rate(records, mode="ordered", threads=cores))
    batch = median_of(repeats, lambda: engine_rate(records, mode="batch", threads=cores))
    small_batch = median_of(repeats, lambda: engine_rate(records, mode="batch", threads=cores, batch=256))
    io_base = median_of(repeats, lambda: baseline(io_records, io_every=10))
    io_unordered = median_of(repeats, lambda: engine_rate(io_records, mode="unordered", threads=4, io_every=10))
    light_base = median_of(repeats, lambda: baseline(io_records, io_every=100))
    light_unordered = median_of(repeats, lambda: engine_rate(io_records, mode="unordered", threads=4, io_every=100))

    lines = [
        ("baseline loop (1 thread)", base, None),
        (f"engine ORDERED ({cores} threads)", ordered, ordered / base),
        (f"engine batch handler ({cores} threads)", batch, batch / base),
        ("engine batch handler, max.batch.size=256", small_batch, small_batch / base),
        ("baseline loop, io 1ms/10 rec", io_base, None),
        ("engine UNORDERED 4 threads, io 1ms/10", io_unordered, io_unordered / io_base),
        ("baseline loop, io 1ms/100 rec", light_base, None),
        ("engine UNORDERED 4 threads, io 1ms/100", light_unordered, light_unordered / light_base),
    ]
    for label, rate, ratio in lines:
        print(f"{label:42s} {rate:12,.0f} events/s" + (f"   ratio {ratio:5.2f}" if ratio is not None else ""))
    print(
        json.dumps(
            {
                "benchmark": "engine",
                "events": events,
                "events_per_s": round(ordered),
                "baseline_events_per_s": round(base),
                "ratio": round(ordered / base, 3),
                "batch_events_per_s": round(batch),
                "batch_ratio": round(batch / base, 3),
                "batch_256_ratio": round(small_batch / base, 3),
                "io_events": io_events,
                "io_baseline_events_per_s": round(io_base),
                "io_unordered_4_threads_events_per_s": round(io_unordered),
                "io_speedup": round(io_unordered / io_base, 2),
                "io_light_baseline_events_per_s": round(light_base),
                "io_light_unordered_4_threads_events_per_s": round(light_unordered),
                "io_light_speedup": round(light_unordered / light_base, 2),
                "threads": cores,
            }
        )
    )


if __name__ == "__main__":
    main()
