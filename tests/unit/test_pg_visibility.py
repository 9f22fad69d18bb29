"""A read's PostgreSQL snapshot judges the stream's 32-bit transaction ids (no server needed)."""

from __future__ import annotations

from airflow_cdc.engine.sources.postgres.visibility import ReadSnapshot


def test_a_snapshot_sees_what_completed_before_it() -> None:
    snapshot = ReadSnapshot.parse("100:105:100,102")
    assert [tx for tx in range(98, 108) if snapshot.sees(tx)] == [98, 99, 101, 103, 104]
    assert not snapshot.sees(None)


def test_stream_ids_are_widened_across_the_wraparound() -> None:
    epoch = 2**32
    snapshot = ReadSnapshot.parse(f"{epoch - 3}:{epoch + 5}:{epoch - 2}")
    assert not snapshot.sees(epoch - 2)  # in progress, named by its 32-bit id
    assert snapshot.sees(epoch - 1) and snapshot.sees(3)  # 3 is epoch + 3
    assert not snapshot.sees(5) and not snapshot.sees(6)  # at or past xmax
    assert snapshot.sees(epoch - 4)  # below xmin
