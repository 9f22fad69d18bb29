import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.engine import OffsetError, SourceRecord, partition_key
from airflow_cdc.engine.offsets import OffsetTracker


def rec(seq: int, part: int = 0) -> SourceRecord:
    return SourceRecord("t", None, None, {"p": part}, {"seq": seq})


def test_prefix_moves_only_over_done_records():
    tracker = OffsetTracker()
    handle = tracker.track([rec(i) for i in range(5)])
    handle.mark(1)
    handle.mark(2)
    assert tracker.committable() == (0, {})
    handle.mark(0)
    seq, positions = tracker.committable()
    assert seq == 3
    assert positions[partition_key({"p": 0})].offset == {"seq": 2}
    handle.mark_range(3, 5)
    assert tracker.committable()[0] == 5
    assert tracker.pending() == 0


def test_prefix_crosses_batches_finished_out_of_order():
    tracker = OffsetTracker()
    first = tracker.track([rec(0), rec(1)])
    second = tracker.track([rec(2), rec(3)])
    second.mark_all()
    assert tracker.committable()[0] == 0
    first.mark_all()
    seq, positions = tracker.committable()
    assert seq == 4
    assert positions[partition_key({"p": 0})].offset == {"seq": 3}


def test_marking_outside_the_batch_is_an_offset_error():
    handle = OffsetTracker().track([rec(0)])
    with pytest.raises(OffsetError):
        handle.mark_range(0, 2)


def test_wait_for_pending_wakes_when_records_finish():
    tracker = OffsetTracker()
    handle = tracker.track([rec(i) for i in range(3)])
    threading.Timer(0.01, handle.mark_all).start()
    assert tracker.wait_for_pending_at_most(0, 5.0)


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 12), min_size=1, max_size=6),
    parts=st.integers(1, 3),
    data=st.data(),
)
def test_committable_is_always_the_longest_done_prefix(sizes, parts, data):
    tracker = OffsetTracker()
    records, handles = [], []
    for size in sizes:
        batch = [rec(len(records) + i, part=(len(records) + i) % parts) for i in range(size)]
        handles.append((tracker.track(batch), len(records)))
        records.extend(batch)
    order = data.draw(st.permutations(range(len(records))))
    done = set()
    for seq in order:
        handle, base = next((h, b) for h, b in reversed(handles) if b <= seq)
        handle.mark(seq - base)
        done.add(seq)
        prefix = 0
        while prefix in done:
            prefix += 1
        committed, positions = tracker.committable()
        assert committed == prefix  # never past an unfinished record
        for key, position in positions.items():
            # the latest record of that partition inside the prefix
            expected = max(s for s in range(prefix) if partition_key(records[s].partition) == key)
            assert position.offset == {"seq": expected}
    assert tracker.pending() == 0
