"""The order test files go to the two xdist workers in (ADR 0034): xdist's own order (the files
with the most tests first, ``--loadscope-reorder``), except that the longest file goes first.

With xdist's order alone the few long system files, one test or two each, come last, and one
worker ran ``test_example_on_change.py`` (about 400 s) alone for the last ten minutes. Putting
every long file first instead had both workers in heavy Airflow and Spark tests at once, and
was slower; only the one file that ran alone moves. ``scripts/test`` passes
``--no-loadscope-reorder`` so that xdist keeps this order. A run in one process is left alone.
"""

from __future__ import annotations

import pytest

#: Files started first, one per worker at most: each alone takes several minutes.
FIRST = ("tests/system/test_example_on_change.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: the collection order stays
        return
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    # Stable: within a file, and among files of as many tests, the collection order stays.
    files = sorted(by_file, key=lambda path: (path not in FIRST, -len(by_file[path])))
    items[:] = [item for path in files for item in by_file[path]]
