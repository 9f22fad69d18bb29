"""The bounded capture under CdcCaptureOperator, on the synthetic source (no Airflow, no
database): each bound stops it, runs go on from each other's offsets, a running instance
refuses it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine.errors import OffsetError, RefusedError
from airflow_cdc.engine.server.bounded import CaptureBounds, capture
from airflow_cdc.engine.server.instance_files import offsets_lock


def synthetic(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "syn-capture",
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.max.events": 500,
        "state.dir": str(tmp_path / "state"),
        "offset.flush.interval.ms": 20,
        "sink.type": "changelog",
        "sink.changelog.segment.max.ms": 20,
        **extra,
    }


def test_each_bound_stops_a_run_and_the_next_goes_on(tmp_path: Path) -> None:
    props = synthetic(tmp_path)
    first = capture(props, CaptureBounds(max_records=100, max_duration=60))
    assert first.stopped_by == "max_records" and first.records >= 100
    assert sum(first.topic_rows.values()) >= first.records and set(first.topic_rows) == {"syn.inventory.customers"}
    assert first.offsets[0]["partition"] == {"server": "syn", "task": 0}
    committed = int(first.offsets[0]["position"])
    assert committed + 1 == first.records  # the synthetic position is the event number

    second = capture(props, CaptureBounds(target_position="499", max_duration=60))
    assert second.stopped_by == "target_position" and second.offsets[0]["position"] == "499"
    assert second.records == 499 - committed  # from where the first stopped, nothing twice

    idle = capture(props, CaptureBounds(max_duration=0.5))
    assert (idle.stopped_by, idle.records, idle.offsets[0]["position"]) == ("max_duration", 0, "499")


def test_a_running_instance_refuses_a_capture_and_bad_bounds_are_named(tmp_path: Path) -> None:
    props = synthetic(tmp_path)
    with offsets_lock(Path(props["state.dir"])), pytest.raises(RefusedError, match="stop the instance first"):
        capture(props, CaptureBounds(max_records=1))
    with pytest.raises(OffsetError, match="event number"):
        capture(props, CaptureBounds(target_position="0/16B3748"))
    assert CaptureBounds().problems() == [
        "give max_records, max_duration or target_position: a capture without a bound never ends"
    ]
