"""Fixtures the integration tests share beyond the session's servers (``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_cdc.local.postgres import PostgresServer


@pytest.fixture(scope="module")
def own_pg() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the requesting module's own: its tests crash and restart it, which
    the session's shared server must never see."""
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.close()
