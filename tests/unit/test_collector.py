import gc
import threading

import pytest

from airflow_cdc.engine import Engine, collector
from airflow_cdc.engine.testing import wait_until


@pytest.fixture
def default_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_the_threshold_is_raised_while_engines_run_and_restored_after_the_last(default_thresholds) -> None:
    assert collector.raise_threshold(10_000)
    assert collector.raise_threshold(10_000)
    assert gc.get_threshold() == (10_000, 10, 10)
    collector.release()
    assert gc.get_threshold() == (10_000, 10, 10)  # one engine still runs
    collector.release()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_or_zero_is_left_alone(default_thresholds) -> None:
    gc.set_threshold(50_000, 10, 10)
    assert not collector.raise_threshold(10_000)
    assert gc.get_threshold() == (50_000, 10, 10)
    gc.set_threshold(700, 10, 10)
    assert not collector.raise_threshold(0)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_setting_changed_by_the_application_meanwhile_is_kept(default_thresholds) -> None:
    assert collector.raise_threshold(10_000)
    gc.set_threshold(2_000, 5, 5)
    collector.release()
    assert gc.get_threshold() == (2_000, 5, 5)


def test_an_engine_raises_the_threshold_while_it_runs(default_thresholds) -> None:
    seen: list[tuple[int, int, int]] = []

    def consume(record: object) -> None:
        seen.append(gc.get_threshold())

    engine = Engine(
        {"name": "gc", "connector.class": "synthetic", "synthetic.max.events": 5, "offset.storage": "memory"},
        consumer=consume,
    )
    thread = threading.Thread(target=engine.run)
    thread.start()
    wait_until(lambda: len(seen) >= 5, 30, "records consumed")
    engine.close(10)
    thread.join(10)
    assert seen and seen[0][0] == 10_000
    assert gc.get_threshold() == (700, 10, 10)
