"""The order test files run in: the longest first, so that two workers end together.

``scripts/test`` runs pytest in two processes (pytest-xdist, ``--dist loadfile
--no-loadscope-reorder``): each worker takes the next whole file in collection order when it runs
out. A file of several minutes taken last runs alone at the end (one such file left the other
worker idle for 10 of 56 minutes), so the files that take minutes come first and the many short
ones fill in at the end. The list is from the durations pytest prints (``--durations=30``):
a new slow file belongs here, and a stale entry only costs balance, never a test.
"""

from __future__ import annotations

import pytest

#: Files of minutes, longest first (their tests' total, measured with two workers on 2 cores).
LONGEST = (
    "tests/system/test_example_on_change.py",
    "tests/integration/spark/test_apply_job.py",
    "tests/integration/spark/test_apply_transactions.py",
    "tests/system/test_validate_repair.py",
    "tests/integration/spark/test_schema_evolution.py",
    "tests/system/test_first_run.py",
    "tests/system/test_ui.py",
    "tests/system/test_demo.py",
    "tests/integration/spark/test_schema_change_crash.py",
    "tests/system/test_example_declared.py",
    "tests/system/test_declared_on_scheduler.py",
    "tests/integration/spark/test_lake_schema_changes.py",
    "tests/system/test_example_on_connect.py",
    "tests/integration/test_kafka_sink_retrying.py",
)
#: Then the rest of these folders (each in collection order), then everything else.
SLOW_FOLDERS = ("tests/system/", "tests/integration/spark/", "tests/chaos/", "tests/compat/")


def rank(nodeid: str) -> int:
    path = nodeid.split("::", 1)[0]
    if path in LONGEST:
        return LONGEST.index(path)
    for index, folder in enumerate(SLOW_FOLDERS):
        if path.startswith(folder):
            return len(LONGEST) + index
    return len(LONGEST) + len(SLOW_FOLDERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A stable sort: tests keep their order within a file, and every worker collects the same order.
    items.sort(key=lambda item: rank(item.nodeid))
