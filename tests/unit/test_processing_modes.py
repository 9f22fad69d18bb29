import random
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.engine import Engine, JsonSerializer, SerializedRecord, SourceRecord
from airflow_cdc.engine.storage import MemoryOffsetStore
from airflow_cdc.engine.testing import EngineRunner, wait_until

from .scripted import ScriptedConnector, config


def key_of(item) -> int:
    record = item.record if isinstance(item, SerializedRecord) else item
    return record.key["id"]


class CheckingStore(MemoryOffsetStore):
    """Fails the test the moment an offset is committed past a record not yet consumed."""

    def __init__(self, name, consumed, lock):
        super().__init__(name)
        self.consumed, self.lock, self.violations = consumed, lock, []

    def write(self, entries):
        entries = list(entries)
        with self.lock:
            for _, offset in entries:
                missing = [s for s in range(offset["seq"] + 1) if s not in self.consumed]
                if missing:
                    self.violations.append((offset["seq"], missing[:5]))
        super().write(entries)


class Collecting:
    """A batch handler that marks records processed later, from its own thread (like a sink
    that waits for acknowledgements)."""

    def __init__(self):
        self.batches, self.pending = [], []
        self.lock = threading.Lock()

    def handle_batch(self, records, committer):
        with self.lock:
            self.batches.append(list(records))
            self.pending.extend((r, committer) for r in records)
        committer.mark_batch_finished()

    def acknowledge(self, count):
        with self.lock:
            acked, self.pending = self.pending[:count], self.pending[count:]
        for record, committer in acked:
            committer.mark_processed(record)


@pytest.mark.parametrize("mode", ["batch", "ordered", "unordered"])
@pytest.mark.parametrize("serializer", [None, JsonSerializer()], ids=["records", "json"])
def test_each_of_the_six_modes_delivers_everything_and_commits_the_last_offset(mode, serializer):
    seen, lock = [], threading.Lock()

    def consume(item):
        with lock:
            seen.append(item)

    class Handler:
        def handle_batch(self, records, committer):
            seen.extend(records)
            for r in records:
                committer.mark_processed(r)
            committer.mark_batch_finished()

    kwargs = {"batch_handler": Handler()} if mode == "batch" else {"consumer": consume}
    order = "UNORDERED" if mode == "unordered" else "ORDERED"
    connector = ScriptedConnector(total=3000, batch=700)
    engine = Engine(
        config(record_processing_order=order, record_processing_threads=3),
        serializer=serializer,
        connector=connector,
        **kwargs,
    )
    with EngineRunner(engine):
        wait_until(
            lambda: engine.tasks[0].committed.get('{"server":"test","task":0}') == {"seq": 2999},
            10,
            "last offset committed",
        )
    assert sorted(key_of(i) for i in seen) == list(range(3000))
    expected_type = SourceRecord if serializer is None else SerializedRecord
    assert all(type(i) is expected_type for i in seen)
    if mode != "unordered":
        assert [key_of(i) for i in seen] == list(range(3000))


def test_ordered_delivers_in_source_order_despite_random_transform_delays():
    rng = random.Random(7)
    delays = [rng.choice([0, 0, 0, 0.0005, 0.002]) for _ in range(2000)]

    def slow_transform(record):
        time.sleep(delays[record.key["id"]])  # uneven work, so chunks finish out of order
        return record

    seen = []
    engine = Engine(
        config(record_processing_threads=4),
        consumer=lambda r: seen.append(r.key["id"]),
        transforms=[slow_transform],
        connector=ScriptedConnector(total=2000, batch=1000),
    )
    with EngineRunner(engine):
        wait_until(lambda: len(seen) == 2000, 30, "all records")
    assert seen == list(range(2000))


@settings(max_examples=15, deadline=None)
@given(
    delays=st.lists(st.sampled_from([0, 0, 0.0002, 0.001]), min_size=64, max_size=64),
    batch=st.sampled_from([200, 512, 1000]),
)
def test_unordered_never_commits_past_an_unfinished_record(delays, batch):
    consumed, lock = set(), threading.Lock()

    def consume(record):
        time.sleep(delays[record.key["id"] % len(delays)])
        with lock:
            consumed.add(record.key["id"])

    store = CheckingStore("test-engine", consumed, lock)
    engine = Engine(
        config(record_processing_order="UNORDERED", record_processing_threads=4),
        consumer=consume,
        offset_store=store,
        connector=ScriptedConnector(total=1500, batch=batch),
    )
    with EngineRunner(engine):
        wait_until(lambda: store.read({"server": "test", "task": 0}) == {"seq": 1499}, 30, "last offset")
    assert store.violations == []
    assert len(consumed) == 1500


