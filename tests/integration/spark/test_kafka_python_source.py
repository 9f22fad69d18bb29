"""The kafka-python streaming source (``format("cdc_kafka")``) against the real broker: every
record exactly once with its topic, partition and offset; maxOffsetsPerTrigger; restarts from a
checkpoint; topics that appear later; and errors that name the option to fix.

The reads in tasks are also checked on their own, without Spark, against kafka-python's own
decoding (the source decodes record batches itself), and for lost records and missing ones.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.frames import RAW_SCHEMA
from airflow_cdc.spark.sources import kafka_python
from airflow_cdc.spark.sources.kafka_python import (
    KafkaDataLossError,
    KafkaReadTimeoutError,
    TopicPartitionRange,
    admit,
    parse_options,
    read_range,
    split_ranges,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Row = tuple[str, int, int, str | None, str | None]


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture
def cdc_spark(spark: Any) -> Any:
    """The session with ``cdc_kafka`` registered (its workers run ``PYSPARK_PYTHON``, which the
    ``spark`` fixture points at this interpreter: the one with kafka-python and pyarrow)."""
    kafka_python.register(spark)
    return spark


def create_topic(broker: Any, name: str, partitions: int = 1) -> None:
    admin = broker.admin()
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
        admin.wait_for_topics([name], timeout_ms=30_000)
    finally:
        admin.close()


def produce(
    broker: Any,
    topic: str,
    records: list[tuple[int, bytes | None, bytes | None]],
    headers: list[tuple[str, bytes]] | None = None,
    **config: Any,
) -> list[Row]:
    """Sends ``(partition, key, value)``s; the rows the source must yield for them."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5, **config)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p, headers=headers) for p, k, v in records]
        producer.flush()
        sent = [f.get(timeout=30) for f in futures]
    finally:
        producer.close()
    return [(topic, m.partition, m.offset, _text(k), _text(v)) for m, (_, k, v) in zip(sent, records, strict=True)]


def _text(blob: bytes | None) -> str | None:
    return None if blob is None else blob.decode("utf-8", "replace")


