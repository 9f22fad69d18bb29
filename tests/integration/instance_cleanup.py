"""The autouse fixture of the modules that start detached instances under ``tmp_path/state``:
such an instance has its own session and outlives a failed test, so it is stopped here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_cdc.engine.server import control

#: Fixtures whose teardown drops the database an instance reads.
DATABASES = ("pg_database", "mariadb_database")


@pytest.fixture(autouse=True)
def no_instance_left_running(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Stops the test's instance before its database is dropped, as a user would. Fixtures a test
    names are torn down before autouse ones, so its database fixtures are made this one's own
    (set up first, torn down after the stop)."""
    for name in DATABASES:
        if name in request.fixturenames:
            request.getfixturevalue(name)
    yield
    control.stop({"state.dir": str(tmp_path / "state")}, timeout=30)