def test_batch_handler_offsets_advance_only_as_records_are_acknowledged():
    handler = Collecting()
    engine = Engine(config(), batch_handler=handler, connector=ScriptedConnector(total=100, batch=25))
    partition = {"server": "test", "task": 0}
    with EngineRunner(engine):
        wait_until(lambda: sum(map(len, handler.batches)) == 100, 10, "all batches")
        assert engine.offset_store.read(partition) is None
        handler.acknowledge(30)
        wait_until(lambda: engine.offset_store.read(partition) == {"seq": 29}, 5, "offset 29")
        handler.acknowledge(70)
        wait_until(lambda: engine.offset_store.read(partition) == {"seq": 99}, 5, "offset 99")
    assert [len(b) for b in handler.batches] == [25, 25, 25, 25]
    assert [r.key["id"] for b in handler.batches for r in b] == list(range(100))


def test_unacknowledged_records_hold_back_polling_at_max_queue_size():
    handler = Collecting()
    connector = ScriptedConnector(total=10_000, batch=100)
    engine = Engine(config(max_queue_size=300), batch_handler=handler, connector=connector)
    with EngineRunner(engine):
        wait_until(lambda: sum(map(len, handler.batches)) >= 300, 10, "queue filled")
        polls = connector.polls
        wait_until(lambda: engine.tasks[0].tracker.pending() > 300, 10, "over the bound")
        # Over the bound the task waits instead of polling, however long we look.
        wait_until(lambda: engine.tasks[0].polled == 400, 10, "one batch beyond the bound, no more")
        assert connector.polls <= polls + 1
        # `polled` counts a batch before the handler has it: acknowledging sooner would miss it.
        wait_until(lambda: sum(map(len, handler.batches)) == 400, 10, "the fourth batch handled")
        handler.acknowledge(400)
        wait_until(lambda: engine.tasks[0].polled >= 800, 10, "polling resumed")


def test_records_dropped_by_a_transform_still_advance_the_offset():
    engine = Engine(
        config(**{"transforms": "drop", "transforms.drop.type": "Filter"}),
        consumer=lambda r: pytest.fail("the filter should drop every record"),
        connector=ScriptedConnector(total=50),
    )
    with EngineRunner(engine):
        wait_until(lambda: engine.offset_store.read({"server": "test", "task": 0}) == {"seq": 49}, 5, "offset")


def test_ordered_prefetches_for_a_blocking_consumer_and_keeps_source_order():
    seen = []

    def blocking(record):
        time.sleep(0.0002)  # a blocking call: the pool prepares the next chunks meanwhile
        seen.append(record.record.key["id"])

    engine = Engine(
        config(record_processing_threads=2),
        consumer=blocking,
        serializer=JsonSerializer(),
        connector=ScriptedConnector(total=3000, batch=1000),
    )
    with EngineRunner(engine):
        wait_until(lambda: len(seen) == 3000, 30, "all records")
        gauge = engine.tasks[0]._processor._gauge
    assert seen == list(range(3000))
    assert gauge.off_cpu > gauge.THRESHOLD  # measured as blocking: chunks were prefetched


class GaugeClocks:
    """The gauge's wall and CPU clocks, advanced by the work itself: deterministic under any load,
    and read by nobody else (a monkeypatched ``time.process_time`` is read by every thread)."""

    def __init__(self):
        self.wall_s = self.cpu_s = 0.0
        self.reads = 0

    def wall(self):
        self.reads += 1
        return self.wall_s

    def cpu(self):
        self.reads += 1
        return self.cpu_s

    def computing(self, seconds=0.001):
        def work():
            self.wall_s += seconds
            self.cpu_s += seconds

        return work

    def blocking(self, seconds=0.002):
        def work():
            self.wall_s += seconds

        return work


