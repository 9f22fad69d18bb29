"""The health figures' judging (``airflow_cdc.health``): what the operator fails on and the page
shows in red, with the fix; the age of the last committed event from Debezium's offsets."""

from __future__ import annotations

from airflow_cdc.engine.server.models import OffsetEntry
from airflow_cdc.health import RETAINED_WAL_FIX, HealthReading, HealthThresholds, last_event_age, problems


def test_each_threshold_passed_is_a_reason_with_its_fix() -> None:
    reading = HealthReading(lag=5_000_000, lag_unit="bytes", retained_bytes=3_000_000_000, idle_s=7200.0)
    found = problems(reading, HealthThresholds(max_lag=1_000_000, max_retained_bytes=1 << 30, max_idle_s=3600))
    assert len(found) == 3
    assert found[0].startswith("lag is 5,000,000 bytes, past the threshold of 1,000,000")
    assert "retains 3,000,000,000 bytes of WAL" in found[1] and found[1].endswith(RETAINED_WAL_FIX)
    assert found[2].startswith("the last committed event is 7,200 s old")
    assert problems(reading, HealthThresholds()) == []  # nothing asked, nothing judged
    assert problems(HealthReading(), HealthThresholds(0, 0, 0)) == []  # unknown figures are not failures


def test_the_last_event_is_the_newest_commit_time_of_any_partition() -> None:
    offsets = [
        OffsetEntry({"server": "a"}, {"lsn": 1, "ts_usec": 1_000_000_000_000_000}),  # PostgreSQL: microseconds
        OffsetEntry({"server": "b"}, {"file": "binlog.000001", "pos": 4, "ts_sec": 1_000_000_100}),  # MySQL
        OffsetEntry({"server": "c"}, {"lsn": 2, "ts_usec": 0}),  # no event yet
    ]
    assert last_event_age(offsets, now=1_000_000_160) == 60.0
    assert last_event_age([OffsetEntry({"server": "c"}, {"lsn": 2})], now=5.0) is None