def changes(count: int, partitions: int = 3, first: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """CDC-like records: JSON keys and values, every 7th a tombstone, every 50th (but no tombstone) without a key."""
    records: list[tuple[int, bytes | None, bytes | None]] = []
    for i in range(first, first + count):
        value = None if i % 7 == 0 else f'{{"op":"u","after":{{"id":{i},"name":"näme {i}"}}}}'.encode()
        key = None if i % 50 == 1 and value is not None else f'{{"id":{i}}}'.encode()
        records.append((i % partitions, key, value))
    return records


def reader(spark: Any, broker: Any, **options: str) -> Any:
    stream = spark.readStream.format("cdc_kafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for name, value in {"startingOffsets": "earliest", **options}.items():
        stream = stream.option(name, value)
    return stream.load()


class Batches:
    """A foreachBatch sink that keeps each micro-batch's rows."""

    def __init__(self) -> None:
        self.batches: dict[int, list[Row]] = {}
        self._lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = [(r.topic, r.partition, r.offset, r.key, r.value) for r in frame.collect()]
        with self._lock:
            self.batches[batch_id] = rows

    @property
    def rows(self) -> list[Row]:
        with self._lock:
            return [row for rows in self.batches.values() for row in rows]

    def sizes(self) -> list[int]:
        with self._lock:
            return [len(rows) for _, rows in sorted(self.batches.items()) if rows]


def run_available_now(frame: Any, checkpoint: Path, sink: Batches | None = None) -> Batches:
    sink = sink or Batches()
    query = frame.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    query = query.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(120), "the availableNow run did not finish"
    finally:
        query.stop()
    return sink


def start_continuous(frame: Any, checkpoint: Path, sink: Batches) -> Any:
    query = frame.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    return query.trigger(processingTime="100 milliseconds").start()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def assert_exactly(rows: list[Row], expected: list[Row]) -> None:
    assert len(rows) == len(set(rows)), "a record was read twice"
    assert sorted(rows, key=repr) == sorted(expected, key=repr)


# --- through Spark -------------------------------------------------------------------------


def test_every_record_once_with_its_partition_and_offset(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    topic = f"{kafka_topic_prefix}.public.orders"
    create_topic(kafka_broker, topic, partitions=3)
    expected = produce(kafka_broker, topic, changes(3000))
    frame = reader(cdc_spark, kafka_broker, subscribe=topic)
    assert frame.schema == cdc_spark.createDataFrame([], RAW_SCHEMA).schema

    sink = run_available_now(frame, tmp_path / "checkpoint")

    assert_exactly(sink.rows, expected)
    assert sink.sizes() == [3000]  # no limit: one batch
    assert {r[1] for r in sink.rows} == {0, 1, 2}
    for partition in range(3):
        offsets = sorted(r[2] for r in sink.rows if r[1] == partition)
        assert offsets == list(range(len(offsets)))
    assert sum(1 for r in sink.rows if r[4] is None) == len([i for i in range(3000) if i % 7 == 0])


def test_max_offsets_per_trigger_splits_the_records_into_batches(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic, partitions=3)
    expected = produce(kafka_broker, topic, changes(2500))
    sink = Batches()
    query = start_continuous(
        reader(cdc_spark, kafka_broker, subscribe=topic, maxOffsetsPerTrigger="600"), tmp_path, sink
    )
    try:
        wait_until(lambda: len(sink.rows) >= 2500, 120, "all records read")
    finally:
        query.stop()
    assert_exactly(sink.rows, expected)
    assert sink.sizes() == [600, 600, 600, 600, 100]


def test_available_now_with_a_limit_reads_one_batch_per_run_and_the_next_run_continues(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    """Spark 4.1 runs a Python source under availableNow as a single batch (see the module)."""
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic, partitions=3)
    expected = produce(kafka_broker, topic, changes(1000))
    frame = reader(cdc_spark, kafka_broker, subscribe=topic, maxOffsetsPerTrigger="400")
    runs = [run_available_now(frame, tmp_path / "checkpoint") for _ in range(3)]
    assert [run.sizes() for run in runs] == [[400], [400], [200]]
    assert_exactly([row for run in runs for row in run.rows], expected)


def test_min_partitions_splits_a_partition_into_slices_read_once_each(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic)
    expected = produce(kafka_broker, topic, changes(2001, partitions=1))
    frame = reader(cdc_spark, kafka_broker, subscribe=topic, minPartitions="4")
    assert_exactly(run_available_now(frame, tmp_path / "checkpoint").rows, expected)


def test_a_restarted_query_reads_only_the_records_produced_since(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic, partitions=3)
    first = produce(kafka_broker, topic, changes(1200))
    frame = reader(cdc_spark, kafka_broker, subscribe=topic)
    assert_exactly(run_available_now(frame, tmp_path / "checkpoint").rows, first)

    second = produce(kafka_broker, topic, changes(700, first=1200))
    assert_exactly(run_available_now(frame, tmp_path / "checkpoint").rows, second)
    assert run_available_now(frame, tmp_path / "checkpoint").rows == []


def test_a_restart_with_a_limit_continues_where_the_last_batch_ended(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    """Admission control starts from the checkpoint's last batch, which Spark hands the source
    on a restart; not from startingOffsets."""
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic, partitions=3)
    expected = produce(kafka_broker, topic, changes(900))
    sink = Batches()
    frame = reader(cdc_spark, kafka_broker, subscribe=topic, maxOffsetsPerTrigger="200")
    query = start_continuous(frame, tmp_path / "checkpoint", sink)
    try:
        wait_until(lambda: len(sink.rows) >= 400, 60, "two batches")
    finally:
        query.stop()
    query = start_continuous(frame, tmp_path / "checkpoint", sink)
    try:
        wait_until(lambda: len(sink.rows) >= 900, 60, "all records")
    finally:
        query.stop()
    assert_exactly(sink.rows, expected)
    assert all(size <= 200 for size in sink.sizes())


def test_subscribe_pattern_picks_up_a_topic_created_later(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    early, late = f"{kafka_topic_prefix}.public.a", f"{kafka_topic_prefix}.public.b"
    create_topic(kafka_broker, early, partitions=2)
    create_topic(kafka_broker, f"other{kafka_topic_prefix}.public.c")  # does not match
    expected = produce(kafka_broker, early, changes(300, partitions=2))
    produce(kafka_broker, f"other{kafka_topic_prefix}.public.c", changes(10, partitions=1))
    sink = Batches()
    frame = reader(cdc_spark, kafka_broker, subscribePattern=rf"{kafka_topic_prefix}\.public\..*")
    query = start_continuous(frame, tmp_path, sink)
    try:
        wait_until(lambda: len(sink.rows) >= 300, 60, f"the records of {early}")
        create_topic(kafka_broker, late, partitions=3)
        expected += produce(kafka_broker, late, changes(450))
        wait_until(lambda: len(sink.rows) >= 750, 60, f"the records of {late}")
    finally:
        query.stop()
    assert_exactly(sink.rows, expected)


def test_offsets_are_committed_to_the_consumer_group_when_one_is_named(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    """Spark calls ``commit(end)`` of a batch when it plans the next one: the group trails by a
    batch (and an availableNow run's single batch is committed by the next run)."""
    topic, group = f"{kafka_topic_prefix}.t", f"{kafka_topic_prefix}-apply"
    create_topic(kafka_broker, topic, partitions=3)
    expected = produce(kafka_broker, topic, changes(600))
    frame = reader(cdc_spark, kafka_broker, subscribe=topic, **{"kafka.group.id": group})
    assert_exactly(run_available_now(frame, tmp_path / "checkpoint").rows, expected)
    expected = produce(kafka_broker, topic, changes(300, first=600))
    assert_exactly(run_available_now(frame, tmp_path / "checkpoint").rows, expected)

    admin = kafka_broker.admin()

    def committed() -> dict[int, int]:
        try:
            offsets = admin.list_group_offsets({group: None}).get(group) or {}
        except KafkaError:  # the coordinator may still be starting
            return {}
        return {tp.partition: meta.offset for tp, meta in offsets.items()}

    try:
        assert wait_until(committed, 30, "a commit") == {0: 200, 1: 200, 2: 200}
    finally:
        admin.close()


def _failure(frame: Any, checkpoint: Path) -> str:
    query = frame.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
    query = query.trigger(availableNow=True).start()
    try:
        with pytest.raises(Exception) as failed:  # StreamingQueryException, carrying the Python error
            query.awaitTermination(120)
    finally:
        query.stop()
    return str(failed.value)


def test_unreachable_bootstrap_servers_fail_naming_the_option(cdc_spark: Any, tmp_path: Path) -> None:
    frame = (
        cdc_spark.readStream.format("cdc_kafka")
        .option("kafka.bootstrap.servers", f"127.0.0.1:{free_port()}")
        .option("kafka.bootstrap.timeout.ms", "2000")
        .option("subscribe", "orders")
        .load()
    )
    message = _failure(frame, tmp_path)
    assert "KafkaUnreachableError" in message
    assert "kafka.bootstrap.servers" in message


def test_no_matching_topic_fails_naming_the_option(
    cdc_spark: Any, kafka_broker: Any, kafka_topic_prefix: str, tmp_path: Path
) -> None:
    message = _failure(reader(cdc_spark, kafka_broker, subscribe=f"{kafka_topic_prefix}.missing"), tmp_path / "a")
    assert "subscribe" in message and f"{kafka_topic_prefix}.missing" in message
    message = _failure(reader(cdc_spark, kafka_broker, subscribePattern=rf"{kafka_topic_prefix}\..*"), tmp_path / "b")
    assert "subscribePattern" in message


def test_options_that_cannot_work_fail_at_load(cdc_spark: Any) -> None:
    with pytest.raises(Exception) as failed:
        cdc_spark.readStream.format("cdc_kafka").option("subscribe", "t").option("kafka.sasl.jaas.config", "x").option(
            "maxOffsetsPerTrigger", "0"
        ).load()
    message = str(failed.value)
    assert "kafka.bootstrap.servers" in message
    # Not a PLAIN or SCRAM login: refused, saying what to give instead.
    assert "kafka.sasl.jaas.config" in message and "sasl.username" in message
    assert "maxOffsetsPerTrigger" in message


# --- a task's read, without Spark ----------------------------------------------------------


def _settings(broker: Any, topic: str, **options: str) -> Any:
    return parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic, **options})


def _read(settings: Any, topic: str, partition: int, start: int, end: int) -> list[Row]:
    rows: list[Row] = []
    for batch in read_range(settings, TopicPartitionRange(topic, partition, start, end)):
        assert batch.num_rows <= kafka_python.BATCH_ROWS + 2000
        rows += [(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in batch.to_pylist()]
    return rows


def _kafka_python_rows(broker: Any, topic: str, partition: int, end: int) -> list[Row]:
    """What kafka-python's own consumer decodes, as rows."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    rows: list[Row] = []
    try:
        while consumer.position(tp) < end:
            for record in consumer.poll(timeout_ms=1000).get(tp, []):
                rows.append((topic, partition, record.offset, _text(record.key), _text(record.value)))
    finally:
        consumer.close()
    return rows


@pytest.mark.parametrize("columnar", [True, False], ids=["batch-decoder", "kafka-python-records"])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_read_decodes_as_kafka_python_does(
    kafka_broker: Any, kafka_topic_prefix: str, columnar: bool, compression: str | None, monkeypatch: Any
) -> None:
    if not columnar:
        # Patched where RangeReader looks it up: the package only re-exports it.
        monkeypatch.setattr(kafka_python.reader, "use_columnar_records", lambda consumer: False)
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic)
    records: list[tuple[int, bytes | None, bytes | None]] = [
        (0, b"k", b"v"),
        (0, None, b"no key"),
        (0, b"tombstone", None),
        (0, b"", b""),
        (0, "ключ".encode(), "значение ✓".encode()),
        (0, b"bad utf-8", b"\xff\xfe ok"),
        (0, b"x" * 70, b"y" * 200_000),  # multi-byte lengths
        *changes(25_000, partitions=1),  # several fetches and Arrow batches
    ]
    expected = produce(kafka_broker, topic, records, compression_type=compression, batch_size=64 * 1024)
    headers = [("trace", b"\x00" * 300), ("empty", b""), ("ключ", b"v")]
    more = changes(300, partitions=1, first=25_000)
    expected += produce(kafka_broker, topic, more, headers, compression_type=compression, batch_size=64 * 1024)
    records += more
    settings = _settings(kafka_broker, topic, **{"kafka.max.partition.fetch.bytes": str(256 * 1024)})
    rows = _read(settings, topic, 0, 0, len(records))
    assert rows == expected
    assert rows == _kafka_python_rows(kafka_broker, topic, 0, len(records))
    # From the middle of a batch, to the middle of another.
    assert _read(settings, topic, 0, 1003, 20_017) == expected[1003:20_017]


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_read_skips_transaction_markers_and_under_read_committed_aborted_records(
    kafka_broker: Any, kafka_topic_prefix: str, isolation: str
) -> None:
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, transactional_id=kafka_topic_prefix)
    sent: list[tuple[bool, Any, bytes]] = []
    try:
        producer.init_transactions()
        for number, commit in enumerate([True, False, True]):
            producer.begin_transaction()
            values = [f"{number}-{i}".encode() for i in range(100)]
            futures = [producer.send(topic, key=b"k", value=v, partition=0) for v in values]
            producer.flush()
            sent += [(commit, f.get(timeout=30), v) for f, v in zip(futures, values, strict=True)]
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        assert consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)] == 303  # and 3 markers
    finally:
        consumer.close()
    rows = _read(_settings(kafka_broker, topic, **{"kafka.isolation.level": isolation}), topic, 0, 0, 303)
    wanted = [(topic, 0, m.offset, "k", v.decode()) for ok, m, v in sent if ok or isolation == "read_uncommitted"]
    assert rows == wanted


def test_a_read_of_deleted_records_fails_naming_the_partition(kafka_broker: Any, kafka_topic_prefix: str) -> None:
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic, partitions=2)
    expected = produce(kafka_broker, topic, changes(400, partitions=2))
    admin = kafka_broker.admin()
    try:
        admin.delete_records({TopicPartition(topic, 1): 150})
    finally:
        admin.close()
    with pytest.raises(KafkaDataLossError, match=rf"records \[0, 150\) of {topic}-1 .* failOnDataLoss"):
        _read(_settings(kafka_broker, topic), topic, 1, 0, 200)
    skipped = _read(_settings(kafka_broker, topic, failOnDataLoss="false"), topic, 1, 0, 200)
    assert skipped == [row for row in expected if row[1] == 1 and 150 <= row[2] < 200]


def test_a_read_of_records_that_never_arrive_times_out_naming_the_partition(
    kafka_broker: Any, kafka_topic_prefix: str
) -> None:
    topic = f"{kafka_topic_prefix}.t"
    create_topic(kafka_broker, topic)
    produce(kafka_broker, topic, changes(10, partitions=1))
    settings = _settings(kafka_broker, topic, **{"kafkaConsumer.pollTimeoutMs": "1500"})
    with pytest.raises(KafkaReadTimeoutError, match=rf"{topic}-0 between offsets 10 and 20 .* holds \[0, 10\)"):
        _read(settings, topic, 0, 0, 20)


# --- planning, without Kafka ---------------------------------------------------------------


def test_admission_shares_the_limit_by_lag_and_admits_exactly_the_limit() -> None:
    start = {("a", 0): 0, ("a", 1): 100, ("b", 0): 5}
    latest = {("a", 0): 1000, ("a", 1): 110, ("b", 0): 5}
    assert admit(start, latest, None) == latest
    assert admit(start, latest, 5000) == latest
    limited = admit(start, latest, 101)
    assert sum(limited[tp] - start[tp] for tp in start) == 101
    assert limited[("a", 0)] == 100 and limited[("a", 1)] == 101 and limited[("b", 0)] == 5
    assert admit({("a", 0): 50}, {("a", 0): 40}, 10) == {("a", 0): 50}  # never backwards


def test_ranges_are_split_only_below_min_partitions() -> None:
    ranges = [TopicPartitionRange("a", 0, 0, 1000), TopicPartitionRange("a", 1, 10, 110)]
    assert split_ranges(ranges, None) == ranges and split_ranges(ranges, 2) == ranges
    pieces = split_ranges(ranges, 4)
    assert [(p.partition, p.start, p.end) for p in pieces] == [
        (0, 0, 250),
        (0, 250, 500),
        (0, 500, 750),
        (0, 750, 1000),
        (1, 10, 110),
    ]


def test_options_are_parsed_and_every_problem_reported_at_once() -> None:
    settings = parse_options(
        {
            "kafka.bootstrap.servers": "b:9092",
            "subscribe": "a, b",
            "startingOffsets": '{"a": {"0": 5, "1": -2}}',
            "kafka.security.protocol": "SASL_SSL",
            "kafka.request.timeout.ms": "5000",
            "kafka.check.crcs": "false",
            "kafka.api.version": "3.7",
            "kafka.ssl.endpoint.identification.algorithm": "",
        }
    )
    assert settings.topics == ("a", "b") and settings.starting == {("a", 0): 5, ("a", 1): -2}
    assert settings.client == {
        "security_protocol": "SASL_SSL",
        "request_timeout_ms": 5000,
        "check_crcs": False,
        "api_version": (3, 7),
        "ssl_check_hostname": False,
    }
    with pytest.raises(ConfigError) as failed:
        parse_options({"kafka.auto.offset.reset": "earliest", "kafka.no.such": "1", "startingOffsets": "soon"})
    keys = [problem.key for problem in failed.value.problems]
    assert keys == [
        "kafka.bootstrap.servers",
        "startingOffsets",
        "kafka.auto.offset.reset",
        "kafka.no.such",
        "subscribe",
    ]