def test_blocking_gauge_tells_cpu_work_from_blocking_work():
    from airflow_cdc.engine.processing import BlockingGauge

    cpu_clocks, blocked_clocks = GaugeClocks(), GaugeClocks()
    cpu = BlockingGauge(wall=cpu_clocks.wall, cpu=cpu_clocks.cpu)
    blocked = BlockingGauge(wall=blocked_clocks.wall, cpu=blocked_clocks.cpu)
    for _ in range(20):
        cpu.measure(cpu_clocks.computing())
        blocked.measure(blocked_clocks.blocking())
    assert cpu.off_cpu == 0.0
    assert blocked.off_cpu > BlockingGauge.THRESHOLD
    assert not cpu.prefetch_pays()
    # While prefetching, it stops once every PROBE_EVERY chunks to measure again.
    answers = [blocked.prefetch_pays() for _ in range(BlockingGauge.PROBE_EVERY)]
    assert answers[:-1] == [True] * (BlockingGauge.PROBE_EVERY - 1) and answers[-1] is False


def test_blocking_gauge_samples_cpu_bound_chunks_and_measures_blocking_ones():
    from airflow_cdc.engine.processing import BlockingGauge

    clocks = GaugeClocks()
    gauge = BlockingGauge(wall=clocks.wall, cpu=clocks.cpu)
    for _ in range(2 * BlockingGauge.SAMPLE_EVERY):
        gauge.measure(clocks.computing())
    assert clocks.reads == 2 * 4  # two chunks measured, each reads both clocks twice
    for _ in range(BlockingGauge.SAMPLE_EVERY):
        gauge.measure(clocks.blocking())
    # Sampled until one blocking chunk is measured; from then on every inline chunk is.
    assert gauge.off_cpu > BlockingGauge.THRESHOLD
    clocks.reads = 0
    gauge.measure(clocks.blocking())
    assert clocks.reads == 4


@pytest.mark.parametrize("mode", ["batch", "ordered", "unordered"])
def test_position_markers_advance_the_offset_but_are_never_delivered(mode):
    from airflow_cdc.engine import PositionMarker, SourceConnector, SourceTask

    delivered = []

    class MarkerTask(SourceTask):
        def start(self, context):
            self.sent = False

        def poll(self):
            if self.sent:
                return []
            self.sent = True
            from .scripted import record

            return [record(0, 0), PositionMarker.at({"server": "test", "task": 0}, {"seq": 1})]

        def stop(self):
            pass

    class MarkerConnector(SourceConnector):
        def task_class(self):
            return MarkerTask

        def task_configs(self, max_tasks):
            return [self.config]

    class Handler:
        def handle_batch(self, records, committer):
            delivered.extend(records)
            committer.mark_all_processed()

    kwargs = {"batch_handler": Handler()} if mode == "batch" else {"consumer": delivered.append}
    order = "UNORDERED" if mode == "unordered" else "ORDERED"
    engine = Engine(config(record_processing_order=order), connector=MarkerConnector(), **kwargs)
    with EngineRunner(engine):
        wait_until(lambda: engine.offset_store.read({"server": "test", "task": 0}) == {"seq": 1}, 5, "marker")
    assert [r.key for r in delivered] == [{"id": 0}]


def holding_engine(*, fails: bool) -> tuple[Engine, list, threading.Event]:
    """An engine whose task reads one record, then holds two back for later polls (``drain``);
    its second poll fails if ``fails``."""
    from airflow_cdc.engine import SourceConnector, SourceTask

    from .scripted import record

    delivered: list = []
    polled = threading.Event()

    class HoldingTask(SourceTask):
        def start(self, context):
            self.sent = False

        def poll(self):
            if not self.sent:
                self.sent = True
                return [record(0, 0)]
            if fails:
                raise ValueError("the source broke")
            polled.set()
            return []

        def drain(self):
            return [record(0, 1), record(0, 2)]

        def stop(self):
            pass

    class HoldingConnector(SourceConnector):
        def task_class(self):
            return HoldingTask

        def task_configs(self, max_tasks):
            return [self.config]

    return Engine(config(), connector=HoldingConnector(), consumer=delivered.append), delivered, polled


def test_a_clean_stop_delivers_and_commits_what_the_task_held_back():
    engine, delivered, polled = holding_engine(fails=False)
    with EngineRunner(engine):
        wait_until(polled.is_set, 5, "the first poll delivered")
    assert [r.key for r in delivered] == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert engine.offset_store.read({"server": "test", "task": 0}) == {"seq": 2}


def test_after_a_failure_nothing_more_is_taken_from_the_task():
    """The restart reads it again from the committed offset."""
    engine, delivered, _ = holding_engine(fails=True)
    EngineRunner(engine).start().join(10)  # the task's failure stops the engine
    assert [r.key for r in delivered] == [{"id": 0}]
    assert engine.offset_store.read({"server": "test", "task": 0}) in (None, {"seq": 0})
