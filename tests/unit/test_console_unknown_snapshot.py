"""``snapshot watch --id`` of an id the instance does not know: it waits ``wait`` seconds (a
snapshot signalled a moment ago shows up by then), then ends with exit 1 and the ids there are.
Driven by scripted observations on a clock that moves only when the watch sleeps."""

from __future__ import annotations

import io

from rich.console import Console

from airflow_cdc import console
from airflow_cdc.monitoring import InstanceView
from tests.unit.test_console import RECORDED_SNAPSHOTS, WIDTH, instance, two_tables


class Clock:
    """Time that passes only in the watch's sleeps; ``views`` observed in turn (the last again)."""

    def __init__(self, *views: InstanceView) -> None:
        self.now = 0.0
        self.views = list(views)
        self.looks = 0

    def observe(self) -> InstanceView:
        self.looks += 1
        return self.views.pop(0) if len(self.views) > 1 else self.views[0]

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def watch(clock: Clock, snapshot_id: str | None) -> tuple[int, list[str]]:
    log = Console(file=io.StringIO(), record=True, width=WIDTH, force_terminal=False, color_system=None)
    code = console.follow_snapshot(
        clock.observe,
        log,
        label="shop",
        snapshot_id=snapshot_id,
        interval=1,
        sleep=clock.sleep,
        wait=3,
        clock=lambda: clock.now,
        listing="airflow-cdc status shop",
    )
    return code, log.export_text().splitlines()


def test_an_id_the_instance_never_knows_ends_the_watch_after_the_wait_naming_the_ids_it_knows() -> None:
    clock = Clock(instance(RECORDED_SNAPSHOTS["snap-1"], RECORDED_SNAPSHOTS["snap-2"]))
    code, lines = watch(clock, "nosuch")
    assert code == 1 and clock.looks == 4 and clock.now == 3  # looked at 0, 1, 2 and 3 s
    assert lines[0] == "waiting for snapshot nosuch on shop (Ctrl-C to leave)"
    assert lines[-1] == (
        "no snapshot 'nosuch' on shop: it knows none by that id, and none started in 3s; its snapshots: "
        f"snap-1 (completed), snap-2 ({RECORDED_SNAPSHOTS['snap-2'].state}); `airflow-cdc status shop` lists "
        "them; --wait SECONDS waits longer for one signalled just now"
    )


def test_an_instance_without_snapshots_says_it_has_none() -> None:
    code, lines = watch(Clock(instance()), "nosuch")
    assert code == 1 and "its snapshots: none;" in lines[-1]


def test_an_id_that_starts_within_the_wait_is_followed_to_its_end() -> None:
    completed = RECORDED_SNAPSHOTS["snap-1"]
    clock = Clock(instance(), instance(), instance(), instance(two_tables()), instance(completed))
    code, lines = watch(clock, "snap-1")
    assert code == 0 and clock.now == 4  # the wait ends once the id is known, not 3 s after the start
    assert lines[1].startswith("snap-1 running") and lines[2] == console.snapshot_line(completed)


def test_without_an_id_the_watch_waits_for_any_snapshot_as_long_as_it_takes() -> None:
    clock = Clock(*[instance()] * 10, instance(RECORDED_SNAPSHOTS["snap-1"]))
    code, _ = watch(clock, None)
    assert code == 0 and clock.now == 10
