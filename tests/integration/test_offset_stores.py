"""Every offset store honours one contract, against the real services of the fixtures (Apache
Kafka, PostgreSQL, MariaDB): durable across a fresh instance and a restart of its server, all or
nothing, delete, engines isolated by name; an engine resumes after its committed offset;
unreachable servers fail fast with the key to fix."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_cdc.engine import ConfigError, Engine, EngineFailedError, OffsetError, RetriableError
from airflow_cdc.engine.storage import MemoryOffsetStore, OffsetStore
from airflow_cdc.engine.testing import EngineRunner, wait_until
from airflow_cdc.local.ports import free_port

pytestmark = pytest.mark.integration

STORES = ["memory", "file", "kafka", "jdbc-postgres", "jdbc-mariadb"]
Opener = Callable[[str], OffsetStore]


def kafka_config(kafka_broker: Any, topic: str) -> dict[str, Any]:
    return {
        "offset.storage": "kafka",
        "bootstrap.servers": kafka_broker.bootstrap_servers,
        "offset.storage.topic": topic,
    }


def postgres_config(pg_server: Any, database: str) -> dict[str, Any]:
    return {
        "offset.storage": "jdbc",
        "offset.storage.jdbc.url": f"jdbc:postgresql://{pg_server.host}:{pg_server.port}/{database}",
        "offset.storage.jdbc.user": pg_server.user,
        "offset.storage.jdbc.password": pg_server.password,
    }


def mariadb_config(mariadb_server: Any, database: str) -> dict[str, Any]:
    return {
        "offset.storage": "jdbc",
        "offset.storage.jdbc.url": f"jdbc:mariadb://{mariadb_server.host}:{mariadb_server.port}/{database}",
        "offset.storage.jdbc.user": mariadb_server.user,
        "offset.storage.jdbc.password": mariadb_server.password,
    }


@pytest.fixture
def store_config(request: pytest.FixtureRequest, tmp_path: Any, kafka_topic_prefix: str) -> dict[str, Any]:
    """The engine configuration of one store kind, on the real service (started lazily)."""
    kind = request.param
    if kind == "memory":
        return {"offset.storage": "memory"}
    if kind == "file":
        return {"offset.storage": "file", "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    if kind == "kafka":
        return kafka_config(request.getfixturevalue("kafka_broker"), f"{kafka_topic_prefix}-offsets")
    if kind == "jdbc-postgres":
        return postgres_config(request.getfixturevalue("pg_server"), request.getfixturevalue("pg_database"))
    return mariadb_config(request.getfixturevalue("mariadb_server"), request.getfixturevalue("mariadb_database"))


@pytest.fixture
def open_store(store_config: dict[str, Any]) -> Iterator[Opener]:
    """``open_store(engine_name)``: a started store; every call is a fresh instance on the same
    backing file, topic or table. A memory store lives only as long as its instance, so there
    "fresh" is the same instance."""
    opened: list[OffsetStore] = []
    memory: dict[str, MemoryOffsetStore] = {}

    def open_(name: str) -> OffsetStore:
        if store_config["offset.storage"] == "memory":
            return memory.setdefault(name, MemoryOffsetStore(name))
        store = Engine({"name": name, "connector.class": "synthetic", **store_config}, consumer=print).offset_store
        store.start()
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.stop()


def _all(kind_marks: list[str] = STORES) -> Any:
    return pytest.mark.parametrize("store_config", kind_marks, indirect=True)


@_all()
def test_offsets_survive_a_fresh_store_instance(open_store: Opener) -> None:
    store = open_store("inventory")
    assert store.read({"server": "db1"}) is None
    store.write([({"server": "db1"}, {"lsn": 10, "txId": 7}), ({"server": "db2"}, {"lsn": 3})])
    store.write([({"server": "db1"}, {"lsn": 12, "txId": 8, "ts_usec": 1_700_000_000_000_000})])
    assert store.read({"server": "db1"}) == {"lsn": 12, "txId": 8, "ts_usec": 1_700_000_000_000_000}

    fresh = open_store("inventory")
    assert fresh.read({"server": "db1"}) == {"lsn": 12, "txId": 8, "ts_usec": 1_700_000_000_000_000}
    assert fresh.read({"server": "db2"}) == {"lsn": 3}
    assert sorted((p["server"], o) for p, o in fresh.entries()) == [
        ("db1", {"lsn": 12, "ts_usec": 1_700_000_000_000_000, "txId": 8}),
        ("db2", {"lsn": 3}),
    ]


@_all()
def test_a_write_that_cannot_be_stored_changes_nothing(open_store: Opener) -> None:
    store = open_store("inventory")
    store.write([({"server": "db1"}, {"lsn": 1})])
    with pytest.raises(OffsetError, match="not JSON-serializable"):
        store.write([({"server": "db1"}, {"lsn": 2}), ({"server": "db2"}, {"lsn": object()})])
    assert store.read({"server": "db1"}) == {"lsn": 1}
    fresh = open_store("inventory")
    assert fresh.read({"server": "db1"}) == {"lsn": 1}
    assert fresh.read({"server": "db2"}) is None


@_all(["jdbc-postgres", "jdbc-mariadb"])
def test_jdbc_write_is_one_transaction(open_store: Opener) -> None:
    """The database itself rejects the second row (offset_val is Debezium's VARCHAR(1255)): the
    first row of the same write is rolled back with it."""
    store = open_store("inventory")
    store.write([({"server": "db1"}, {"lsn": 1})])
    with pytest.raises(OffsetError, match="writing 2 offset"):
        store.write([({"server": "db1"}, {"lsn": 2}), ({"server": "db2"}, {"blob": "x" * 2000})])
    assert open_store("inventory").read({"server": "db1"}) == {"lsn": 1}
    store.write([({"server": "db1"}, {"lsn": 3})])  # the connection is usable after the rollback
    assert open_store("inventory").read({"server": "db1"}) == {"lsn": 3}


@_all()
def test_delete_removes_one_partition(open_store: Opener) -> None:
    store = open_store("inventory")
    store.write([({"server": "db1"}, {"lsn": 1}), ({"server": "db2"}, {"lsn": 2})])
    store.delete({"server": "db1"})
    store.delete({"server": "never-written"})
    assert store.read({"server": "db1"}) is None
    fresh = open_store("inventory")
    assert fresh.read({"server": "db1"}) is None
    assert fresh.read({"server": "db2"}) == {"lsn": 2}
    fresh.write([({"server": "db1"}, {"lsn": 5})])  # a reset partition commits again
    assert open_store("inventory").read({"server": "db1"}) == {"lsn": 5}


@_all()
def test_two_engine_names_do_not_see_each_others_offsets(open_store: Opener) -> None:
    first, second = open_store("orders"), open_store("billing")
    first.write([({"server": "db"}, {"lsn": 1})])
    second.write([({"server": "db"}, {"lsn": 99})])
    second.delete({"server": "db"})
    assert open_store("orders").read({"server": "db"}) == {"lsn": 1}
    assert open_store("billing").read({"server": "db"}) is None
    assert [p for p, _ in open_store("billing").entries()] == []


# -- the engine on the durable stores -----------------------------------------------------------


def run_synthetic(name: str, store_config: dict[str, Any], events: int, stop_after: int) -> tuple[list[int], int]:
    """Run the synthetic source until ``stop_after`` events were consumed; the sequence numbers
    consumed, and the offset the store holds after the engine stopped."""
    seen: list[int] = []
    config = {
        "name": name,
        "connector.class": "synthetic",
        "topic.prefix": "syn",
        "synthetic.rate": 4000,
        "synthetic.max.events": events,
        "max.batch.size": 50,
        "poll.interval.ms": 50,
        "offset.flush.interval.ms": 20,
        **store_config,
    }
    engine = Engine(config, consumer=lambda record: seen.append(record.offset["seq"]))
    with EngineRunner(engine):
        wait_until(lambda: len(seen) >= stop_after, 30, f"{stop_after} events consumed")
    assert engine.error is None
    reopened = Engine(config, consumer=print).offset_store
    reopened.start()
    try:
        offset = reopened.read({"server": "syn", "task": 0})
    finally:
        reopened.stop()
    assert offset is not None
    return seen, int(offset["seq"])


@_all(["kafka", "jdbc-postgres", "jdbc-mariadb"])
def test_engine_restarts_after_its_committed_offset(store_config: dict[str, Any]) -> None:
    name = f"resume-{uuid.uuid4().hex[:8]}"
    first, committed = run_synthetic(name, store_config, events=1000, stop_after=300)
    assert committed == max(first)  # the final commit covers everything consumed, nothing more
    second, committed = run_synthetic(name, store_config, events=1000, stop_after=1000 - len(first))
    assert second[0] == max(first) + 1
    assert sorted(set(first) | set(second)) == list(range(1000))
    assert committed == 999


# -- configuration and unreachable servers ------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"offset.storage": "kafka", "offset.storage.topic": "t"}, "bootstrap.servers"),
        ({"offset.storage": "kafka", "bootstrap.servers": "localhost:9092"}, "offset.storage.topic"),
        (
            {"offset.storage": "org.apache.kafka.connect.storage.KafkaOffsetBackingStore", "offset.storage.topic": "t"},
            "bootstrap.servers",
        ),
        ({"offset.storage": "jdbc"}, "offset.storage.jdbc.url"),
        ({"offset.storage": "io.debezium.storage.jdbc.offset.JdbcOffsetBackingStore"}, "offset.storage.jdbc.url"),
        (
            {"offset.storage": "jdbc", "offset.storage.jdbc.url": "jdbc:oracle:thin:@h:1521/x"},
            "offset.storage.jdbc.url",
        ),
        ({"offset.storage": "jdbc", "offset.storage.jdbc.url": "jdbc:postgresql://h:5432"}, "offset.storage.jdbc.url"),
        (
            {
                "offset.storage": "jdbc",
                "offset.storage.jdbc.url": "jdbc:mysql://h/db",
                "offset.storage.jdbc.table.name": "x; drop",
            },
            "offset.storage.jdbc.offset.table.name",
        ),
    ],
)
def test_a_missing_or_bad_key_is_a_config_error_naming_it(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Engine({"name": "e", "connector.class": "synthetic", **config}, consumer=print)
    assert [p.key for p in caught.value.problems] == [key]
    assert caught.value.problems[0].fix


def test_debezium_3_jdbc_key_names_are_accepted() -> None:
    engine = Engine(
        {
            "name": "e",
            "connector.class": "synthetic",
            "offset.storage": "jdbc",
            "offset.storage.jdbc.connection.url": "jdbc:postgresql://db.example:5433/cdc?sslmode=require",
            "offset.storage.jdbc.connection.user": "cdc",
            "offset.storage.jdbc.connection.password": "secret",
            "offset.storage.jdbc.table.name": "cdc.offsets",
        },
        consumer=print,
    )
    store: Any = engine.offset_store
    assert (store.url.host, store.url.port, store.url.database, store.url.sslmode) == (
        "db.example",
        5433,
        "cdc",
        "require",
    )
    assert store.table == "cdc.offsets"
    assert "secret" not in repr(store.url)


def closed_port() -> int:
    return free_port()  # nothing listens there


def test_unreachable_broker_fails_fast_naming_bootstrap_servers() -> None:
    port = closed_port()
    engine = Engine(
        {
            "name": "e",
            "connector.class": "synthetic",
            "offset.storage": "kafka",
            "bootstrap.servers": f"127.0.0.1:{port}",
            "offset.storage.topic": "offsets",
            "request.timeout.ms": 2000,
        },
        consumer=print,
    )
    started = time.monotonic()
    with pytest.raises(EngineFailedError, match=f"bootstrap.servers=127.0.0.1:{port}") as caught:
        engine.run()
    assert isinstance(caught.value.__cause__, RetriableError)
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("subprotocol", ["postgresql", "mariadb"])
def test_unreachable_database_fails_fast_naming_the_url_key(subprotocol: str) -> None:
    port = closed_port()
    engine = Engine(
        {
            "name": "e",
            "connector.class": "synthetic",
            "offset.storage": "jdbc",
            "offset.storage.jdbc.url": f"jdbc:{subprotocol}://127.0.0.1:{port}/cdc?password=hunter2",
            "offset.storage.jdbc.connection.retry.max.attempts": 2,
            "offset.storage.jdbc.connection.wait.retry.delay.ms": 100,
        },
        consumer=print,
    )
    started = time.monotonic()
    with pytest.raises(EngineFailedError, match=r"offset\.storage\.jdbc\.url.*after 2 attempt") as caught:
        engine.run()
    assert isinstance(caught.value.__cause__, RetriableError)
    assert "hunter2" not in str(caught.value)
    assert time.monotonic() - started < 15


def test_kafka_write_while_the_broker_is_down_fails_within_the_flush_timeout(
    restartable_kafka_broker: Any, kafka_topic_prefix: str
) -> None:
    config = {
        **kafka_config(restartable_kafka_broker, f"{kafka_topic_prefix}-offsets"),
        "offset.flush.timeout.ms": 1500,
    }
    store = Engine({"name": "e", "connector.class": "synthetic", **config}, consumer=print).offset_store
    store.start()
    try:
        store.write([({"server": "db"}, {"lsn": 1})])
        restartable_kafka_broker.stop()
        started = time.monotonic()
        with pytest.raises(RetriableError, match=r"bootstrap\.servers="):
            store.write([({"server": "db"}, {"lsn": 2})])
        assert time.monotonic() - started < 10
        assert store.read({"server": "db"}) == {"lsn": 1}
    finally:
        store.stop()


def test_jdbc_store_reconnects_after_a_database_restart(pg_server: Any, pg_database: str) -> None:
    if pg_server.external:
        pytest.skip("CDC_TEST_PG_DSN points at a server the tests cannot restart")
    config = {**postgres_config(pg_server, pg_database), "offset.storage.jdbc.connection.wait.retry.delay.ms": 200}
    store = Engine({"name": "e", "connector.class": "synthetic", **config}, consumer=print).offset_store
    store.start()
    try:
        store.write([({"server": "db"}, {"lsn": 1})])
        pg_server.stop()
        pg_server.start()
        store.write([({"server": "db"}, {"lsn": 2})])  # the old connection is dead: a new one is opened
    finally:
        store.stop()
    fresh = Engine({"name": "e", "connector.class": "synthetic", **config}, consumer=print).offset_store
    fresh.start()
    try:
        assert fresh.read({"server": "db"}) == {"lsn": 2}
    finally:
        fresh.stop()


@_all(["kafka"])
def test_kafka_store_reads_a_multi_record_last_batch_to_its_end(open_store: Opener) -> None:
    """The last write is one batch of several records (one per partition): a reader that took
    the end of the topic from the batch's first record would miss the others."""
    store = open_store("inventory")
    store.write([({"server": "db0"}, {"lsn": 0})])
    store.write([({"server": f"db{i}"}, {"lsn": i * 10}) for i in range(1, 6)])
    fresh = open_store("inventory")
    assert sorted((p["server"], o["lsn"]) for p, o in fresh.entries()) == [(f"db{i}", i * 10) for i in range(6)]


def _kafka_store(config: dict[str, Any]) -> OffsetStore:
    store = Engine({"name": "inventory", "connector.class": "synthetic", **config}, consumer=print).offset_store
    store.start()
    return store


def test_kafka_offsets_survive_a_broker_restart(restartable_kafka_broker: Any, kafka_topic_prefix: str) -> None:
    """The offsets are records in the broker's log, not in its memory: a store started after the
    broker came back reads what was committed before it went down, deletes included, and the
    store that wrote them goes on writing through new connections."""
    config = kafka_config(restartable_kafka_broker, f"{kafka_topic_prefix}-offsets")
    store = _kafka_store(config)
    try:
        store.write([({"server": "db1"}, {"lsn": 10, "txId": 7}), ({"server": "db2"}, {"lsn": 20})])
        store.write([({"server": "db1"}, {"lsn": 11, "txId": 8}), ({"server": "db3"}, {"lsn": 30})])
        store.delete({"server": "db2"})
        restartable_kafka_broker.stop()
        restartable_kafka_broker.start()
        after = _kafka_store(config)
        try:
            assert sorted((p["server"], o) for p, o in after.entries()) == [
                ("db1", {"lsn": 11, "txId": 8}),
                ("db3", {"lsn": 30}),
            ]
        finally:
            after.stop()
        store.write([({"server": "db1"}, {"lsn": 12, "txId": 9})])
    finally:
        store.stop()
    fresh = _kafka_store(config)
    try:
        assert fresh.read({"server": "db1"}) == {"lsn": 12, "txId": 9}
        assert fresh.read({"server": "db2"}) is None
    finally:
        fresh.stop()
